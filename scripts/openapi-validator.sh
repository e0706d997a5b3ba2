#!/usr/bin/env bash
# openapi-validator.sh — a Python with openapi-spec-validator (OpenAPI 3.1 support), idempotently,
# in a venv of its own under ~/.cache/docket/venv-openapi; prints that Python's path on stdout.
#
# Why: tests/api/openapi.rs validates the served /api/openapi.json with a real validator, and
# `make test` must pass on a clean machine, so the validator installs itself the first time, from
# PyPI through pip (a registry client this machine already trusts). Later runs are a fast no-op.
# Concurrent callers wait on one lock instead of building the venv twice. Messages go to stderr.
set -euo pipefail

readonly VERSION="0.9.0"
readonly CACHE="${HOME:-/root}/.cache/docket"
readonly VENV="$CACHE/venv-openapi"

say() { printf 'openapi-validator: %s\n' "$*" >&2; }

ready() {
  "$VENV/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("openapi-spec-validator") != sys.argv[1])' "$VERSION" 2>/dev/null
}

mkdir -p "$CACHE"
exec 9>"$CACHE/venv-openapi.lock"
flock 9
if ! ready; then
  if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
      say "installing python3-venv"
      {
        apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
          --no-install-recommends python3-venv
      } >&2
    else
      say "error: python3-venv is missing; install it and rerun"
      exit 1
    fi
  fi
  say "creating $VENV with openapi-spec-validator $VERSION"
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "openapi-spec-validator==$VERSION" >&2
  ready || { say "error: openapi-spec-validator did not install"; exit 1; }
fi
printf '%s\n' "$VENV/bin/python"
