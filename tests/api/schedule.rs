//! Schedules against a real PostgreSQL with an injected clock: two leaders over a simulated week,
//! downtime and the backfill window, daylight saving days, the API, and pg_cron.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, TimeZone, Utc};
use docket::schedule::{
    self, NewSchedule, Scheduler, SchedulerConfig, fire_due, firing_key, store,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{TestApp, database_url};

fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .expect("valid UTC time")
}

fn new_schedule(name: &str, cron: &str, timezone: &str) -> NewSchedule {
    NewSchedule {
        name: name.to_owned(),
        cron: cron.to_owned(),
        timezone: timezone.to_owned(),
        kind: "noop".to_owned(),
        payload: json!({ "from": name }),
        enabled: true,
        backfill_secs: 86_400,
    }
}

/// The idempotency keys of the jobs `name` enqueued, in the order they were enqueued.
/// Creates a schedule that starts counting at `at`.
async fn create(pool: &PgPool, name: &str, cron: &str, timezone: &str, at: DateTime<Utc>) {
    store::create(pool, &new_schedule(name, cron, timezone), at)
        .await
        .expect("create schedule");
}

async fn fired_keys(pool: &PgPool, name: &str) -> Vec<String> {
    sqlx::query_scalar("select idempotency_key from jobs where idempotency_key like $1 order by id")
        .bind(format!("schedule:{name}:%"))
        .fetch_all(pool)
        .await
        .expect("keys")
}

fn keys(name: &str, times: impl IntoIterator<Item = DateTime<Utc>>) -> Vec<String> {
    times.into_iter().map(|t| firing_key(name, t)).collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn two_scheduler_loops_over_a_simulated_week_fire_every_firing_exactly_once(pool: PgPool) {
    let start = utc(2026, 3, 25, 0, 0);
    let end = start + Duration::days(7);
    create(&pool, "half-hourly", "*/30 * * * *", "UTC", start).await;
    create(&pool, "daily-0230", "30 2 * * *", "Europe/Stockholm", start).await;

    let config = SchedulerConfig::default();
    let mut a = Scheduler::new(pool.clone(), config.clone());
    let mut b = Scheduler::new(pool.clone(), config);
    let mut now = start;
    let mut steps = 0;
    let mut crashed = false;
    while now < end {
        now = (now + Duration::minutes(11)).min(end);
        steps += 1;
        let (ra, rb) = tokio::join!(a.step(now), b.step(now));
        let leaders = [ra.expect("step a"), rb.expect("step b")]
            .iter()
            .filter(|r| r.is_some())
            .count();
        assert!(leaders <= 1, "two leaders at {now}");
        // Half-way through, the leader dies; the other must take over.
        if !crashed && now >= start + Duration::days(3) && leaders == 1 {
            if a.is_leader() {
                a.resign().await;
            } else {
                b.resign().await;
            }
            crashed = true;
        }
    }
    assert!(crashed && steps > 900);
    assert!(a.is_leader() || b.is_leader(), "someone leads at the end");

    // Every half hour of the week, counted by arithmetic, not by the cron library.
    let expected = keys(
        "half-hourly",
        (1..=7 * 48).map(|k| start + Duration::minutes(30 * k)),
    );
    assert_eq!(fired_keys(&pool, "half-hourly").await, expected);
    // 02:30 in Stockholm: CET (01:30 UTC) before 29 March, the first instant after the gap on the
    // 29th (03:00 CEST = 01:00 UTC), and CEST (00:30 UTC) after.
    let expected = keys(
        "daily-0230",
        [
            utc(2026, 3, 25, 1, 30),
            utc(2026, 3, 26, 1, 30),
            utc(2026, 3, 27, 1, 30),
            utc(2026, 3, 28, 1, 30),
            utc(2026, 3, 29, 1, 0),
            utc(2026, 3, 30, 0, 30),
            utc(2026, 3, 31, 0, 30),
        ],
    );
    assert_eq!(fired_keys(&pool, "daily-0230").await, expected);
    let cursor = store::get(&pool, "half-hourly")
        .await
        .expect("get")
        .last_fired_for;
    assert_eq!(cursor, Some(end));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn concurrent_firings_without_the_lock_still_enqueue_each_time_once(pool: PgPool) {
    let start = utc(2026, 5, 1, 0, 0);
    create(&pool, "every-5", "*/5 * * * *", "UTC", start).await;
    let mut reported = 0;
    for step in 1..=24 * 6 {
        let now = start + Duration::minutes(10 * step);
        let (x, y) = tokio::join!(
            fire_due(&pool, "every-5", now),
            fire_due(&pool, "every-5", now)
        );
        reported += x.expect("fire").fired.len() + y.expect("fire").fired.len();
    }
    let expected = keys(
        "every-5",
        (1..=24 * 12).map(|k| start + Duration::minutes(5 * k)),
    );
    assert_eq!(fired_keys(&pool, "every-5").await, expected);
    assert_eq!(reported, expected.len(), "no firing was reported twice");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn three_days_down_with_a_one_day_window_runs_exactly_the_firings_inside(pool: PgPool) {
    let t0 = utc(2026, 6, 1, 0, 0);
    create(&pool, "hourly", "0 * * * *", "UTC", t0).await;
    let first = fire_due(&pool, "hourly", t0 + Duration::minutes(61))
        .await
        .expect("fire");
    assert_eq!(first.fired, vec![utc(2026, 6, 1, 1, 0)]);
    assert_eq!(first.backfilled, 0);

    // Down for three days; back at 06-04 01:20 with a one-day window.
    let back = utc(2026, 6, 4, 1, 20);
    let report = fire_due(&pool, "hourly", back).await.expect("fire");
    let window_start = utc(2026, 6, 3, 2, 0); // the first firing no older than a day
    let inside: Vec<DateTime<Utc>> = (0..24).map(|h| window_start + Duration::hours(h)).collect();
    assert_eq!(report.fired, inside, "oldest first, only inside the window");
    assert_eq!(report.backfilled, 23);
    // 06-01 02:00 … 06-03 01:00 were older than the window.
    assert_eq!(report.skipped, 48);
    let mut expected = keys("hourly", [utc(2026, 6, 1, 1, 0)]);
    expected.extend(keys("hourly", inside));
    assert_eq!(fired_keys(&pool, "hourly").await, expected);

    // The next pass neither repeats nor revisits the skipped ones.
    let again = fire_due(&pool, "hourly", back).await.expect("fire");
    assert!(again.fired.is_empty() && again.skipped == 0);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_schedule_re_enabled_after_months_never_fires_older_than_its_window(pool: PgPool) {
    // A per-minute schedule left disabled for 100 days: 144,000 missed firings, more than one
    // pass counts, and a one-hour window.
    let t0 = utc(2026, 1, 1, 0, 0);
    let mut every_minute = new_schedule("every-minute", "* * * * *", "UTC");
    every_minute.backfill_secs = 3600;
    store::create(&pool, &every_minute, t0)
        .await
        .expect("create");
    let back = t0 + Duration::days(100) + Duration::seconds(30);
    let report = fire_due(&pool, "every-minute", back).await.expect("fire");
    let oldest_allowed = back - Duration::hours(1);
    assert!(
        report.fired.iter().all(|at| *at >= oldest_allowed),
        "fired {} firings, the oldest {:?}, older than the window start {oldest_allowed}",
        report.fired.len(),
        report.fired.first()
    );
    assert_eq!(report.fired.len(), 60, "the last hour's firings, no more");
    assert_eq!(report.fired.last(), Some(&(t0 + Duration::days(100))));
}

/// Drives one scheduler every five minutes across `[from, to)` and returns the local dates
/// (in `zone`) of the daily schedule's firings.
async fn local_firing_dates(
    pool: &PgPool,
    name: &str,
    zone: chrono_tz::Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<(String, String)> {
    let mut scheduler = Scheduler::new(pool.clone(), SchedulerConfig::default());
    let mut now = from;
    while now < to {
        now += Duration::minutes(5);
        scheduler.step(now).await.expect("step");
    }
    let keys = fired_keys(pool, name).await;
    keys.iter()
        .map(|key| {
            let stamp = key.rsplit_once(&format!("{name}:")).expect("key").1;
            let logical: DateTime<Utc> = stamp.parse().expect("UTC stamp");
            let local = logical.with_timezone(&zone);
            (
                local.format("%Y-%m-%d").to_string(),
                local.format("%H:%M %Z").to_string(),
            )
        })
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn daily_0230_runs_once_on_the_spring_forward_day(pool: PgPool) {
    let zone = chrono_tz::America::New_York; // 2026-03-08: 02:00 EST → 03:00 EDT
    let from = utc(2026, 3, 7, 12, 0);
    create(&pool, "ny-0230", "30 2 * * *", "America/New_York", from).await;
    let dates = local_firing_dates(&pool, "ny-0230", zone, from, utc(2026, 3, 10, 12, 0)).await;
    assert_eq!(
        dates,
        vec![
            ("2026-03-08".to_owned(), "03:00 EDT".to_owned()),
            ("2026-03-09".to_owned(), "02:30 EDT".to_owned()),
            ("2026-03-10".to_owned(), "02:30 EDT".to_owned()),
        ]
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn daily_0230_runs_once_on_the_fall_back_day(pool: PgPool) {
    let zone = chrono_tz::America::New_York; // 2026-11-01: 02:00 EDT → 01:00 EST
    let from = utc(2026, 10, 31, 12, 0);
    create(&pool, "ny-0130", "30 1 * * *", "America/New_York", from).await;
    create(&pool, "ny-0230", "30 2 * * *", "America/New_York", from).await;
    let to = utc(2026, 11, 3, 12, 0);
    let repeated = local_firing_dates(&pool, "ny-0130", zone, from, to).await;
    // 01:30 happens twice on 1 November; it runs once, at the first (EDT) instant.
    assert_eq!(
        repeated,
        vec![
            ("2026-11-01".to_owned(), "01:30 EDT".to_owned()),
            ("2026-11-02".to_owned(), "01:30 EST".to_owned()),
            ("2026-11-03".to_owned(), "01:30 EST".to_owned()),
        ]
    );
    // The same run fired ny-0230 too; an empty interval only reads its firings back.
    let dates: BTreeSet<(String, String)> = local_firing_dates(&pool, "ny-0230", zone, to, to)
        .await
        .into_iter()
        .collect();
    assert_eq!(
        dates,
        BTreeSet::from([
            ("2026-11-01".to_owned(), "02:30 EST".to_owned()),
            ("2026-11-02".to_owned(), "02:30 EST".to_owned()),
            ("2026-11-03".to_owned(), "02:30 EST".to_owned()),
        ])
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn schedules_api_creates_lists_updates_runs_and_deletes(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let created = api
        .client
        .post(api.url("/api/schedules"))
        .json(&json!({ "name": "tick", "cron": "*/10 * * * *", "kind": "noop", "backfill_secs": 3600 }))
        .send()
        .await
        .expect("post");
    assert_eq!(created.status(), StatusCode::CREATED);
    let body: Value = created.json().await.expect("json");
    assert_eq!(body["timezone"], "UTC");
    assert!(body["next_firing"].is_string());

    let again = api
        .client
        .post(api.url("/api/schedules"))
        .json(&json!({ "name": "tick", "cron": "*/10 * * * *", "kind": "noop" }))
        .send()
        .await
        .expect("post");
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let bad = api
        .client
        .post(api.url("/api/schedules"))
        .json(&json!({ "name": "bad", "cron": "0 0 2 * * *", "kind": "noop" }))
        .send()
        .await
        .expect("post");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        bad.json::<Value>().await.expect("json")["error"]["code"],
        "invalid_schedule"
    );

    let patched: Value = api
        .client
        .patch(api.url("/api/schedules/tick"))
        .json(&json!({ "enabled": false, "timezone": "Europe/Stockholm" }))
        .send()
        .await
        .expect("patch")
        .json()
        .await
        .expect("json");
    assert_eq!(patched["enabled"], false);
    assert_eq!(patched["timezone"], "Europe/Stockholm");

    let ran = api
        .client
        .post(api.url("/api/schedules/tick/run-now"))
        .send()
        .await
        .expect("run now");
    assert_eq!(ran.status(), StatusCode::ACCEPTED);
    let job_id = ran.json::<Value>().await.expect("json")["job_id"]
        .as_i64()
        .expect("id");
    let kind: String = sqlx::query_scalar("select kind from jobs where id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .expect("job");
    assert_eq!(kind, "noop");

    let listed: Value = api.get_json("/api/schedules").await;
    assert_eq!(listed["schedules"].as_array().map(Vec::len), Some(1));

    let deleted = api
        .client
        .delete(api.url("/api/schedules/tick"))
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let gone = api
        .client
        .get(api.url("/api/schedules/tick"))
        .send()
        .await
        .expect("get");
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn pg_cron_job_enqueues_with_the_in_app_key_and_never_twice(pool: PgPool) {
    let url = database_url(&pool).await;
    let t0 = utc(2026, 1, 1, 0, 0);
    create(&pool, "pgc", "*/5 * * * *", "UTC", t0).await;
    create(&pool, "zoned", "*/5 * * * *", "Europe/Stockholm", t0).await;
    let refused = schedule::pg_cron::install(&pool, &url, "zoned").await;
    assert!(
        matches!(&refused, Err(schedule::ScheduleError::Invalid(m)) if m.contains("GMT")),
        "{refused:?}"
    );

    let job = schedule::pg_cron::install(&pool, &url, "pgc")
        .await
        .expect("install");
    let cron_db = sqlx::PgPool::connect(&{
        let mut u = url::Url::parse(&url).expect("url");
        u.set_path(&job.cron_database);
        u.to_string()
    })
    .await
    .expect("connect to pg_cron's database");
    let (database, command, spec): (String, String, String) =
        sqlx::query_as("select database, command, schedule from cron.job where jobname = $1")
            .bind(&job.jobname)
            .fetch_one(&cron_db)
            .await
            .expect("the job is registered");
    let target: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&pool)
        .await
        .expect("db");
    assert_eq!(
        (database.as_str(), spec.as_str()),
        (target.as_str(), "*/5 * * * *")
    );

    // The in-app scheduler fires 00:05; the SQL firing of the same logical time finds its job.
    let report = fire_due(&pool, "pgc", t0 + Duration::minutes(6))
        .await
        .expect("fire");
    assert_eq!(report.fired, vec![t0 + Duration::minutes(5)]);
    let in_app: i64 = sqlx::query_scalar("select id from jobs where idempotency_key = $1")
        .bind(firing_key("pgc", t0 + Duration::minutes(5)))
        .fetch_one(&pool)
        .await
        .expect("job");
    let from_sql: i64 = sqlx::query_scalar("select docket_fire_schedule('pgc', $1)")
        .bind(t0 + Duration::minutes(5))
        .fetch_one(&pool)
        .await
        .expect("fire in SQL");
    assert_eq!(from_sql, in_app);

    // What pg_cron runs: a firing for the current minute, keyed exactly as the in-app one.
    sqlx::query(sqlx::AssertSqlSafe(command))
        .execute(&pool)
        .await
        .expect("the registered command runs");
    let cursor = store::get(&pool, "pgc")
        .await
        .expect("get")
        .last_fired_for
        .expect("moved");
    assert_eq!(
        fired_keys(&pool, "pgc").await,
        keys("pgc", [t0 + Duration::minutes(5), cursor])
    );

    assert!(
        schedule::pg_cron::uninstall(&pool, &url, "pgc")
            .await
            .expect("uninstall")
    );
    let left: i64 = sqlx::query_scalar("select count(*) from cron.job where jobname = $1")
        .bind(&job.jobname)
        .fetch_one(&cron_db)
        .await
        .expect("count");
    assert_eq!(left, 0);
    cron_db.close().await;
}
