//! Liveness and readiness. `/healthz` says the process is up; `/readyz` says it can do its
//! work: the database answers and every migration this binary knows has been applied.

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::input::Json;

/// 200 while the process runs.
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// 200 when ready, 503 with the reason otherwise.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let applied: Result<Vec<i64>, sqlx::Error> =
        sqlx::query_scalar("select version from _sqlx_migrations where success")
            .fetch_all(&state.pool)
            .await;
    match applied {
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "reason": format!("database: {err}") })),
        ),
        Ok(applied) => {
            let missing: Vec<i64> = crate::db::MIGRATOR
                .iter()
                .map(|m| m.version)
                .filter(|v| !applied.contains(v))
                .collect();
            if missing.is_empty() {
                (StatusCode::OK, Json(json!({ "status": "ready" })))
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(
                        json!({ "status": "unavailable", "reason": "migrations not applied", "missing": missing }),
                    ),
                )
            }
        }
    }
}
