# Sourced by the other scripts: installs what is missing, skips what is
# there, and points worker-build at local tools (it cannot download them here).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
WORKER_BUILD_VERSION=0.8.7

log() { printf '\033[1m[idemgate]\033[0m %s\n' "$*" >&2; }

ensure_wasm_target() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

# cargo install takes minutes on two cores: only when the version differs.
# Only the binary used is built (--bin), and both tools build in one target
# directory, target/tools, so that what they share (clap, serde, syn,
# openssl, ureq's stack, ...) compiles once and a version bump rebuilds
# little. Not --locked: wasm-bindgen-cli 0.2.130's lockfile pins webpki-roots
# 1.0.11, which the registry reachable here does not have, so it fails.
ensure_cargo_tool() { # crate version binary
  local crate=$1 version=$2 binary=$3
  if ! "$binary" --version 2>/dev/null | grep -qw -- "$version"; then
    log "installing $crate $version (a few minutes, once)"
    CARGO_TARGET_DIR="$ROOT/target/tools" cargo install "$crate" --version "$version" --bin "$binary" --force
  fi
}

# Debian packages the tests need, from apt-get (as root, or with sudo).
apt_install() { # package
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

locked_wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}

ensure_node_modules() {
  local stamp="$ROOT/node_modules/.idemgate-lock-sha"
  local want
  want=$(sha256sum "$ROOT/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing node modules (npm ci)"
    (cd "$ROOT" && npm ci --no-audit --no-fund)
    echo "$want" > "$stamp"
  fi
}

ensure_toolchain() {
  ensure_wasm_target
  ensure_cargo_tool worker-build "$WORKER_BUILD_VERSION" worker-build
  (cd "$ROOT" && cargo fetch --quiet)
  ensure_cargo_tool wasm-bindgen-cli "$(locked_wasm_bindgen_version)" wasm-bindgen
  ensure_node_modules
  export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
  export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
  export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
}

# The release profile's opt-level: CARGO_PROFILE_RELEASE_OPT_LEVEL when set
# (the bench's table of levels), else Cargo.toml's.
release_opt_level() {
  if [ -n "${CARGO_PROFILE_RELEASE_OPT_LEVEL:-}" ]; then
    echo "$CARGO_PROFILE_RELEASE_OPT_LEVEL"
  else
    awk '/^\[profile.release\]/ { inside = 1; next } /^\[/ { inside = 0 }
         inside && /^opt-level/ { gsub(/opt-level *= *|"/, ""); print; exit }' "$ROOT/Cargo.toml"
  fi
}

# build_worker [OUT_DIR [CARGO FEATURES]]: the release worker into build/,
# or (for the end-to-end tests) a build with test hooks elsewhere.
build_worker() {
  local out=${1:-build} features=${2:-}
  log "building the worker (release wasm${features:+, features: $features}) into $out"
  if [ -n "$features" ]; then
    (cd "$ROOT" && worker-build --release --out-dir "$out" -- --features "$features")
  else
    (cd "$ROOT" && worker-build --release --out-dir "$out")
  fi
  # The same features worker-build enables, so that no newer encoding
  # reaches workerd; names stripped unless asked for.
  local names="--strip-debug"
  [ -n "${IDEMGATE_KEEP_NAMES:-}" ] && names="--debuginfo"
  # wasm-opt optimises as cargo did: for size at "z" and "s" (--converge
  # runs the passes until the wasm stops shrinking: about 400 bytes of
  # gzip for ten seconds more), for speed at a numbered level.
  local passes
  case "$(release_opt_level)" in
    z|s) passes="-Os --converge" ;;
    *) passes="-O$(release_opt_level)" ;;
  esac
  "$WASM_OPT_BIN" "$ROOT/$out/index_bg.wasm" -o "$ROOT/$out/index_bg.opt.wasm" $passes $names --strip-producers \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory \
    --enable-multivalue --enable-reference-types --enable-exception-handling
  mv "$ROOT/$out/index_bg.opt.wasm" "$ROOT/$out/index_bg.wasm"
}
