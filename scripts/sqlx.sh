#!/usr/bin/env bash
# sqlx.sh — writes (`prepare`) or checks (`check`) .sqlx/, the query descriptions from which
# docket's compile-time checked queries (sqlx::query! and friends) build without a database.
#
# Why: builds are offline (.cargo/config.toml sets SQLX_OFFLINE), so a fresh clone compiles with
# no database at all; the price is that .sqlx/ must match the queries and the migrations. Both
# modes check every query of the workspace against a scratch database migrated from scratch
# (docket_sqlx_<pid> on the server scripts/db.sh finds, dropped afterwards, so two checkouts can
# prepare at once), never against a database someone works in. `check` fails when .sqlx/ is stale: run `make prepare` and commit .sqlx/.
#
# Usage: scripts/sqlx.sh prepare | check
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode="${1:-check}"
case "$mode" in
  prepare) args=() ;;
  check) args=(--check) ;;
  *) echo "usage: scripts/sqlx.sh prepare|check" >&2; exit 2 ;;
esac

url="$(scripts/db.sh)"
base="${url%%\?*}"
params="${url#"$base"}"
export DATABASE_URL="${base%/*}/docket_sqlx_$$$params" SQLX_OFFLINE=false
trap 'cargo sqlx database drop -y >/dev/null 2>&1 || true' EXIT
cargo sqlx database reset -y --source migrations >&2
cargo sqlx prepare "${args[@]}" --workspace -- --all-targets
