//! The built worker on wrangler's dev server (workerd, Durable Objects,
//! local D1), with a fresh state directory, its own ports and its own
//! variables.
//!
//! Every gateway of one test run serves the same snapshot of the built
//! worker, copied once when the run starts: `wrangler dev` watches the
//! files it serves and reloads on any change, and a reload answers every
//! request in flight with 503 "Your worker restarted mid-request". Serving
//! the repository's `build/` let a build by another command (or a gateway
//! whose start runs the `[build]` command) restart every running gateway.

use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Gateway {
    pub base: String,
    /// The devtools inspector's port, under the `wrangler dev` command.
    pub inspector_port: Option<u16>,
    child: Child,
    dir: tempfile::TempDir,
}

/// Variables that are secrets: set in `.dev.vars`, as locally. A route names
/// its secrets (`signing_secret = "STRIPE_SECRET"`); those names end in
/// `_SECRET`, `_KEY` or `_TOKEN` here.
fn is_secret(name: &str) -> bool {
    ["SIGNING_SECRET", "FORWARD_SECRET", "ADMIN_TOKEN"].contains(&name)
        || name.ends_with("_SECRET")
        || name.ends_with("_KEY")
        || name.ends_with("_TOKEN")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A port nothing listens on, below Linux's ephemeral range (32768 and up).
/// A port the kernel hands out for `:0` is free only until the next
/// outgoing connection takes it as its local port, and the tests make
/// thousands: wrangler then fails to bind it ("Address already in use").
pub fn free_port() -> u16 {
    let seed = RandomState::new().build_hasher().finish();
    (0..1_000u64)
        .map(|attempt| 20_000 + ((seed.wrapping_add(attempt * 7_919)) % 12_000) as u16)
        .find(|port| TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port between 20000 and 32000")
}

/// The most recently modified file under `dir` that goes into the worker:
/// test-only files (`tests.rs`, the simulation, the memory backend) do not.
fn newest_source(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    const TEST_ONLY: &[&str] = &["tests.rs", "simulation", "memory_backend.rs"];
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|entry| !TEST_ONLY.contains(&entry.file_name().to_string_lossy().as_ref()))
        .filter_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                newest_source(&path)
            } else {
                Some((entry.metadata().ok()?.modified().ok()?, path))
            }
        })
        .max()
}

/// Where the worker's sources live: a change under either means the
/// worker must be built again.
fn source_dirs() -> [PathBuf; 2] {
    [root().join("src"), root().join("crates/idemgate-core/src")]
}

/// Which build of the worker a gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worker {
    /// The release worker, as deployed (`build/`).
    Release,
    /// The release worker with the `test-hooks` feature
    /// (`target/worker-test-hooks/`), which `scripts/test` also builds.
    TestHooks,
}

impl Worker {
    fn built(self) -> PathBuf {
        match self {
            // The benchmark's table of optimisation levels serves each
            // level's build in turn from a directory of its own.
            Worker::Release => std::env::var_os("IDEMGATE_WORKER_BUILD")
                .map(|dir| root().join(dir))
                .unwrap_or_else(|| root().join("build")),
            Worker::TestHooks => root().join("target/worker-test-hooks"),
        }
    }

    /// The built wasm.
    pub fn wasm(self) -> PathBuf {
        self.built().join("index_bg.wasm")
    }

    fn name(self) -> &'static str {
        match self {
            Worker::Release => "release",
            Worker::TestHooks => "test-hooks",
        }
    }
}

fn snapshot_dir() -> PathBuf {
    std::env::temp_dir().join(format!("idemgate-worker-{}", std::process::id()))
}

/// This run's copy of a built worker: `src/entry.mjs` and its `build/`
/// (the operator's page is built into it), in a directory no build writes
/// to.
fn snapshot(worker: Worker) -> &'static Path {
    static SNAPSHOTS: OnceLock<std::sync::Mutex<Vec<(Worker, &'static Path)>>> = OnceLock::new();
    let mut snapshots = SNAPSHOTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, dir)) = snapshots.iter().find(|(known, _)| *known == worker) {
        return dir;
    }
    let built = worker.built().join("index_bg.wasm");
    let built_at = fs::metadata(&built).and_then(|meta| meta.modified());
    let Ok(built_at) = built_at else {
        panic!(
            "{} is missing: run scripts/test, which builds the worker first",
            built.display()
        );
    };
    // A failed build leaves the previous worker in place; testing it
    // would pass or fail for code that is no longer the source.
    for dir in source_dirs() {
        if let Some(newer) = newest_source(&dir).filter(|(at, _)| *at > built_at) {
            panic!(
                "{} changed after the {} worker was built: run scripts/test (or scripts/build)",
                newer.1.display(),
                worker.name()
            );
        }
    }
    let dir = snapshot_dir().join(worker.name());
    let _ = fs::remove_dir_all(&dir);
    copy_dir(&worker.built(), &dir.join("build"));
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::copy(root().join("src/entry.mjs"), dir.join("src/entry.mjs")).unwrap();
    let dir: &'static Path = Box::leak(dir.into_boxed_path());
    snapshots.push((worker, dir));
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// Removes this run's snapshots; the harness calls it when the run ends.
pub fn remove_snapshot() {
    let _ = fs::remove_dir_all(snapshot_dir());
}

/// A top-level setting of the repository's `wrangler.toml`, unquoted when
/// it is a string (an array comes as its TOML text).
fn repository_setting(name: &str) -> String {
    fs::read_to_string(root().join("wrangler.toml"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("wrangler.toml sets {name}"))
}

/// How a gateway's receipt index is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// Its shards (SPEC §15, v5), and no D1 binding at all: a new
    /// deployment, as the repository's `wrangler.toml` has it.
    Shards,
    /// Its shards, and a v4 deployment's D1 index beside them, with the
    /// repository's migrations applied: an upgraded deployment.
    Legacy,
    /// No shard binding (nor D1): a deployment whose config lost it.
    Missing,
}

/// The index's shards' binding (its class is migrated with the others).
const SHARDS: &str = r#"[[durable_objects.bindings]]
name = "INDEX_SHARD"
class_name = "IndexShard"
"#;

/// The config the tests run with: the snapshot's entry module, the
/// repository's compatibility date, bindings and Durable Object migrations, no build
/// step (the test command builds
/// once), and the variables of the test. `extra` is appended as it is (a
/// `[vars.ROUTES.x]` table, say).
fn write_config(
    dir: &Path,
    worker: Worker,
    index: Index,
    vars: &[(&str, &str)],
    extra: &str,
) -> PathBuf {
    let mut config = format!(
        r#"name = "idemgate-test"
main = "{}"
compatibility_date = "{}"

[[durable_objects.bindings]]
name = "DEDUP_OBJECT"
class_name = "DedupObject"

[[durable_objects.bindings]]
name = "FLOW_COORDINATOR"
class_name = "FlowCoordinator"

[[durable_objects.bindings]]
name = "RECONCILE_OBJECT"
class_name = "ReconcileObject"

[[durable_objects.bindings]]
name = "AUDIT_LOG"
class_name = "AuditLog"

[[durable_objects.bindings]]
name = "ALERT_OBJECT"
class_name = "AlertObject"

# One per entity of an ordered route (SPEC §12): its deliveries' turn,
# who waits, and the newest event time the origin accepted.
[[durable_objects.bindings]]
name = "ORDER_OBJECT"
class_name = "OrderObject"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["DedupObject"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["FlowCoordinator"]

[[migrations]]
tag = "v3"
new_sqlite_classes = ["ReconcileObject"]

[[migrations]]
tag = "v4"
new_sqlite_classes = ["AuditLog"]

[[migrations]]
tag = "v5"
new_sqlite_classes = ["AlertObject"]

[[migrations]]
tag = "v6"
new_sqlite_classes = ["OrderObject"]

[[migrations]]
tag = "v7"
new_sqlite_classes = ["IndexShard"]

{}
[triggers]
crons = ["* * * * *"]

[[analytics_engine_datasets]]
binding = "IDEMGATE_METRICS"
dataset = "idemgate_test"

[vars]
"#,
        snapshot(worker).join("src/entry.mjs").display(),
        repository_setting("compatibility_date"),
        match index {
            Index::Shards => SHARDS.to_string(),
            Index::Missing => String::new(),
            Index::Legacy =>
                SHARDS.to_string()
                    + &format!(
                        r#"[[d1_databases]]
binding = "IDEMGATE_INDEX"
database_name = "idemgate-index"
database_id = "00000000-0000-0000-0000-000000000000"
migrations_dir = "{}"
"#,
                        root().join("migrations").display()
                    ),
        },
    );
    // Secrets go where real deployments keep them locally (`.dev.vars`),
    // which wrangler shows as hidden; plain variables go in `[vars]`.
    let mut dev_vars = String::new();
    for (name, value) in vars {
        if is_secret(name) {
            dev_vars.push_str(&format!("{name}={value:?}\n"));
        } else {
            config.push_str(&format!("{name} = {value:?}\n"));
        }
    }
    config.push_str(extra);
    fs::write(dir.join(".dev.vars"), dev_vars).unwrap();
    let path = dir.join("wrangler.toml");
    fs::write(&path, config).unwrap();
    path
}

/// Applies the repository's D1 migrations to the local database a gateway
/// on `state` will use, as the README's commands do.
fn migrate(config: &Path, state: &Path) {
    let output = Command::new(root().join("node_modules/.bin/wrangler"))
        .args([
            "d1",
            "migrations",
            "apply",
            "IDEMGATE_INDEX",
            "--local",
            "--config",
        ])
        .arg(config)
        .arg("--persist-to")
        .arg(state)
        .current_dir(config.parent().unwrap())
        .env("CI", "1")
        .env("WRANGLER_SEND_METRICS", "false")
        .stdin(Stdio::null())
        .output()
        .expect("node_modules/.bin/wrangler runs (scripts/test installs it)");
    assert!(
        output.status.success(),
        "wrangler d1 migrations apply failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Gateway {
    pub async fn start(vars: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        Gateway::start_in(dir, vars).await
    }

    /// Starts with `extra` appended to the config (TOML), e.g. routes as a
    /// `[vars.ROUTES.name]` table.
    pub async fn start_with(vars: &[(&str, &str)], extra: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        Gateway::start_configured(dir, Worker::Release, Index::Shards, vars, extra).await
    }

    /// Starts on `dir`, whose `state/` may hold Durable Objects of an
    /// earlier run (a restart).
    pub async fn start_in(dir: tempfile::TempDir, vars: &[(&str, &str)]) -> Gateway {
        Gateway::start_configured(dir, Worker::Release, Index::Shards, vars, "").await
    }

    /// Starts `worker` on `dir`, whose `state/` may hold an earlier run's.
    pub async fn start_in_with(
        dir: tempfile::TempDir,
        worker: Worker,
        vars: &[(&str, &str)],
    ) -> Gateway {
        Gateway::start_configured(dir, worker, Index::Shards, vars, "").await
    }

    /// Starts `worker` on `dir` with the receipt index set up as `index`
    /// says: an upgrade, on an earlier run's state.
    pub async fn start_in_with_index(
        dir: tempfile::TempDir,
        worker: Worker,
        index: Index,
        vars: &[(&str, &str)],
    ) -> Gateway {
        Gateway::start_configured(dir, worker, index, vars, "").await
    }

    /// The tests' origin Worker (`support/origin-worker`), named
    /// `idemgate-test-origin` in `registry`, checking forwards signed with
    /// `forward_secret`.
    pub async fn start_origin_worker(registry: &Path, forward_secret: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("wrangler.toml");
        fs::write(
            &config,
            format!(
                "name = \"idemgate-test-origin\"\nmain = \"{}\"\ncompatibility_date = \"{}\"\n",
                root()
                    .join("tests/e2e/support/origin-worker/index.mjs")
                    .display(),
                repository_setting("compatibility_date"),
            ),
        )
        .unwrap();
        fs::write(
            dir.path().join(".dev.vars"),
            format!("FORWARD_SECRET={forward_secret:?}\n"),
        )
        .unwrap();
        Gateway::start_dev_server(dir, &config, Some(registry)).await
    }

    /// Starts the release worker with `extra` appended to its config,
    /// reaching the workers of `registry` through its service bindings.
    pub async fn start_with_registry(
        vars: &[(&str, &str)],
        extra: &str,
        registry: &Path,
    ) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), Worker::Release, Index::Shards, vars, extra);
        Gateway::start_dev_server(dir, &config, Some(registry)).await
    }

    /// Starts the worker built with test hooks (`src/test_hooks.rs`).
    pub async fn start_with_hooks(vars: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        Gateway::start_configured(dir, Worker::TestHooks, Index::Shards, vars, "").await
    }

    /// Starts with the receipt index set up as `index` says.
    pub async fn start_with_index(index: Index, vars: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        Gateway::start_configured(dir, Worker::Release, index, vars, "").await
    }

    /// Wrangler's dev server (`support/dev-server.mjs`: the DevEnv of
    /// `wrangler dev`, inspector included, console lines kept), addressed at
    /// the user worker's own socket rather than through wrangler's proxy,
    /// whose idle-connection race answers a POST with a false 503 "Your
    /// worker restarted mid-request" (docs/wrangler-dev-proxy-race.md).
    async fn start_configured(
        dir: tempfile::TempDir,
        worker: Worker,
        index: Index,
        vars: &[(&str, &str)],
        extra: &str,
    ) -> Gateway {
        let config = write_config(dir.path(), worker, index, vars, extra);
        if index == Index::Legacy {
            migrate(&config, &dir.path().join("state"));
        }
        Gateway::start_dev_server(dir, &config, None).await
    }

    /// `dev-server.mjs` on `config`, with the workers of `registry` (if
    /// any) reachable through service bindings.
    async fn start_dev_server(
        dir: tempfile::TempDir,
        config: &Path,
        registry: Option<&Path>,
    ) -> Gateway {
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(root().join("tests/e2e/support/dev-server.mjs"))
            .arg(config)
            .arg(port.to_string())
            .arg(free_port().to_string())
            .arg(dir.path().join("state"))
            .arg("log");
        if let Some(registry) = registry {
            command.arg(registry);
        }
        let mut gateway = Gateway::spawn(dir, command, port).await;
        gateway.base = gateway.user_worker_address().await;
        gateway.wait_until_ready().await;
        gateway
    }

    /// Starts with the `wrangler dev` command at `--log-level <level>`,
    /// addressed through its proxy as a developer's curl is: what the
    /// benchmark measures (`warn`, since a line per request costs
    /// throughput).
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_logging(
        dir: tempfile::TempDir,
        vars: &[(&str, &str)],
        level: &str,
    ) -> Gateway {
        let config = write_config(dir.path(), Worker::Release, Index::Shards, vars, "");
        Gateway::start_command(dir, config, level).await
    }

    /// Starts with the plain `wrangler dev` command (no `--test-scheduled`),
    /// addressed through its proxy: what a developer runs, and where they
    /// curl the Cron trigger wrangler prints.
    pub async fn start_as_a_developer_would(vars: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), Worker::Release, Index::Shards, vars, "");
        Gateway::start_command(dir, config, "info").await
    }

    /// `wrangler dev --config <config> --log-level <level>` on `dir/state`.
    async fn start_command(dir: tempfile::TempDir, config: PathBuf, level: &str) -> Gateway {
        let (port, inspector_port) = (free_port(), free_port());
        let command = dev_command(&dir, &config, level, port, inspector_port);
        let mut gateway = Gateway::spawn(dir, command, port).await;
        gateway.inspector_port = Some(inspector_port);
        gateway
    }

    /// The release worker under the `wrangler dev` command, its inspector
    /// on, sent no request: ready once wrangler says so, so the caller's
    /// first request is the isolate's first, and its CPU can be sampled.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_cold_inspected(vars: &[(&str, &str)]) -> Gateway {
        let (dir, config) = release_config(vars);
        Gateway::start_command_unready(dir, config).await
    }

    /// The reference worker as [`Gateway::start_cold_inspected`] starts idemgate.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_reference_cold_inspected(origin: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = reference_config(dir.path(), origin);
        Gateway::start_command_unready(dir, config).await
    }

    #[allow(dead_code)] // the benchmark's alone
    async fn start_command_unready(dir: tempfile::TempDir, config: PathBuf) -> Gateway {
        let (port, inspector_port) = (free_port(), free_port());
        let command = dev_command(&dir, &config, "info", port, inspector_port);
        let mut gateway = Gateway::spawn_unready(dir, command, port);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !gateway.log().contains("Ready on ") {
            assert!(
                Instant::now() < deadline,
                "wrangler dev did not say it was ready:\n{}",
                gateway.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gateway.inspector_port = Some(inspector_port);
        gateway
    }

    /// Starts on wrangler's dev server without its devtools inspector
    /// (`benches/tools/start-worker.mjs`), for the benchmark's comparison.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_without_inspector(vars: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), Worker::Release, Index::Shards, vars, "");
        Gateway::start_plain(dir, config).await
    }

    /// The benchmark's reference worker (`benches/reference/worker.mjs`), a
    /// JavaScript idempotency middleware, in front of `origin`: under the
    /// `wrangler dev` command, or without the inspector.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_reference(origin: &str, inspector: bool) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = reference_config(dir.path(), origin);
        if !inspector {
            return Gateway::start_plain(dir, config).await;
        }
        Gateway::start_command(dir, config, "warn").await
    }

    /// Another worker to measure beside the reference (`BENCH_PEER`: its
    /// own `wrangler.toml`, with no `[vars]` of its own; the TypeScript
    /// peer of `benches/peer` as `scripts/bench` installs it) in front of
    /// `origin`, its state in a fresh directory: under the `wrangler dev`
    /// command, or without the inspector.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_peer(config: &Path, origin: &str, inspector: bool) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = peer_config(dir.path(), config, origin);
        if !inspector {
            return Gateway::start_plain(dir, config).await;
        }
        Gateway::start_command(dir, config, "warn").await
    }

    /// The release worker as [`Gateway::start_without_inspector`] starts
    /// it, but sent no request: ready once the dev server says so, so the
    /// caller's first request is the isolate's first (a cold start).
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_cold(vars: &[(&str, &str)]) -> Gateway {
        let (dir, config) = release_config(vars);
        Gateway::start_plain_cold(dir, config).await
    }

    /// The reference worker as [`Gateway::start_cold`] starts idemgate.
    #[allow(dead_code)] // the benchmark's alone
    pub async fn start_reference_cold(origin: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = reference_config(dir.path(), origin);
        Gateway::start_plain_cold(dir, config).await
    }

    async fn start_plain_cold(dir: tempfile::TempDir, config: PathBuf) -> Gateway {
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(root().join("benches/tools/start-worker.mjs"))
            .arg(&config)
            .arg(port.to_string())
            .arg(dir.path().join("state"));
        let gateway = Gateway::spawn_unready(dir, command, port);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !gateway.log().contains("ready on ") {
            assert!(
                Instant::now() < deadline,
                "start-worker.mjs did not say it was ready:\n{}",
                gateway.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gateway
    }
}

/// A fresh directory holding the release worker's configuration with
/// `vars`.
#[allow(dead_code)] // the benchmark's alone
fn release_config(vars: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), Worker::Release, Index::Shards, vars, "");
    (dir, config)
}

/// `wrangler dev --config <config> --log-level <level>` on `dir/state`, on
/// `port`, its inspector on `inspector_port`.
fn dev_command(
    dir: &tempfile::TempDir,
    config: &Path,
    level: &str,
    port: u16,
    inspector_port: u16,
) -> Command {
    let mut command = Command::new(root().join("node_modules/.bin/wrangler"));
    command
        .args(["dev", "--config"])
        .arg(config)
        .args(["--ip", "127.0.0.1", "--port", &port.to_string()])
        .args(["--inspector-port", &inspector_port.to_string()])
        .arg("--persist-to")
        .arg(dir.path().join("state"))
        .args(["--log-level", level, "--show-interactive-dev-session=false"]);
    command
}

/// The peer's `wrangler.toml` (`peer`) written into `dir`, its `main` made
/// absolute (so that its modules resolve beside it) and `ORIGIN_URL` added.
#[allow(dead_code)] // the benchmark's alone
fn peer_config(dir: &Path, peer: &Path, origin: &str) -> PathBuf {
    let home = peer
        .parent()
        .expect("the peer's wrangler.toml is in a folder");
    let text = fs::read_to_string(peer).expect("BENCH_PEER names a readable wrangler.toml");
    let mut written = String::new();
    for line in text.lines() {
        match line.strip_prefix("main = ") {
            Some(main) => {
                let main = home.join(main.trim_matches('"'));
                written.push_str(&format!("main = \"{}\"\n", main.display()));
            }
            None => written.push_str(&format!("{line}\n")),
        }
    }
    written.push_str(&format!("\n[vars]\nORIGIN_URL = \"{origin}\"\n"));
    let config = dir.join("wrangler.toml");
    fs::write(&config, written).unwrap();
    config
}

/// The reference worker's `wrangler.toml` in `dir`, in front of `origin`.
#[allow(dead_code)] // the benchmark's alone
fn reference_config(dir: &Path, origin: &str) -> PathBuf {
    let date = repository_setting("compatibility_date");
    let config = dir.join("wrangler.toml");
    fs::write(
        &config,
        format!(
            r#"name = "idemgate-reference"
main = "{}"
compatibility_date = "{date}"

[[durable_objects.bindings]]
name = "IDEMPOTENCY"
class_name = "IdempotencyObject"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["IdempotencyObject"]

[vars]
ORIGIN_URL = "{origin}"
"#,
            root().join("benches/reference/worker.mjs").display()
        ),
    )
    .unwrap();
    config
}

impl Gateway {
    async fn start_plain(dir: tempfile::TempDir, config: PathBuf) -> Gateway {
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(root().join("benches/tools/start-worker.mjs"))
            .arg(&config)
            .arg(port.to_string())
            .arg(dir.path().join("state"));
        Gateway::spawn(dir, command, port).await
    }

    async fn spawn(dir: tempfile::TempDir, command: Command, port: u16) -> Gateway {
        let gateway = Gateway::spawn_unready(dir, command, port);
        gateway.wait_until_ready().await;
        gateway
    }

    fn spawn_unready(dir: tempfile::TempDir, mut command: Command, port: u16) -> Gateway {
        let log = fs::File::create(dir.path().join("wrangler.log")).unwrap();
        let child = command
            .current_dir(dir.path())
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("node_modules/.bin/wrangler runs (scripts/test installs it)");
        Gateway {
            base: format!("http://127.0.0.1:{port}"),
            inspector_port: None,
            child,
            dir,
        }
    }

    /// The process group of the dev server and everything it started.
    #[allow(dead_code)] // the benchmark's alone
    pub fn process_group(&self) -> u32 {
        self.child.id()
    }

    /// The user worker's socket, which `dev-server.mjs` prints once the
    /// runtime is up (before the proxy serves anything).
    async fn user_worker_address(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(address) = self
                .log()
                .lines()
                .find_map(|line| line.strip_prefix("user worker on "))
            {
                return address.trim().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "dev-server.mjs did not print the user worker's address:\n{}",
            self.log()
        );
    }

    async fn wait_until_ready(&self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        let health = format!("{}/__idemgate/health", self.base);
        while Instant::now() < deadline {
            if let Ok(response) = client.get(&health).send().await {
                if response.status().is_success() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("wrangler dev did not come up:\n{}", self.log());
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("wrangler.log")).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }

    /// SIGKILL to the whole process group (wrangler and workerd): a crash.
    /// Returns the directory, so a new gateway can start on the same state.
    pub fn crash(mut self) -> tempfile::TempDir {
        self.signal("-KILL");
        let _ = self.child.wait();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.signal("-KILL");
        let _ = self.child.wait();
    }
}
