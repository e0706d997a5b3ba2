#!/usr/bin/env bash
# install-deps.sh — installs what docket needs on Debian bookworm, idempotently.
#
# Why: the README promises (Quick start) that `make run` and `make test` work on a clean
# machine and never depend on anything installed by hand. This script is the one place that
# knows what "installed" means: system packages, pgvector (built from Debian's trixie source
# package, since bookworm has no binary package), pg_cron preloaded in the Debian cluster, and
# a Rust toolchain with rustfmt and clippy. Every step checks first and does nothing when its
# work is already done, so a second run is a fast, silent no-op. Messages go to stderr only.
#
# Environment (all optional):
#   DOCKET_PG_MAJOR   PostgreSQL major version to target (default 15, bookworm's).
#   DOCKET_APT_DIR    private apt state for the trixie source suite (default /var/cache/docket-apt).
set -euo pipefail

# Called from `make`, the environment carries make's flags, and our Makefile's
# --no-builtin-rules would reach pgvector's PGXS build, which compiles its .c files through
# make's built-in rules ("No rule to make target 'src/bitutils.o'"). Builds here start clean.
unset MAKEFLAGS MFLAGS MAKELEVEL

readonly PG_MAJOR="${DOCKET_PG_MAJOR:-15}"
readonly PG_BINDIR="/usr/lib/postgresql/$PG_MAJOR/bin"
readonly PG_CONFIG="$PG_BINDIR/pg_config"
readonly VECTOR_CONTROL="/usr/share/postgresql/$PG_MAJOR/extension/vector.control"
readonly CLUSTER_NAME="main"
readonly CLUSTER_CONF_DIR="/etc/postgresql/$PG_MAJOR/$CLUSTER_NAME"
# Sorts after the usual numbered drop-ins so our shared_preload_libraries (which already folds in
# every other file's value) is the one PostgreSQL keeps.
readonly CRON_DROPIN="$CLUSTER_CONF_DIR/conf.d/99-docket-pg-cron.conf"
readonly APT_DIR="${DOCKET_APT_DIR:-/var/cache/docket-apt}"
# The trixie InRelease is signed by the bookworm archive key as well as trixie's, so the archive
# keyring every bookworm machine ships verifies it; no extra key is fetched or trusted.
readonly ARCHIVE_KEYRING="/usr/share/keyrings/debian-archive-keyring.gpg"

readonly APT_PACKAGES=(
  make gcc                          # building pgvector (and any C in crates)
  dpkg-dev                          # `apt-get source` unpacks with dpkg-source
  "postgresql-$PG_MAJOR"            # the server (postgresql-$PG_MAJOR-cron depends on it anyway)
  "postgresql-server-dev-$PG_MAJOR" # pg_config and headers for pgvector
  "postgresql-$PG_MAJOR-cron"       # optional in-database scheduler (docket schedule install-pg-cron)
  poppler-utils                     # pdftotext (PDF fallback) and pdftoppm (rasterising for OCR)
  poppler-data                      # CID maps: without them pdftotext drops CJK text (Adobe-GB1, …)
  tesseract-ocr                     # OCR of scans and images (src/extract/ocr)
  tesseract-ocr-eng tesseract-ocr-kor tesseract-ocr-chi-sim tesseract-ocr-chi-tra
  tesseract-ocr-jpn tesseract-ocr-fra tesseract-ocr-deu tesseract-ocr-rus # DOCKET_OCR_LANGS' default
  ocrmypdf                          # only the reference of `docket bench extract`'s OCR figures
  util-linux                        # prlimit, to limit that subprocess
  unzip                             # unpacking model archives
  docker-compose                    # only to validate docker-compose.yml (`make test`)
  chromium                          # the browser tests' browser (driven by playwright-core)
  fonts-noto-cjk                    # so Korean, Chinese and Japanese text in the browser tests is drawn, not boxes
)

say() { printf 'install-deps: %s\n' "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

# Runs a command as root: directly when we are root, else through sudo (asked only when some
# work is actually needed, so a second run never prompts).
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "root rights are needed to run: $* (run as root or install sudo)"
  fi
}

# Runs a command as the cluster's owner, which may connect through the Unix socket by peer auth.
as_postgres() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    sudo -u postgres "$@"
  fi
}

require_debian() {
  if [[ ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null; then
    die "this script installs with apt on Debian bookworm; elsewhere install by hand: ${APT_PACKAGES[*]} and pgvector for PostgreSQL $PG_MAJOR"
  fi
}

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}

ensure_apt_packages() {
  local missing=() package
  for package in "${APT_PACKAGES[@]}"; do
    is_installed "$package" || missing+=("$package")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  say "installing: ${missing[*]}"
  # apt's progress is noise when it works and the evidence when it does not: keep it aside.
  local log
  log="$(mktemp "${TMPDIR:-/tmp}/docket-apt.XXXXXX")"
  if ! {
    as_root apt-get -q update &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
  } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "apt-get failed; full log in $log"
  fi
  rm -f "$log"
}

# cargo's minor version, e.g. 95 for 1.95.0; empty when cargo is missing.
cargo_minor() {
  command -v cargo >/dev/null || return 0
  cargo --version 2>/dev/null | sed -n 's/^cargo 1\.\([0-9]*\)\..*/\1/p'
}

ensure_rust_toolchain() {
  local minor wanted_minor
  # Edition 2024 needs 1.85; Cargo.toml's rust-version is the authority when present.
  wanted_minor="$(sed -n 's/^rust-version *= *"1\.\([0-9]*\).*/\1/p' Cargo.toml 2>/dev/null | head -n1)"
  wanted_minor="${wanted_minor:-85}"
  minor="$(cargo_minor)"
  if [[ -z "$minor" || "$minor" -lt "$wanted_minor" ]]; then
    if command -v rustup >/dev/null; then
      say "installing the stable Rust toolchain with rustup"
      rustup toolchain install stable --profile minimal --component rustfmt,clippy >&2
      rustup default stable >&2
    else
      local found="${minor:+1.$minor}"
      die "Rust 1.$wanted_minor or newer is needed (found: ${found:-none}); bookworm's own cargo is too old. Install the Rust toolchain with rustup, the Rust project's installer (its default profile includes rustfmt and clippy), open a new shell, and rerun."
    fi
  fi
  local component
  for component in rustfmt clippy; do
    local probe=(cargo fmt --version)
    [[ $component == clippy ]] && probe=(cargo clippy --version)
    if ! "${probe[@]}" >/dev/null 2>&1; then
      command -v rustup >/dev/null || die "cargo $component is missing; install it with your Rust toolchain"
      say "adding the Rust component $component"
      rustup component add "$component" >&2
    fi
  done
}

# sqlx's command line, for `make prepare` and the check that the committed .sqlx/ matches the
# queries (`cargo sqlx prepare --check`). Its version follows the sqlx in Cargo.lock; only its
# PostgreSQL driver is built (the cluster is on loopback, so no TLS either).
ensure_sqlx_cli() {
  local wanted
  wanted="$(awk '/^name = "sqlx"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)"
  [[ -n "$wanted" ]] || die "cannot read sqlx's version from Cargo.lock"
  if [[ "$(cargo sqlx --version 2>/dev/null)" == *" $wanted"* ]]; then
    return 0
  fi
  say "installing sqlx-cli $wanted (cargo install; a few minutes, once)"
  cargo install sqlx-cli --version "=$wanted" --locked --no-default-features --features postgres >&2
}

has_debian_cluster() {
  [[ -f "$CLUSTER_CONF_DIR/postgresql.conf" ]] && command -v pg_lsclusters >/dev/null
}

cluster_port() {
  pg_conftool -s "$PG_MAJOR" "$CLUSTER_NAME" show port 2>/dev/null || echo 5432
}

cluster_is_online() {
  [[ "$(pg_lsclusters -h "$PG_MAJOR" "$CLUSTER_NAME" 2>/dev/null | awk '{print $4}')" == online ]]
}

wait_until_ready() {
  local port tries=0
  port="$(cluster_port)"
  until pg_isready -q -h 127.0.0.1 -p "$port" || pg_isready -q -p "$port"; do
    ((tries += 1))
    [[ $tries -le 60 ]] || die "PostgreSQL $PG_MAJOR/$CLUSTER_NAME does not accept connections on port $port; see /var/log/postgresql/"
    sleep 0.5
  done
}

# The library list PostgreSQL would load without our drop-in: the last assignment across
# postgresql.conf and the other conf.d files, in the order PostgreSQL reads them.
other_preload_libraries() {
  local files=("$CLUSTER_CONF_DIR/postgresql.conf") file
  # PostgreSQL reads include_dir files in C-locale byte order; so does this glob.
  local LC_ALL=C
  for file in "$CLUSTER_CONF_DIR"/conf.d/*.conf; do
    if [[ -f "$file" && "$file" != "$CRON_DROPIN" ]]; then files+=("$file"); fi
  done
  awk '
    /^[[:space:]]*shared_preload_libraries[[:space:]]*=?/ {
      line = $0
      sub(/^[^=]*=[[:space:]]*/, "", line)
      sub(/[[:space:]]*#.*$/, "", line)
      gsub(/'"'"'/, "", line)
      value = line
    }
    END { print value }
  ' "${files[@]}"
}

# Writes the pg_cron drop-in when it differs from what we want; sets CRON_CONFIG_CHANGED=1 then.
CRON_CONFIG_CHANGED=0
ensure_pg_cron_config() {
  local others libraries=() lib wanted
  others="$(other_preload_libraries)"
  IFS=',' read -r -a libraries <<<"$others"
  wanted=""
  for lib in "${libraries[@]}" pg_cron; do
    lib="${lib//[[:space:]]/}"
    [[ -z "$lib" || ",$wanted," == *",$lib,"* ]] && continue
    wanted="${wanted:+$wanted,}$lib"
  done
  local content
  content="# Written by docket's scripts/install-deps.sh: pg_cron must be preloaded to run, and its
# background worker schedules jobs from one database. Keeps the other libraries listed elsewhere.
shared_preload_libraries = '$wanted'
cron.database_name = 'postgres'"
  if [[ -f "$CRON_DROPIN" && "$(cat "$CRON_DROPIN")" == "$content" ]]; then
    return 0
  fi
  say "preloading pg_cron in PostgreSQL $PG_MAJOR/$CLUSTER_NAME ($CRON_DROPIN)"
  printf '%s\n' "$content" | as_root tee "$CRON_DROPIN.tmp" >/dev/null
  as_root chown postgres:postgres "$CRON_DROPIN.tmp"
  as_root chmod 644 "$CRON_DROPIN.tmp"
  as_root mv "$CRON_DROPIN.tmp" "$CRON_DROPIN"
  CRON_CONFIG_CHANGED=1
}

pg_cron_is_loaded() {
  as_postgres psql -X -q -At -p "$(cluster_port)" -d postgres -c 'show shared_preload_libraries' |
    tr ',' '\n' | tr -d ' ' | grep -qx pg_cron
}

# True when the running server started before the drop-in was written. Debian's postgresql.conf
# sets external_pid_file; without it, ask the server itself.
preload_is_pending() {
  local pid_file="/var/run/postgresql/$PG_MAJOR-$CLUSTER_NAME.pid"
  if [[ -f "$pid_file" ]]; then
    [[ "$CRON_DROPIN" -nt "$pid_file" ]]
  elif pg_cron_is_loaded; then
    return 1
  fi
}

# Starts the Debian cluster when it is down; restarts it only when the preload setting changed
# or is newer than the running server (a restart drops every connection). Comparing the drop-in
# with the server's pid file needs no database login, so a second run as a non-root user never
# asks for a sudo password.
ensure_cluster_running() {
  if ! cluster_is_online; then
    say "starting PostgreSQL $PG_MAJOR/$CLUSTER_NAME"
    as_root pg_ctlcluster "$PG_MAJOR" "$CLUSTER_NAME" start >&2
  elif [[ $CRON_CONFIG_CHANGED -eq 1 ]] || preload_is_pending; then
    say "restarting PostgreSQL $PG_MAJOR/$CLUSTER_NAME to load pg_cron"
    as_root pg_ctlcluster "$PG_MAJOR" "$CLUSTER_NAME" restart >&2
  else
    return 0
  fi
  wait_until_ready
  pg_cron_is_loaded || say "warning: pg_cron is not in shared_preload_libraries; another config file overrides $CRON_DROPIN"
}

# The Debian mirror this machine already uses, read at run time so no host name is written down:
# the URI of the stanza (deb822) or line (one-line format) that serves the bookworm suite.
debian_mirror_uri() {
  local uri=""
  local file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -r "$file" ]] || continue
    uri="$(awk '
      BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; suite_ok = 0; deb = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[[:space:]]*/, "", uris); split(uris, u, /[[:space:]]+/); uris = u[1] }
          if ($i ~ /^Suites:/ && $i ~ /[[:space:]]bookworm([[:space:]]|$)/) suite_ok = 1
          if ($i ~ /^Types:/ && $i ~ /[[:space:]]deb([[:space:]]|$)/) deb = 1
        }
        if (uris != "" && suite_ok && deb) { print uris; exit }
      }' "$file")"
    [[ -n "$uri" ]] && break
  done
  if [[ -z "$uri" ]]; then
    uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -e 's/#.*//' -e 's/\[[^]]*\]//' |
      awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }')"
  fi
  [[ -n "$uri" ]] || die "no Debian bookworm mirror found in /etc/apt/sources.list{,.d}; cannot fetch the pgvector source package"
  printf '%s\n' "${uri%/}"
}

# Verifies the installed extension for real: creates it in a scratch database and computes a
# distance, then drops the database.
verify_pgvector() {
  local port scratch=docket_vector_check
  port="$(cluster_port)"
  # Only a leftover from an interrupted run would exist; its "does not exist" notice is noise.
  as_postgres env PGOPTIONS='-c client_min_messages=warning' dropdb -p "$port" --if-exists "$scratch"
  as_postgres createdb -p "$port" "$scratch"
  local distance
  distance="$(as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -p "$port" -d "$scratch" \
    -c 'create extension vector' -c "select '[1,2,3]'::vector <-> '[1,2,5]'::vector")"
  as_postgres dropdb -p "$port" "$scratch"
  [[ "$distance" == 2 ]] || die "pgvector answered '$distance' for a distance of 2"
  say "pgvector works (create extension vector in a scratch database)"
}

ensure_pgvector() {
  [[ -f "$VECTOR_CONTROL" ]] && return 0
  [[ -x "$PG_CONFIG" ]] || die "$PG_CONFIG is missing (postgresql-server-dev-$PG_MAJOR)"
  local mirror
  mirror="$(debian_mirror_uri)"
  say "building pgvector from Debian's trixie source package"
  as_root mkdir -p "$APT_DIR/lists/partial"
  printf 'deb-src [signed-by=%s] %s trixie main\n' "$ARCHIVE_KEYRING" "$mirror" |
    as_root tee "$APT_DIR/sources.list" >/dev/null
  # A private apt configuration: the system's sources, lists and caches stay untouched, so the
  # trixie suite can never leak into ordinary installs.
  local apt_private=(
    -o "Dir::Etc::SourceList=$APT_DIR/sources.list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APT_DIR/lists"
    -o "Dir::Cache::pkgcache="
    -o "Dir::Cache::srcpkgcache="
  )
  as_root apt-get -qq "${apt_private[@]}" update >&2

  local build_dir log
  build_dir="$(as_root mktemp -d "$APT_DIR/build.XXXXXX")"
  log="$APT_DIR/build.log"
  # apt downloads as the unprivileged _apt user, which must be able to write here.
  if id _apt >/dev/null 2>&1; then as_root chown _apt "$build_dir"; fi
  if ! (
    cd "$build_dir" &&
      as_root apt-get "${apt_private[@]}" source pgvector &&
      cd pgvector-*/ &&
      as_root make USE_PGXS=1 PG_CONFIG="$PG_CONFIG" OPTFLAGS="" &&
      as_root make USE_PGXS=1 PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install
  ) >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "building pgvector failed; full log in $log, sources in $build_dir"
  fi
  as_root rm -rf "$build_dir"
  [[ -f "$VECTOR_CONTROL" ]] || die "pgvector built but $VECTOR_CONTROL is missing; see $log"
  say "pgvector $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$VECTOR_CONTROL") installed"
  if has_debian_cluster && cluster_is_online; then
    verify_pgvector
  else
    say "no running Debian cluster to verify pgvector against; scripts/db.sh's server will load it"
  fi
}

# The replica test (tests/api/replica.rs) clones the server with `pg_basebackup -R`, which opens a
# *replication* connection: pg_hba.conf's `all` does not cover those, only the `replication`
# keyword does. Where the operator already trusts every loopback connection as `postgres` (the
# set-up docket's tests run on), the same trust is extended to replication from 127.0.0.1, for
# `postgres` only; a server that asks loopback clients for a password is left as it is (the
# replica test then fails and says why). A reload is enough for pg_hba.conf; nothing restarts.
readonly HBA_FILE="$CLUSTER_CONF_DIR/pg_hba.conf"
ensure_replication_access() {
  [[ -r "$HBA_FILE" ]] || return 0
  local trust='[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust[[:space:]]*$'
  if grep -Eq "^[[:space:]]*host[[:space:]]+replication[[:space:]]+(all|postgres)$trust" "$HBA_FILE"; then
    return 0
  fi
  if ! grep -Eq "^[[:space:]]*host[[:space:]]+all[[:space:]]+(all|postgres)$trust" "$HBA_FILE"; then
    say "note: $HBA_FILE does not trust loopback connections; replication for the replica test is not enabled"
    return 0
  fi
  say "allowing replication connections from 127.0.0.1 for postgres ($HBA_FILE)"
  printf '%s\n' "# Added by docket's scripts/install-deps.sh: pg_basebackup for the read-replica test." \
    "host replication postgres 127.0.0.1/32 trust" | as_root tee -a "$HBA_FILE" >/dev/null
  if cluster_is_online; then
    as_root pg_ctlcluster "$PG_MAJOR" "$CLUSTER_NAME" reload >&2
  fi
}

# Node 20 or newer runs the browser tests (node --test, playwright-core). Bookworm's nodejs is
# 18, so a newer node that is already installed is kept; otherwise Debian's packages are used
# and the check below says what is missing.
readonly NODE_MIN_MAJOR=20

node_major() {
  command -v node >/dev/null || return 0
  node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p'
}

ensure_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    local missing=()
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)
    say "installing: ${missing[*]}"
    local log
    log="$(mktemp "${TMPDIR:-/tmp}/docket-apt.XXXXXX")"
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}" >"$log" 2>&1; then
      tail -n 30 "$log" >&2
      die "apt-get failed; full log in $log"
    fi
    rm -f "$log"
  fi
  local major
  major="$(node_major)"
  if [[ -z "$major" || "$major" -lt $NODE_MIN_MAJOR ]]; then
    die "the browser tests need Node.js $NODE_MIN_MAJOR or newer (found: $(node --version 2>/dev/null || echo none)); install a newer nodejs and rerun"
  fi
}

# playwright-core from the committed lockfile; it drives Debian's chromium and never downloads a
# browser. Skipped when node_modules already matches the lockfile (npm ci would delete and
# reinstall it every time).
ensure_browser_test_packages() {
  local dir=tests/browser
  [[ -f "$dir/package-lock.json" ]] || return 0
  local stamp="$dir/node_modules/.package-lock.json"
  if [[ -f "$stamp" && -d "$dir/node_modules/playwright-core" && "$stamp" -nt "$dir/package-lock.json" ]]; then
    return 0
  fi
  say "installing the browser tests' npm packages (npm ci in $dir)"
  (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent >&2) ||
    die "npm ci failed in $dir"
}

main() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  require_debian
  ensure_apt_packages
  if has_debian_cluster; then
    ensure_pg_cron_config
    ensure_cluster_running
    ensure_replication_access
  fi
  ensure_pgvector
  ensure_node
  ensure_browser_test_packages
  # Last: a missing toolchain needs the person's hand, and everything else should be done by then.
  ensure_rust_toolchain
  ensure_sqlx_cli
}

main "$@"
