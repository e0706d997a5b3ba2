#!/usr/bin/env bash
# db.sh — finds (or starts) the PostgreSQL server docket should use, creates its database, and
# prints the DATABASE_URL on stdout (the only thing it prints there; messages go to stderr).
#
# Why: `make run` and `make test` must work on any machine without asking the person where their
# database is. The choice, first match wins:
#   1. DATABASE_URL is set        → use it; create its database when missing.
#   2. a server answers on 127.0.0.1:$DOCKET_PG_PROBE_PORT (5432) and lets `postgres` in without
#      a password               → postgres://postgres@127.0.0.1:5432/docket, created when missing.
#   3. PostgreSQL binaries exist  → a private cluster under .docket/pg on 127.0.0.1:5433 (trust
#                                   auth, its own socket dir and log), initialised and started once,
#                                   reused afterwards.
#   4. none of these              → say what is missing and how to get it; exit 1.
#
# Usage: scripts/db.sh          print the URL (the default)
#        scripts/db.sh stop     stop the private cluster of case 3, when it runs
#        scripts/db.sh reset    drop and recreate the database the URL names (it is emptied!)
#
# Environment (all optional): DATABASE_URL; DOCKET_PG_PROBE_PORT (5432); DOCKET_PG_PRIVATE_PORT
# (5433); DOCKET_STATE_DIR (./.docket); DOCKET_DB_NAME (docket); DOCKET_PG_BIN_GLOB
# (/usr/lib/postgresql/*/bin, where initdb is looked for).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly PROBE_PORT="${DOCKET_PG_PROBE_PORT:-5432}"
readonly PRIVATE_PORT="${DOCKET_PG_PRIVATE_PORT:-5433}"
readonly STATE_DIR="${DOCKET_STATE_DIR:-$REPO_ROOT/.docket}"
readonly DB_NAME="${DOCKET_DB_NAME:-docket}"
readonly BIN_GLOB="${DOCKET_PG_BIN_GLOB:-/usr/lib/postgresql/*/bin}"
readonly PG_HOME="$STATE_DIR/pg"
readonly PG_DATA="$PG_HOME/data"
readonly PG_SOCKETS="$PG_HOME/run"
readonly PG_LOG="$PG_HOME/postgres.log"

say() { printf 'db: %s\n' "$*" >&2; }
# A URL fit for messages: any password replaced by ***.
redact() { sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#' <<<"$1"; }
die() {
  say "error: $*"
  exit 1
}

# True when a PostgreSQL server accepts connections on 127.0.0.1:$1.
server_answers() {
  if command -v pg_isready >/dev/null; then
    pg_isready -q -h 127.0.0.1 -p "$1" -t 3
  else
    # Without the client tools, a TCP connect is the best probe we have.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

require_psql() {
  command -v psql >/dev/null ||
    die "psql is missing; install the PostgreSQL client (Debian: apt-get install postgresql-client, or run 'make deps')"
}

# Splits a postgres:// URL into "<URL of the same server's postgres database>" and "<db name>".
# Percent-encoded database names are not decoded; docket's own names never need it.
split_url() {
  local url="$1"
  if [[ "$url" =~ ^(postgres(ql)?://[^/?]*)(/([^?]*))?(\?.*)?$ ]]; then
    MAINTENANCE_URL="${BASH_REMATCH[1]}/postgres${BASH_REMATCH[5]}"
    URL_DB="${BASH_REMATCH[4]}"
  else
    die "DATABASE_URL is not a postgres:// URL: $(redact "$url")"
  fi
  [[ -n "$URL_DB" ]] || die "DATABASE_URL names no database (postgres://user@host:port/NAME)"
}

# True when the URL's server lets us in without a password prompt.
can_log_in() {
  require_psql
  split_url "$1"
  PGCONNECT_TIMEOUT=5 psql -X -q -At -w "$MAINTENANCE_URL" -c 'select 1' >/dev/null 2>&1
}

# Creates the URL's database unless it exists. Connects to the server's `postgres` database to
# do so; quoting goes through psql variables so any name is safe.
ensure_database() {
  local url="$1"
  require_psql
  split_url "$url"
  local exists
  exists="$(psql -X -q -At -v ON_ERROR_STOP=1 -v name="$URL_DB" "$MAINTENANCE_URL" \
    <<<"select 1 from pg_database where datname = :'name';")" ||
    die "cannot connect to $(redact "$MAINTENANCE_URL") (the server's postgres database) to create '$URL_DB'"
  if [[ "$exists" != 1 ]]; then
    say "creating database $URL_DB"
    psql -X -q -v ON_ERROR_STOP=1 -v name="$URL_DB" "$MAINTENANCE_URL" <<<'create database :"name";' >&2
  fi
}

drop_database() {
  local url="$1"
  require_psql
  split_url "$url"
  say "dropping database $URL_DB"
  psql -X -q -v ON_ERROR_STOP=1 -v name="$URL_DB" "$MAINTENANCE_URL" \
    <<<'drop database if exists :"name" with (force);' >&2
}

# The newest PostgreSQL bin directory that has initdb, preferring one whose server has pgvector
# (install-deps.sh builds it for bookworm's 15).
pg_bindir() {
  local dir best="" with_vector=""
  for dir in $BIN_GLOB; do
    [[ -x "$dir/initdb" ]] || continue
    best="$dir"
    local major
    major="$(basename "$(dirname "$dir")")"
    [[ -f "/usr/share/postgresql/$major/extension/vector.control" ]] && with_vector="$dir"
  done
  printf '%s\n' "${with_vector:-$best}"
}

# Who owns and runs the private cluster: initdb refuses to run as root, so root hands the
# cluster to the `postgres` system user (present wherever Debian's server package is).
cluster_user() {
  if [[ $EUID -ne 0 ]]; then
    id -un
  elif id postgres >/dev/null 2>&1; then
    echo postgres
  else
    die "running as root, and there is no 'postgres' user to own the private cluster (initdb refuses root); run as an ordinary user or install postgresql"
  fi
}

# Runs from / so the cluster user never trips over a working directory it cannot read.
as_cluster_user() {
  local user="$1"
  shift
  if [[ "$user" == "$(id -un)" ]]; then
    (cd / && "$@")
  else
    (cd / && runuser -u "$user" -- "$@")
  fi
}

# The bin directory for the private cluster: the version it was initialised with, once it exists.
cluster_bindir() {
  if [[ -f "$PG_DATA/PG_VERSION" ]]; then
    local dir
    dir="/usr/lib/postgresql/$(cat "$PG_DATA/PG_VERSION")/bin"
    [[ -x "$dir/pg_ctl" ]] || die "$PG_DATA was made by PostgreSQL $(cat "$PG_DATA/PG_VERSION"), whose binaries ($dir) are gone; remove $PG_HOME to start afresh"
    printf '%s\n' "$dir"
  else
    pg_bindir
  fi
}

private_url() {
  printf 'postgres://postgres@127.0.0.1:%s/%s\n' "$PRIVATE_PORT" "$DB_NAME"
}

# Case 3: initialises the private cluster once, then (re)starts it when it is down.
ensure_private_cluster() {
  local bindir user
  bindir="$1"
  user="$(cluster_user)"
  mkdir -p "$PG_HOME"
  if [[ "$(stat -c %U "$PG_HOME")" != "$user" ]]; then
    chown -R "$user" "$PG_HOME"
  fi
  as_cluster_user "$user" test -w "$PG_HOME" ||
    die "user $user cannot write $PG_HOME: a parent directory is not traversable by it (chmod o+x the parents, or set DOCKET_STATE_DIR)"

  if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
    say "initialising a private PostgreSQL cluster in $PG_DATA ($bindir)"
    as_cluster_user "$user" mkdir -p "$PG_SOCKETS"
    as_cluster_user "$user" "$bindir/initdb" --pgdata="$PG_DATA" --username=postgres \
      --auth=trust --encoding=UTF8 --locale=C.UTF-8 --no-instructions >>"$PG_LOG.init" 2>&1 ||
      die "initdb failed; see $PG_LOG.init"
    # Unix socket paths are limited to ~107 bytes; a deep checkout gets TCP only.
    local sockets="$PG_SOCKETS"
    [[ ${#PG_SOCKETS} -le 90 ]] || sockets=""
    as_cluster_user "$user" tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# docket's private development cluster (scripts/db.sh): loopback only, away from system ports.
listen_addresses = '127.0.0.1'
port = $PRIVATE_PORT
unix_socket_directories = '$sockets'
EOF
  fi

  if ! as_cluster_user "$user" "$bindir/pg_ctl" status --pgdata="$PG_DATA" >/dev/null 2>&1; then
    say "starting the private PostgreSQL cluster on 127.0.0.1:$PRIVATE_PORT (log: $PG_LOG)"
    as_cluster_user "$user" "$bindir/pg_ctl" start --pgdata="$PG_DATA" --log="$PG_LOG" \
      --wait --timeout=60 >/dev/null ||
      die "the private cluster did not start; see $PG_LOG"
  fi
  server_answers "$PRIVATE_PORT" ||
    die "the private cluster runs but does not answer on 127.0.0.1:$PRIVATE_PORT (is the port taken?); see $PG_LOG"
}

stop_private_cluster() {
  [[ -f "$PG_DATA/postmaster.pid" ]] || {
    say "the private cluster is not running"
    return 0
  }
  local bindir user
  bindir="$(cluster_bindir)"
  user="$(stat -c %U "$PG_DATA")"
  as_cluster_user "$user" "$bindir/pg_ctl" stop --pgdata="$PG_DATA" --mode=fast --wait >&2
}

missing_everything() {
  cat >&2 <<EOF
db: error: no PostgreSQL server to use.
  - DATABASE_URL is not set;
  - nothing answers on 127.0.0.1:$PROBE_PORT;
  - no PostgreSQL server binaries were found ($BIN_GLOB/initdb) to start a private one.
Do one of:
  - on Debian/Ubuntu: run 'make deps' (installs PostgreSQL 15 with pgvector), then retry;
  - elsewhere: install PostgreSQL 15 or newer with the pgvector extension, then retry;
  - or point at an existing server: DATABASE_URL=postgres://USER@HOST:PORT/docket make run
EOF
  exit 1
}

# Prints the URL to use, creating the database (and the private cluster) as needed.
resolve_url() {
  if [[ -n "${DATABASE_URL:-}" ]]; then
    ensure_database "$DATABASE_URL"
    printf '%s\n' "$DATABASE_URL"
    return 0
  fi
  if server_answers "$PROBE_PORT"; then
    local url="postgres://postgres@127.0.0.1:$PROBE_PORT/$DB_NAME"
    if can_log_in "$url"; then
      ensure_database "$url"
      printf '%s\n' "$url"
      return 0
    fi
    # A stock Debian cluster asks TCP clients for a password; rather than weaken its pg_hba.conf
    # for every local user, docket gets a private cluster of its own.
    say "127.0.0.1:$PROBE_PORT answers but does not let 'postgres' in without a password; using a private cluster instead (set DATABASE_URL to use that server)"
  fi
  local bindir
  bindir="$(cluster_bindir)"
  [[ -n "$bindir" ]] || missing_everything
  ensure_private_cluster "$bindir"
  ensure_database "$(private_url)"
  private_url
}

main() {
  case "${1:-url}" in
    url) resolve_url ;;
    stop) stop_private_cluster ;;
    reset)
      local url
      url="$(resolve_url)"
      drop_database "$url"
      ensure_database "$url"
      printf '%s\n' "$url"
      ;;
    *) die "unknown command '$1' (use: url, stop, reset)" ;;
  esac
}

main "$@"
