//! `/api/documents` against a real server, database and pipeline: upload edge cases, the
//! one-transaction upload, listing, detail, download, delete and reprocess, real fixture files
//! through extraction, and the whole malformed corpus.

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{TestApp, chunks, fixture};

async fn count(pool: &PgPool, sql: &str, id: Option<i64>) -> i64 {
    let query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()));
    let query = match id {
        Some(id) => query.bind(id),
        None => query,
    };
    query.fetch_one(pool).await.expect("count")
}

fn error_code(body: &Value) -> &str {
    body["results"][0]["error"]["code"]
        .as_str()
        .or_else(|| body["error"]["code"].as_str())
        .unwrap_or_else(|| panic!("no error code in {body}"))
}

fn error_message(body: &Value) -> &str {
    body["results"][0]["error"]["message"]
        .as_str()
        .or_else(|| body["error"]["message"].as_str())
        .unwrap_or_else(|| panic!("no error message in {body}"))
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_file_over_the_limit_is_413_and_one_at_the_limit_is_accepted(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .max_upload_bytes(1000)
        .spawn()
        .await;
    let (status, body) = api.upload(&[("big.txt", vec![b'a'; 1001])]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(error_code(&body), "file_too_large");
    assert!(body["results"][0]["document"].is_null());
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        0
    );

    let (status, body) = api.upload(&[("fits.txt", vec![b'b'; 1000])]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // In a mixed request the big file is refused on its own and the small one still lands.
    let (status, body) = api
        .upload(&[
            ("big2.txt", vec![b'c'; 5000]),
            ("small.txt", b"small".to_vec()),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(error_code(&body), "file_too_large");
    assert_eq!(body["results"][1]["document"]["filename"], "small.txt");

    // The per-file limit is the only one: a file bigger than axum's 2 MB default body limit
    // but under ours is accepted.
    let api = TestApp::builder(pool.clone())
        .max_upload_bytes(8 * 1024 * 1024)
        .spawn()
        .await;
    let (status, body) = api
        .upload(&[("three-mb.txt", b"word ".repeat(600_000))])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["results"][0]["document"]["byte_size"], 3_000_000);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_gif_and_text_named_pdf_are_415_naming_what_they_are(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    // GIF is an image type docket does not read (PNG, JPEG and TIFF go to OCR).
    let gif =
        b"GIF89a\x01\0\x01\0\x80\0\0\xff\xff\xff\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";
    let (status, body) = api.upload(&[("typewriter.pdf", gif.to_vec())]).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert_eq!(error_code(&body), "unsupported_type");
    assert!(error_message(&body).contains("image/gif"), "{body}");

    let (status, body) = api
        .upload(&[("bad1.pdf", fixture("malformed/bad1.pdf"))])
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert_eq!(error_code(&body), "not_a_pdf");
    assert_eq!(
        error_message(&body),
        "named .pdf but the bytes are not a PDF (looks like text/plain)"
    );
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        0
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn empty_files_missing_file_fields_and_broken_multipart_are_400(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let (status, body) = api.upload(&[("empty.txt", Vec::new())]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_code(&body), "empty_file");

    // A form with only a text field: no file.
    let form = reqwest::multipart::Form::new().text("note", "hello");
    let response = api
        .client
        .post(api.url("/api/documents"))
        .multipart(form)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.expect("JSON error");
    assert_eq!(error_code(&body), "unexpected_field");

    // A well-formed multipart body with no parts at all.
    let response = api
        .client
        .post(api.url("/api/documents"))
        .header("content-type", "multipart/form-data; boundary=XYZ")
        .body("--XYZ--\r\n")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.expect("JSON error");
    assert_eq!(error_code(&body), "no_file");

    // A body that does not follow its boundary.
    let response = api
        .client
        .post(api.url("/api/documents"))
        .header("content-type", "multipart/form-data; boundary=XYZ")
        .body("--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nno closing boundary")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.expect("JSON error");
    assert_eq!(error_code(&body), "invalid_multipart");
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        0
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_same_bytes_again_return_the_existing_document_with_200(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let bytes = b"the same words twice".to_vec();
    let first = api.upload_one("first.txt", bytes.clone()).await;
    let (status, body) = api.upload(&[("second name.txt", bytes)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = &body["results"][0];
    assert_eq!(result["duplicate"], true);
    assert_eq!(result["filename"], "second name.txt");
    assert_eq!(result["document"]["id"], first);
    assert_eq!(result["document"]["filename"], "first.txt");
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        1
    );
    assert_eq!(count(&pool, "select count(*) from jobs", None).await, 1);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn twenty_files_in_one_request_come_back_in_order(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| {
            (
                format!("file-{i:02}.txt"),
                format!("document number {i} says something").into_bytes(),
            )
        })
        .collect();
    // Reverse name order so that "in order" cannot come from sorting.
    let files: Vec<(&str, Vec<u8>)> = files
        .iter()
        .rev()
        .map(|(name, bytes)| (name.as_str(), bytes.clone()))
        .collect();
    let (status, body) = api.upload(&files).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results.len(), 20);
    for (result, (name, bytes)) in results.iter().zip(&files) {
        assert_eq!(result["filename"], *name);
        assert_eq!(result["document"]["filename"], *name);
        assert_eq!(result["document"]["byte_size"], bytes.len());
        assert_eq!(result["duplicate"], false);
        assert!(result["error"].is_null());
    }
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        20
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from jobs where kind = 'extract'",
            None
        )
        .await,
        20
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn hostile_filenames_are_stored_verbatim_as_data_and_downloads_are_safe(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    for (name, bytes) in [
        (
            "../../etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash".to_vec(),
        ),
        (
            "<img src=x onerror=alert(1)>.txt",
            b"<img src=x onerror=alert(1)> is text here".to_vec(),
        ),
        ("quote\"; filename=evil.html", b"a quote in a name".to_vec()),
    ] {
        let response = api
            .client
            .post(api.url("/api/documents"))
            .multipart(reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(bytes.clone()).file_name(name),
            ))
            .send()
            .await
            .expect("upload");
        assert_eq!(response.status(), StatusCode::CREATED);
        let content_type = response.headers()["content-type"].to_str().expect("ascii");
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["results"][0]["filename"], name);
        let id = body["results"][0]["document"]["id"].as_i64().expect("id");
        assert_eq!(api.document(id).await["filename"], name);
        let stored: String = sqlx::query_scalar("select filename from documents where id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("stored name");
        assert_eq!(stored, name);

        let response = api
            .client
            .get(api.url(&format!("/api/documents/{id}/file")))
            .send()
            .await
            .expect("download");
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        let disposition = headers["content-disposition"]
            .to_str()
            .expect("ascii header");
        assert!(disposition.starts_with("attachment; "), "{disposition}");
        let plain = disposition
            .split("filename=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("a quoted filename");
        assert!(
            !plain.contains(['/', '\\', '<', '>', ';']) && !plain.contains(".."),
            "unsafe download name {plain:?} in {disposition}"
        );
        // Exactly the two quotes around the fallback name: the name cannot break out.
        assert_eq!(disposition.matches('"').count(), 2, "{disposition}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .expect("ascii")
                .contains("sandbox")
        );
        assert_eq!(response.bytes().await.expect("bytes").as_ref(), bytes);
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_failure_after_the_document_insert_leaves_nothing_behind(pool: PgPool) {
    sqlx::raw_sql(
        "create function refuse_jobs() returns trigger language plpgsql as $$
         begin raise exception 'jobs are refused by the test'; end $$;
         create trigger refuse_jobs before insert on jobs
         for each row execute function refuse_jobs();",
    )
    .execute(&pool)
    .await
    .expect("install the trigger");
    let api = TestApp::builder(pool.clone()).spawn().await;
    let bytes = b"a document whose job cannot be enqueued".to_vec();
    let (status, body) = api.upload(&[("doomed.txt", bytes.clone())]).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(
        !body.to_string().contains("refused by the test"),
        "a 5xx leaked its cause: {body}"
    );
    assert_eq!(
        count(&pool, "select count(*) from documents", None).await,
        0
    );
    assert_eq!(
        count(&pool, "select count(*) from document_blobs", None).await,
        0
    );
    assert_eq!(count(&pool, "select count(*) from jobs", None).await, 0);

    // Nothing half-written blocks the same bytes later: they are new, not a duplicate.
    sqlx::raw_sql("drop trigger refuse_jobs on jobs")
        .execute(&pool)
        .await
        .expect("drop the trigger");
    let (status, body) = api.upload(&[("doomed.txt", bytes)]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["results"][0]["duplicate"], false);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn listing_pages_newest_first_filters_by_status_and_refuses_unknown_ones(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            api.upload_one(&format!("n{i}.txt"), format!("note {i} text").into_bytes())
                .await,
        );
    }
    let worker = api.worker().await;
    worker.run_until_idle().await;
    let pending = api
        .upload_one("late.txt", b"uploaded after the run".to_vec())
        .await;

    let list = |query: String| {
        let api = &api;
        async move {
            let response = api
                .client
                .get(api.url(&format!("/api/documents{query}")))
                .send()
                .await
                .expect("list");
            (
                response.status(),
                response.json::<Value>().await.expect("JSON"),
            )
        }
    };
    let ids_of = |body: &Value| -> Vec<i64> {
        body["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .map(|d| d["id"].as_i64().expect("id"))
            .collect()
    };
    let mut all = vec![pending];
    all.extend(ids.iter().rev());
    let mut seen = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let (status, body) = list(query.clone()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let page = ids_of(&body);
        assert!(page.len() <= 2);
        seen.extend(page);
        match body["next"].as_i64() {
            Some(next) => query = format!("?limit=2&before={next}"),
            None => break,
        }
    }
    assert_eq!(seen, all, "pages cover every document once, newest first");

    let (_, ready) = list("?status=ready".into()).await;
    let mut ready_ids = ids_of(&ready);
    ready_ids.sort();
    assert_eq!(ready_ids, ids);
    let (_, uploaded) = list("?status=uploaded".into()).await;
    assert_eq!(ids_of(&uploaded), vec![pending]);
    let (status, body) = list("?status=done".into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_status");
    let (status, _) = list("?limit=0".into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn detail_download_delete_and_reprocess_of_a_real_pdf(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let bytes = fixture("pdf/pdflatex-outline.pdf");
    let id = api.upload_one("outline.pdf", bytes.clone()).await;
    let worker = api.worker().await;
    worker.run_until_idle().await;

    let detail = api.document(id).await;
    assert_eq!(detail["status"], "ready", "{detail}");
    let chunk_count = count(
        &pool,
        "select count(*) from chunks where document_id = $1",
        Some(id),
    )
    .await;
    assert!(chunk_count > 0);
    assert_eq!(detail["chunk_count"], chunk_count);
    assert_eq!(detail["page_count"], 4);
    assert!(detail["extractor"].is_string(), "{detail}");
    let sets = detail["embedding_sets"].as_array().expect("sets");
    assert_eq!(sets.len(), 1, "{detail}");
    assert_eq!(sets[0]["chunk_count"], chunk_count);
    assert_eq!(sets[0]["embedded"], chunk_count);
    assert!(sets[0]["completed_at"].is_string());
    let jobs: Vec<(String, String)> = detail["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["kind"].as_str().unwrap().to_owned(),
                j["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("extract".into(), "done".into()),
            ("embed".into(), "done".into())
        ]
    );

    let response = api
        .client
        .get(api.url(&format!("/api/documents/{id}/file")))
        .send()
        .await
        .expect("download");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/pdf");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert!(
        response.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"outline.pdf\"")
    );
    assert_eq!(
        response.bytes().await.expect("bytes").as_ref(),
        bytes.as_slice()
    );

    // Reprocess: back through both steps, ready again with the same chunks and all vectors.
    let response = api
        .client
        .post(api.url(&format!("/api/documents/{id}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["status"], "uploaded");
    worker.run_until_idle().await;
    let detail = api.document(id).await;
    assert_eq!(detail["status"], "ready", "{detail}");
    assert_eq!(detail["chunk_count"], chunk_count);
    assert_eq!(
        detail["jobs"].as_array().expect("jobs").len(),
        4,
        "{detail}"
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from embeddings where document_id = $1",
            Some(id)
        )
        .await,
        chunk_count
    );

    // Delete: the document and everything derived from it go; then 404 everywhere.
    let response = api
        .client
        .delete(api.url(&format!("/api/documents/{id}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    for table in ["chunks", "embeddings", "embedding_sets", "document_blobs"] {
        let sql = format!("select count(*) from {table} where document_id = $1");
        assert_eq!(count(&pool, &sql, Some(id)).await, 0, "{table} kept rows");
    }
    for (method, path) in [
        (reqwest::Method::GET, format!("/api/documents/{id}")),
        (reqwest::Method::GET, format!("/api/documents/{id}/file")),
        (reqwest::Method::DELETE, format!("/api/documents/{id}")),
        (
            reqwest::Method::POST,
            format!("/api/documents/{id}/reprocess"),
        ),
    ] {
        let response = api
            .client
            .request(method.clone(), api.url(&path))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{method} {path}");
        let body: Value = response.json().await.expect("JSON error");
        assert_eq!(body["error"]["code"], "document_not_found");
    }
}

fn is_hangul(c: char) -> bool {
    ('\u{ac00}'..='\u{d7a3}').contains(&c)
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn real_pdfs_keep_their_pages_and_the_korean_pdf_gives_korean_chunks(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let outline = api
        .upload_one("outline.pdf", fixture("pdf/pdflatex-outline.pdf"))
        .await;
    let korean = api
        .upload_one("cjk-ko-doc.pdf", fixture("pdf/cjk-ko-doc.pdf"))
        .await;
    let worker = api.worker().await;
    worker.run_until_idle().await;

    assert_eq!(api.document(outline).await["status"], "ready");
    let outline_chunks = chunks(&pool, outline).await;
    let pages: Vec<i32> = outline_chunks.iter().map(|(page, _)| *page).collect();
    assert!(pages.is_sorted(), "chunk pages go forward: {pages:?}");
    let mut distinct = pages.clone();
    distinct.dedup();
    assert_eq!(distinct, vec![1, 2, 3, 4], "every page has chunks");
    // The table of contents is page 1; the body text starts on page 2.
    let on_page = |page: i32| {
        outline_chunks
            .iter()
            .filter(|(p, _)| *p == page)
            .map(|(_, text)| text.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(on_page(1).contains("Contents"), "{}", on_page(1));
    assert!(!on_page(1).contains("Hello, here is some text"));
    assert!(
        on_page(2).contains("Hello, here is some text"),
        "{}",
        on_page(2)
    );

    let detail = api.document(korean).await;
    assert_eq!(detail["status"], "ready", "{detail}");
    assert_eq!(detail["page_count"], 6);
    let korean_chunks = chunks(&pool, korean).await;
    let text: String = korean_chunks.iter().map(|(_, t)| t.as_str()).collect();
    let hangul = text.chars().filter(|c| is_hangul(*c)).count();
    assert!(
        hangul > 500,
        "only {hangul} Hangul syllables in the Korean PDF's chunks"
    );
    assert!(
        korean_chunks
            .iter()
            .filter(|(_, t)| t.chars().any(is_hangul))
            .count()
            * 2
            > korean_chunks.len(),
        "most chunks of the Korean PDF hold Hangul"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn every_malformed_file_is_refused_or_fails_with_a_reason_and_the_worker_keeps_working(
    pool: PgPool,
) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/malformed");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("malformed fixtures")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert!(names.len() >= 14, "malformed fixtures missing: {names:?}");

    let mut accepted = Vec::new();
    let mut report = Vec::new();
    for name in &names {
        let (status, body) = api
            .upload(&[(name.as_str(), fixture(&format!("malformed/{name}")))])
            .await;
        match status {
            StatusCode::CREATED => {
                accepted.push((
                    name.clone(),
                    body["results"][0]["document"]["id"].as_i64().expect("id"),
                ));
            }
            StatusCode::UNSUPPORTED_MEDIA_TYPE | StatusCode::BAD_REQUEST => {
                let message = error_message(&body);
                assert!(message.len() > 10, "{name}: unclear refusal {body}");
                report.push(format!("{name}: refused {status}: {message}"));
            }
            other => panic!("{name}: unexpected upload status {other}: {body}"),
        }
    }
    let worker = api.worker().await;
    worker.run_until_idle_within(30).await;

    for (name, id) in &accepted {
        let detail = api.document(*id).await;
        let status = detail["status"].as_str().expect("status");
        match status {
            "failed" => {
                let message = detail["error"]["message"].as_str().unwrap_or_default();
                assert!(
                    message.len() > 10,
                    "{name}: failed without a readable reason: {detail}"
                );
                let jobs = detail["jobs"].as_array().expect("jobs");
                assert!(
                    jobs.iter()
                        .any(|j| j["status"] == "dead" && j["last_error"].is_string()),
                    "{name}: a failed document has a dead job with its error: {detail}"
                );
                report.push(format!("{name}: failed: {message}"));
            }
            // Some damaged files still have readable text (a recoverable xref, a real PDF
            // named .txt); those may end ready, with chunks.
            "ready" => {
                assert!(
                    detail["chunk_count"].as_i64().unwrap_or(0) > 0,
                    "{name}: {detail}"
                );
                report.push(format!("{name}: ready via {}", detail["extractor"]));
            }
            _ => panic!("{name}: stuck in {status}: {detail}"),
        }
    }
    println!("{}", report.join("\n"));
    let by_name = |n: &str| {
        report
            .iter()
            .find(|r| r.starts_with(n))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        by_name("bad1.pdf").contains("refused 415"),
        "{}",
        by_name("bad1.pdf")
    );
    assert!(
        by_name("empty.pdf").contains("refused 400"),
        "{}",
        by_name("empty.pdf")
    );
    // A PNG named .pdf is an image, read by OCR.
    assert!(
        by_name("typewriter.pdf").contains("ready via \"ocr (tesseract"),
        "{}",
        by_name("typewriter.pdf")
    );
    assert!(
        by_name("la-precinct-bulletin-2014-p1.txt").contains("ready"),
        "a PDF named .txt is read as a PDF: {}",
        by_name("la-precinct-bulletin-2014-p1.txt")
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from jobs where status in ('ready', 'running')",
            None
        )
        .await,
        0
    );

    // The same worker still serves: a good document goes all the way.
    let good = api
        .upload_one("after.md", fixture("text/pdfjs-README.md"))
        .await;
    worker.run_until_idle().await;
    assert_eq!(api.document(good).await["status"], "ready");
}
