//! Liveness and readiness. `/healthz` says the process is up; `/readyz` says it can do its
//! work: the database answers and every migration this binary knows has been applied.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::input::Json;

/// Answer of `/healthz` and `/readyz`.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: HealthStatus,
    /// Why not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The versions of the migrations not applied yet, when that is the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<i64>>,
}

/// What a probe says.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// The process runs (`/healthz`).
    Ok,
    /// It can do its work (`/readyz`).
    Ready,
    /// It cannot yet (`/readyz`, with the reason).
    Unavailable,
}

impl Health {
    fn is(status: HealthStatus) -> Self {
        Self {
            status,
            reason: None,
            missing: None,
        }
    }

    fn unavailable(reason: String, missing: Option<Vec<i64>>) -> (StatusCode, Json<Self>) {
        let health = Self {
            status: HealthStatus::Unavailable,
            reason: Some(reason),
            missing,
        };
        (StatusCode::SERVICE_UNAVAILABLE, Json(health))
    }
}

/// 200 while the process runs.
pub async fn healthz() -> Json<Health> {
    Json(Health::is(HealthStatus::Ok))
}

/// 200 when ready, 503 with the reason otherwise.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let applied: Result<Vec<i64>, sqlx::Error> =
        sqlx::query_scalar("select version from _sqlx_migrations where success")
            .fetch_all(&state.pool)
            .await;
    let applied = match applied {
        Ok(applied) => applied,
        Err(err) => return Health::unavailable(format!("database: {err}"), None),
    };
    let missing: Vec<i64> = crate::db::MIGRATOR
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect();
    if missing.is_empty() {
        (StatusCode::OK, Json(Health::is(HealthStatus::Ready)))
    } else {
        Health::unavailable("migrations not applied".into(), Some(missing))
    }
}
