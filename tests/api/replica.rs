//! Search on a real PostgreSQL streaming replica: `pg_basebackup -R` of the test server into a
//! temporary directory, started on its own loopback port with the same binaries (so pgvector is
//! there), then searched through the HTTP API. The replica answers while it is up and caught
//! up; the primary answers when it is stopped, when it lags beyond the bound, and when it still
//! holds a document the primary has deleted.
//!
//! PostgreSQL refuses to run as root, so under root the replica belongs to the `postgres` user
//! (`runuser`), as scripts/db.sh does for its private cluster. The test server must accept
//! replication connections from 127.0.0.1 (scripts/install-deps.sh allows them where loopback
//! is trusted); when it does not, `pg_basebackup` fails and so does the test, with its message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use docket::embed::{Embedder, HashEmbedder};
use docket::search::{Fallback, Replicas, Searcher};
use reqwest::StatusCode;
use sqlx::PgPool;

use crate::support::{TestApp, wait_until};

/// A streaming replica of the test server, stopped and removed on drop.
struct StreamingReplica {
    /// Holds the data directory; removed last.
    _dir: tempfile::TempDir,
    data: PathBuf,
    bindir: PathBuf,
    port: u16,
    /// The physical replication slot on the primary that keeps the WAL this replica still
    /// needs (dropped with the replica).
    slot: String,
    running: bool,
}

/// A command running `program` as the server user: `postgres` when this process is root
/// (PostgreSQL refuses root), else this process's own user. It runs from `/`, which every user
/// can enter.
fn server_command(program: &Path) -> Command {
    let mut command = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    command.current_dir("/");
    command
}

/// Base backups of this process, one at a time: each asks the server for an immediate
/// checkpoint, and two at once only slow each other down.
static BASE_BACKUPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `pg_basebackup -R` of the server at `primary_url` into `data`, creating the physical slot
/// `slot` first: it holds the WAL from the backup's start until the replica streams it. (Without
/// one, a checkpoint on a busy server recycled that WAL while the replica was still starting,
/// and the replica waited forever for a segment that was gone.)
fn base_backup(bindir: &Path, primary_url: &str, data: &str, slot: &str) {
    let _one_at_a_time = BASE_BACKUPS.lock().unwrap_or_else(|e| e.into_inner());
    run_as_server_user(
        &bindir.join("pg_basebackup"),
        &[
            "--dbname",
            primary_url,
            "--pgdata",
            data,
            "--write-recovery-conf",
            "--wal-method=stream",
            "--checkpoint=fast",
            "--no-password",
            "--create-slot",
            "--slot",
            slot,
        ],
    );
}

/// Runs `program` with `args` as the server user; panics with its output when it fails.
fn run_as_server_user(program: &Path, args: &[&str]) {
    let output = server_command(program)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("running {}: {err}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed: {}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn show(pool: &PgPool, setting: &str) -> String {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("show {setting}")))
        .fetch_one(pool)
        .await
        .expect("show a setting")
}

impl StreamingReplica {
    /// Clones the server behind `primary` and starts the clone as its streaming replica.
    async fn start(primary: &PgPool) -> Self {
        let version: i32 = show(primary, "server_version_num")
            .await
            .parse()
            .expect("a version number");
        let bindir = std::env::var_os("DOCKET_PG_BINDIR").map_or_else(
            || PathBuf::from(format!("/usr/lib/postgresql/{}/bin", version / 10000)),
            PathBuf::from,
        );
        let dir = tempfile::Builder::new()
            .prefix("docket-replica")
            .tempdir()
            .expect("a temporary directory");
        // The server user must own the directory; `chown` is a no-op for a non-root owner.
        let chown = Command::new("chown")
            .arg("postgres")
            .arg(dir.path())
            .status();
        assert!(
            chown.is_ok_and(|s| s.success()) || !is_root(),
            "chown postgres {}",
            dir.path().display()
        );
        let data = dir.path().join("data");
        let primary_url = std::env::var("DATABASE_URL").expect("DATABASE_URL is set");
        let data_arg = data.to_str().expect("a UTF-8 path").to_owned();
        drop_abandoned_slots(primary).await;
        let slot = format!(
            "{SLOT_PREFIX}{}_{}",
            std::process::id(),
            SLOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        base_backup(&bindir, &primary_url, &data_arg, &slot);
        // A hot standby needs at least the primary's values of these.
        let mut config = String::new();
        for setting in [
            "max_connections",
            "max_worker_processes",
            "max_wal_senders",
            "max_prepared_transactions",
            "max_locks_per_transaction",
        ] {
            config.push_str(&format!("{setting} = {}\n", show(primary, setting).await));
        }
        let port = free_port();
        // Debian keeps the configuration outside the data directory, so the copy has none:
        // write a whole one (loopback, its own port, TCP only, trust) over whatever was copied.
        // `hot_standby_feedback`, as docs/SCALING.md advises for search replicas: without it,
        // replaying the primary's cleanup of rows that running searches may still see waits for
        // them (up to `max_standby_streaming_delay`, 30 s), and a steady stream of searches
        // holds replay back that long. `fsync = off`: a throwaway server, and on a loaded machine
        // the data directory sync at start-up alone took 10 s.
        config.push_str(&format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = ''\n\
             hot_standby = on\nshared_preload_libraries = ''\n\
             hot_standby_feedback = on\nfsync = off\n"
        ));
        write_as_server_user(&data.join("postgresql.conf"), &config);
        write_as_server_user(
            &data.join("pg_hba.conf"),
            "host all all 127.0.0.1/32 trust\n",
        );
        write_as_server_user(&data.join("pg_ident.conf"), "");
        let log = dir.path().join("replica.log");
        let log_arg = log.to_str().expect("a UTF-8 path").to_owned();
        let replica = StreamingReplica {
            _dir: dir,
            data,
            bindir,
            port,
            slot,
            running: true,
        };
        run_as_server_user(
            &replica.bindir.join("pg_ctl"),
            &["start", "-D", &data_arg, "-l", &log_arg, "-w", "-t", "60"],
        );
        replica
    }

    /// The URL of `database` on the replica.
    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stops the server and drops its slot.
    fn stop(&mut self) {
        if self.running {
            self.running = false;
            let data = self.data.to_str().expect("a UTF-8 path").to_owned();
            run_as_server_user(
                &self.bindir.join("pg_ctl"),
                &["stop", "-D", &data, "-m", "fast", "-w"],
            );
            drop_slot(&self.slot);
        }
    }
}

impl Drop for StreamingReplica {
    fn drop(&mut self) {
        if self.running {
            // A failed test still stops its server and frees its slot; the directory goes
            // with `_dir`.
            let _ = server_command(&self.bindir.join("pg_ctl"))
                .arg("stop")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "-w"])
                .status();
            drop_slot(&self.slot);
        }
    }
}

/// Slot names: the prefix, the test process's id, a counter.
const SLOT_PREFIX: &str = "docket_test_replica_";
static SLOTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Drops `slot` on the primary (through psql: this runs in `Drop`, outside any runtime). The
/// name is ours (the prefix and digits), so it goes into the SQL as a literal.
fn drop_slot(slot: &str) {
    let url = std::env::var("DATABASE_URL").unwrap_or_default();
    let dropped = Command::new("psql")
        .args(["-X", "-q", "-d", &url, "-c"])
        .arg(format!("select pg_drop_replication_slot('{slot}')"))
        .output();
    if !dropped.is_ok_and(|o| o.status.success()) {
        eprintln!("could not drop the replication slot {slot}; the next replica test drops it");
    }
}

/// A slot retains WAL on the primary for as long as it exists: drop those a crashed test run
/// left behind (inactive, and named after a process that no longer exists).
async fn drop_abandoned_slots(primary: &PgPool) {
    let slots: Vec<String> = sqlx::query_scalar(
        "select slot_name::text from pg_replication_slots
         where not active and starts_with(slot_name::text, $1)",
    )
    .bind(SLOT_PREFIX)
    .fetch_all(primary)
    .await
    .expect("list replication slots");
    for slot in slots {
        let owner = slot[SLOT_PREFIX.len()..].split('_').next().unwrap_or("");
        if !owner.is_empty() && !Path::new("/proc").join(owner).exists() {
            sqlx::query("select pg_drop_replication_slot($1)")
                .bind(&slot)
                .execute(primary)
                .await
                .expect("drop an abandoned slot");
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Writes `text` to `path`, owned by the server user.
fn write_as_server_user(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    if is_root() {
        let status = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(path)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "chown {}",
            path.display()
        );
    }
}

/// A port nothing listens on right now (the kernel's choice for port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

async fn current_database(pool: &PgPool) -> String {
    sqlx::query_scalar("select current_database()")
        .fetch_one(pool)
        .await
        .expect("current database")
}

/// A searcher over `pool` sending searches to `replica`, probed every 50 ms.
async fn searcher_with(pool: &PgPool, replica: &StreamingReplica, max_lag: Duration) -> Searcher {
    let embedder = Embedder::Hash(HashEmbedder::new(384));
    let model = docket::models::ModelVersion::of(&embedder, &Default::default());
    let url = replica.url(&current_database(pool).await);
    let replicas = Replicas::new(pool.clone(), &[url], 4, max_lag, Duration::from_millis(50))
        .expect("replica URL");
    replicas.spawn_probe();
    docket::metrics::global().watch_replicas(&replicas);
    Searcher::new(pool.clone(), embedder, model).with_replicas(replicas)
}

fn replicas_of(searcher: &Searcher) -> Arc<Replicas> {
    searcher.replicas().expect("replicas").clone()
}

async fn wait_until_usable(replicas: &Replicas) {
    wait_until(Duration::from_secs(60), "the replica is usable", || async {
        replicas.status().iter().all(|s| s.usable)
    })
    .await;
}

async fn search(api: &TestApp, query: &str) -> Vec<i64> {
    let (status, body) = api.search(query).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| h["document_id"].as_i64().expect("document id"))
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_replica_search_finds_what_the_primary_has_and_falls_back_when_the_replica_is_stopped(
    pool: PgPool,
) {
    // Written before the replica is copied, so the replica holds it from the start.
    let writer = TestApp::builder(pool.clone()).spawn().await;
    let first = writer
        .upload_paragraphs(
            "lighthouse.txt",
            &["The lighthouse keeper climbs the spiral stairs at dusk".to_owned()],
        )
        .await;
    let mut replica = StreamingReplica::start(&pool).await;
    // A bound no healthy replica reaches, even on a loaded machine: lag has its own test.
    let searcher = searcher_with(&pool, &replica, Duration::from_secs(120)).await;
    let replicas = replicas_of(&searcher);
    let api = TestApp::builder(pool.clone())
        .searcher(searcher)
        .spawn()
        .await;
    wait_until_usable(&replicas).await;

    assert_eq!(
        search(&api, "q=lighthouse%20keeper&mode=text").await,
        [first]
    );
    assert_eq!(replicas.status()[0].searches, 1, "the replica answered");
    assert_eq!(
        search(&api, "q=lighthouse%20keeper&mode=hybrid").await[0],
        first
    );
    assert_eq!(replicas.status()[0].searches, 2);

    // What the primary writes next reaches the replica by streaming, and is found there.
    let second = api
        .upload_paragraphs(
            "harbour.txt",
            &["Fishing boats return to the harbour before the storm".to_owned()],
        )
        .await;
    wait_until(
        Duration::from_secs(30),
        "the replica has the new document",
        || {
            let api = &api;
            async move { search(api, "q=harbour%20storm&mode=text").await == [second] }
        },
    )
    .await;
    let served = replicas.status()[0].searches;
    assert!(served >= 3, "the replica answered those searches: {served}");
    assert!(
        replicas.all_fallbacks().is_empty(),
        "no fallback while it is up: {:?} {:?}",
        replicas.all_fallbacks(),
        replicas.status()
    );
    let metrics = api
        .client
        .get(api.url("/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    let label = format!("replica=\"{}\"", replicas.status()[0].name);
    assert!(
        metrics.contains(&format!("docket_search_replica_up{{{label}}} 1")),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("docket_search_replica_lag_seconds{{{label}}}")));

    // Stopped, the replica answers nothing: every search is the primary's, and still right.
    replica.stop();
    for _ in 0..3 {
        assert_eq!(
            search(&api, "q=harbour%20storm&mode=hybrid").await[0],
            second
        );
        assert_eq!(search(&api, "q=lighthouse&mode=text").await, [first]);
    }
    assert_eq!(replicas.status()[0].searches, served, "the replica is gone");
    let fallbacks = replicas.fallbacks(Fallback::Error) + replicas.fallbacks(Fallback::Down);
    assert_eq!(fallbacks, 6, "{:?}", replicas.all_fallbacks());
    wait_until(
        Duration::from_secs(10),
        "the probe sees the replica down",
        || async { !replicas.status()[0].usable },
    )
    .await;
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_replica_behind_on_a_deletion_or_lagging_never_answers(pool: PgPool) {
    let text = |s: &str| vec![format!("Notes on tide tables and {s}")];
    let writer = TestApp::builder(pool.clone()).spawn().await;
    let kept = writer
        .upload_paragraphs("kept.txt", &text("moon phases"))
        .await;
    let deleted = writer
        .upload_paragraphs("deleted.txt", &text("tide tables again"))
        .await;
    let replica = StreamingReplica::start(&pool).await;
    // Two searchers over the same replica: one tolerates a minute of lag, one 300 ms.
    let patient = searcher_with(&pool, &replica, Duration::from_secs(60)).await;
    let strict = searcher_with(&pool, &replica, Duration::from_millis(300)).await;
    let (patient_replicas, strict_replicas) = (replicas_of(&patient), replicas_of(&strict));
    let patient_api = TestApp::builder(pool.clone())
        .searcher(patient)
        .spawn()
        .await;
    let strict_api = TestApp::builder(pool.clone())
        .searcher(strict)
        .spawn()
        .await;
    wait_until_usable(&patient_replicas).await;
    wait_until_usable(&strict_replicas).await;
    let mut both = search(&patient_api, "q=tide%20tables&mode=text").await;
    both.sort();
    assert_eq!(both, [kept, deleted]);

    // The replica stops replaying; the primary deletes a document.
    let replica_pool = PgPool::connect(&replica.url(&current_database(&pool).await))
        .await
        .expect("connect to the replica");
    sqlx::query("select pg_wal_replay_pause()")
        .execute(&replica_pool)
        .await
        .expect("pause replay");
    assert!(
        docket::pipeline::delete_document(&pool, docket::documents::DocumentId(deleted))
            .await
            .expect("delete")
    );
    let still_there: i64 = sqlx::query_scalar("select count(*) from documents where id = $1")
        .bind(deleted)
        .fetch_one(&replica_pool)
        .await
        .expect("the replica answers");
    assert_eq!(
        still_there, 1,
        "the paused replica still holds the deleted document"
    );

    // Within its bound, the replica is asked, names the deleted document, and is overruled.
    let served = patient_replicas.status()[0].searches;
    assert_eq!(
        search(&patient_api, "q=tide%20tables&mode=text").await,
        [kept]
    );
    assert_eq!(
        search(&patient_api, "q=tide%20tables&mode=hybrid").await,
        [kept]
    );
    assert_eq!(patient_replicas.fallbacks(Fallback::Stale), 2);
    assert_eq!(patient_replicas.status()[0].searches, served);
    // A search whose hits all still exist is still the replica's.
    assert_eq!(
        search(&patient_api, "q=moon%20phases&mode=text").await,
        [kept]
    );
    assert_eq!(patient_replicas.status()[0].searches, served + 1);

    // Past 300 ms behind, the strict searcher does not ask it at all.
    wait_until(Duration::from_secs(10), "the lag passes 300 ms", || async {
        !strict_replicas.status()[0].usable
    })
    .await;
    let (status, body) = strict_api.search("q=moon%20phases&mode=text").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["hits"].as_array().map(Vec::len), Some(1), "{body}");
    assert!(strict_replicas.fallbacks(Fallback::Lagging) >= 1);
    let lag = strict_replicas.status()[0].lag_seconds.expect("a lag");
    assert!(lag > 0.3, "lag {lag}");

    // Replay resumes: the replica catches up and answers again.
    sqlx::query("select pg_wal_replay_resume()")
        .execute(&replica_pool)
        .await
        .expect("resume replay");
    let before = strict_replicas.status()[0].searches;
    wait_until(
        Duration::from_secs(60),
        "the caught-up replica answers again",
        || {
            let (api, replicas) = (&strict_api, &strict_replicas);
            async move {
                let (_, body) = api.search("q=tide%20tables&mode=text").await;
                assert_eq!(body["hits"].as_array().map(Vec::len), Some(1), "{body}");
                replicas.status()[0].searches > before
            }
        },
    )
    .await;
    replica_pool.close().await;
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_reader_searching_through_the_replica_sees_only_its_collection(pool: PgPool) {
    // Two collections, each with a document, written before the replica is copied.
    let writer = TestApp::builder(pool.clone()).spawn().await;
    for name in ["a", "b"] {
        docket::collections::create(&pool, name)
            .await
            .expect("collection");
    }
    let mine = crate::access::upload_into(
        &writer,
        None,
        "a",
        "lamp.txt",
        "The lighthouse lamp is cleaned every morning.",
    )
    .await;
    let theirs = crate::access::upload_into(
        &writer,
        None,
        "b",
        "keeper.txt",
        "The lighthouse keeper climbs the spiral stairs at dusk.",
    )
    .await;
    writer.worker().await.run_until_idle().await;
    let reader = docket::access::tokens::create(
        &pool,
        "reader-a",
        docket::access::Role::Reader,
        &["a".to_owned()],
    )
    .await
    .expect("token");
    let replica = StreamingReplica::start(&pool).await;
    let searcher = searcher_with(&pool, &replica, Duration::from_secs(120)).await;
    let replicas = replicas_of(&searcher);
    let api = TestApp::builder(pool.clone())
        .searcher(searcher)
        .spawn()
        .await;
    wait_until_usable(&replicas).await;

    for mode in ["text", "vector", "hybrid"] {
        for group in ["", "&group=document"] {
            let response = api
                .client
                .get(api.url(&format!(
                    "/api/search?q=lighthouse+keeper+spiral+stairs&mode={mode}{group}"
                )))
                .bearer_auth(&reader)
                .send()
                .await
                .expect("search");
            assert_eq!(response.status(), StatusCode::OK);
            let body = response.text().await.expect("body");
            assert!(!body.contains("keeper.txt"), "{mode}{group}: {body}");
            assert!(
                !body.contains(&format!("\"document_id\":{theirs}")),
                "{mode}{group}: {body}"
            );
            assert!(body.contains(&format!("\"document_id\":{mine}")), "{body}");
        }
    }
    assert!(
        replicas.status()[0].searches >= 6,
        "the replica answered: {:?}",
        replicas.status()
    );
}
