# Sourced by scripts/bench: the TypeScript peer (benches/peer) installed in
# target/peer, so that the bench measures idemgate beside it (BENCH_PEER).
# Its middleware comes from npm at the version benches/peer/package.json
# pins; where the registry does not have it, HONO_IDEMPOTENCY_SOURCE may
# name a checkout of its repository, whose TypeScript sources wrangler
# bundles as they are. Without either, the bench runs without the peer and
# says so.
PEER_DIR="$ROOT/target/peer"

# A package of the checkout's sources: its exports point at the `.ts` files.
install_peer_middleware_from_source() {
  local package="$PEER_DIR/node_modules/hono-idempotency"
  rm -rf "$package"
  mkdir -p "$package"
  cp -r "$HONO_IDEMPOTENCY_SOURCE/src" "$package/src"
  cat > "$package/package.json" <<'JSON'
{
  "name": "hono-idempotency",
  "type": "module",
  "exports": {
    ".": "./src/index.ts",
    "./stores/durable-objects": "./src/stores/durable-objects.ts"
  }
}
JSON
}

ensure_peer() {
  if [ -n "${BENCH_PEER:-}" ]; then
    return 0
  fi
  local stamp="$PEER_DIR/.installed" want
  want="$(cat "$ROOT"/benches/peer/* | sha256sum | cut -d' ' -f1) ${HONO_IDEMPOTENCY_SOURCE:-npm}"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing the TypeScript peer (benches/peer) into target/peer"
    rm -rf "$PEER_DIR"
    mkdir -p "$PEER_DIR"
    cp "$ROOT"/benches/peer/* "$PEER_DIR/"
    if [ -n "${HONO_IDEMPOTENCY_SOURCE:-}" ]; then
      # npm would look for the middleware too: it is placed by hand below.
      sed -i '/"hono-idempotency"/d; s/"hono": \(.*\),$/"hono": \1/' "$PEER_DIR/package.json"
      if ! (cd "$PEER_DIR" && npm install --no-package-lock --no-audit --no-fund >&2); then
        log "the peer: hono did not install; the bench runs without the peer"
        return 0
      fi
      install_peer_middleware_from_source
    elif ! (cd "$PEER_DIR" && npm install --no-package-lock --no-audit --no-fund >&2); then
      log "the peer: its middleware did not install from npm (set HONO_IDEMPOTENCY_SOURCE to a checkout); the bench runs without the peer"
      return 0
    fi
    echo "$want" > "$stamp"
  fi
  export BENCH_PEER="$PEER_DIR/wrangler.toml"
}
