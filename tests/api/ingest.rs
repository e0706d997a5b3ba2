//! `docket ingest` end to end: the real binary uploads a real folder to the real API on
//! loopback over a test database, and its summary, exit status and the stored documents agree.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::TestApp;

fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(relative)
}

/// Runs `docket ingest ARGS…` with a clean environment for the settings it reads.
async fn ingest(args: &[&str], token: Option<&str>) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_docket"));
    command
        .arg("ingest")
        .args(args)
        .env_remove("DOCKET_URL")
        .env_remove("DOCKET_API_TOKEN")
        .env("RUST_LOG", "warn");
    if let Some(token) = token {
        command.env("DOCKET_API_TOKEN", token);
    }
    command.output().await.expect("run docket ingest")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A folder holding a good PDF, a text file in a subfolder, a PNG named `.pdf`, an empty file,
/// a file over the test server's 1 MiB limit, and hidden entries that must not be sent.
/// A 1 × 1 GIF.
const GIF: &[u8] =
    b"GIF89a\x01\0\x01\0\x80\0\0\xff\xff\xff\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";

fn sample_folder() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    let base = root.path();
    std::fs::create_dir_all(base.join("notes")).expect("dir");
    std::fs::create_dir_all(base.join(".cache")).expect("dir");
    std::fs::copy(
        fixture("pdf/pdflatex-outline.pdf"),
        base.join("outline.pdf"),
    )
    .expect("copy");
    // A GIF: an image type docket does not read (PNG, JPEG and TIFF go to OCR).
    std::fs::write(base.join("scan.pdf"), GIF).expect("write");
    std::fs::write(
        base.join("notes/minutes.txt"),
        "Minutes of the meeting.\n\nThe queue keeps every job in PostgreSQL.\n",
    )
    .expect("write");
    std::fs::write(base.join("empty.txt"), b"").expect("write");
    std::fs::write(base.join("huge.txt"), "too long a line\n".repeat(80_000)).expect("write");
    std::fs::write(base.join(".hidden.txt"), "a hidden note").expect("write");
    std::fs::write(base.join(".cache/cached.txt"), "cached text").expect("write");
    root
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_folder_is_ingested_with_a_summary_and_a_rerun_finds_duplicates(pool: sqlx::PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let folder = sample_folder();
    let path = folder.path().to_str().expect("utf-8 temp path");

    // Two files per request, so the five files take three requests.
    let first = ingest(&["--url", &api.base, "--batch-files", "2", path], None).await;
    let text = stdout(&first);
    assert_eq!(first.status.code(), Some(1), "{text}\n{}", stderr(&first));
    assert!(
        text.starts_with(&format!(
            "5 files → {}: 2 new, 0 duplicate, 3 rejected\n",
            api.base
        )),
        "{text}"
    );
    let rejected_line = |name: &str, code: &str| {
        text.lines()
            .any(|l| l.starts_with(&format!("  rejected {path}/{name}: {code}: ")))
    };
    assert!(rejected_line("scan.pdf", "unsupported_type"), "{text}");
    assert!(rejected_line("empty.txt", "empty_file"), "{text}");
    assert!(rejected_line("huge.txt", "file_too_large"), "{text}");
    assert!(
        text.contains("(image/gif)"),
        "the detected type is named: {text}"
    );

    let mut stored: Vec<(String, String)> =
        sqlx::query_as("select filename, content_type from documents order by filename")
            .fetch_all(&pool)
            .await
            .expect("documents");
    stored.sort();
    assert_eq!(
        stored,
        vec![
            ("minutes.txt".to_owned(), "text/plain".to_owned()),
            ("outline.pdf".to_owned(), "application/pdf".to_owned()),
        ]
    );

    let second = ingest(&["--url", &api.base, "--json", path], None).await;
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    let summary: serde_json::Value =
        serde_json::from_slice(&second.stdout).expect("the summary is JSON");
    assert_eq!(summary["new"], 0, "{summary}");
    assert_eq!(summary["duplicate"], 2, "{summary}");
    assert_eq!(summary["rejected"], 3, "{summary}");
    let documents: i64 = sqlx::query_scalar("select count(*) from documents")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(documents, 2);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn accepted_files_exit_zero_and_a_missing_token_exits_two(pool: sqlx::PgPool) {
    let token = "a-token-of-sixteen-chars";
    let api = TestApp::builder(pool.clone()).token(token).spawn().await;
    let file = fixture("text/pdfjs-README.md");
    let file = file.to_str().expect("utf-8 path");

    let refused = ingest(&["--url", &api.base, file], None).await;
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("the server refused the API token: it requires one"),
        "{}",
        stderr(&refused)
    );

    let accepted = ingest(&["--url", &api.base, file], Some(token)).await;
    assert_eq!(accepted.status.code(), Some(0), "{}", stderr(&accepted));
    assert!(
        stdout(&accepted).starts_with(&format!(
            "1 files → {}: 1 new, 0 duplicate, 0 rejected",
            api.base
        )),
        "{}",
        stdout(&accepted)
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_refused_token_is_named_even_when_the_server_stops_reading_a_large_upload(
    pool: sqlx::PgPool,
) {
    // The server answers 401 before reading the body and closes the connection, so a client
    // still writing 32 MiB sees a broken pipe, not the answer (CI saw this with a 10 KiB file
    // on a loaded machine).
    let api = TestApp::builder(pool.clone())
        .token("a-token-of-sixteen-chars")
        .spawn()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let large = dir.path().join("large.txt");
    std::fs::write(&large, "plain words of a large text file\n".repeat(1 << 20)).expect("write");
    for token in [None, Some("the-wrong-token-of-sixteen")] {
        let refused = ingest(
            &["--url", &api.base, large.to_str().expect("utf-8 path")],
            token,
        )
        .await;
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(
            stderr(&refused).contains("the server refused the API token"),
            "{token:?}: {}",
            stderr(&refused)
        );
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from documents")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error_with_exit_two() {
    // A port that was just free: nothing listens there once the listener is dropped.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let file = fixture("text/pdfjs-README.md");
    let output = ingest(&["--url", &url, file.to_str().expect("utf-8 path")], None).await;
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(&format!(
            "error: cannot reach docket at {url}/api/documents"
        )),
        "{message}"
    );
    assert!(
        message.contains("is `docket serve` running there?"),
        "{message}"
    );
}
