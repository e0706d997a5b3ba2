# Makefile — the front door for people and CI: one verb per task, each installing what it needs.
#
# Why: the README promises (Quick start) that `make run` and `make test` work on a clean
# Debian bookworm machine. The targets stay thin: scripts/install-deps.sh knows what to install,
# scripts/db.sh knows which database to use, cargo does the rest. `make help` lists the targets
# from their `## ` comments. Every variable below can be overridden: `make run RUST_LOG=debug`.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
# `test` lists deps before lint on purpose (clippy and docker-compose may be what deps installs),
# so prerequisites must run in order even under `make -j`.
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules

CARGO ?= cargo
# Extra arguments for `cargo test`, e.g. TEST_ARGS='queue::'. `--all-targets` runs unit and integration
# tests and leaves out doctests (docket has none), so the run ends on the integration summary.
TEST_ARGS ?=
# What `make bench` measures: the argument of `docket bench`.
BENCH ?= queue
# Which local model `make model` installs: all-MiniLM-L6-v2 or multilingual-e5-small (empty: the
# default one). `make test` installs both, since the tests run both.
MODEL ?=
# The log filter for `make run` and `make bench` (tracing's EnvFilter syntax).
RUST_LOG ?= info
# Arguments after `docket serve`, e.g. SERVE_ARGS='--bind 127.0.0.1:9090'.
SERVE_ARGS ?=
# docker-compose.yml demands a token; validation only needs one to be present, so a placeholder
# is used unless one is set.
COMPOSE_TOKEN ?= $(or $(DOCKET_API_TOKEN),validation-placeholder)

.PHONY: help deps model test-models db db-stop clean-db run test browser-test browser-test-run lint fmt compose-check prepare sqlx-check bench

help: ## Show this list of targets
	@printf 'Usage: make <target> [VAR=value ...]\n\nTargets:\n'
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@printf '\nVariables: CARGO=%s BENCH=%s RUST_LOG=%s TEST_ARGS=%s SERVE_ARGS=%s DATABASE_URL=%s\n' \
		'$(CARGO)' '$(BENCH)' '$(RUST_LOG)' '$(TEST_ARGS)' '$(SERVE_ARGS)' '$(if $(DATABASE_URL),(set),(found by scripts/db.sh))'

deps: ## Install what is missing (apt packages, pgvector, pg_cron, Rust checks); fast when done
	@scripts/install-deps.sh

model: ## Fetch an embedding model into ~/.cache/docket (or DOCKET_MODEL_DIR) if missing: make model [MODEL=multilingual-e5-small]
	@scripts/get-model.sh $(MODEL) >/dev/null

# The tests use both local models, each in its cache directory (all-MiniLM-L6-v2's may be
# DOCKET_MODEL_DIR, as before).
test-models:
	@scripts/get-model.sh all-MiniLM-L6-v2 >/dev/null
	@DOCKET_MODEL_DIR= scripts/get-model.sh multilingual-e5-small >/dev/null

db: ## Create the database if needed and print its DATABASE_URL
	@scripts/db.sh

db-stop: ## Stop the private PostgreSQL cluster under .docket/pg, if one runs
	@scripts/db.sh stop

clean-db: ## Drop and recreate the docket database (all its data is lost)
	@scripts/db.sh reset

run: deps model ## Install, create the database, and serve on http://127.0.0.1:8080
	@url="$$(scripts/db.sh)"; \
	echo "make: DATABASE_URL=$$url" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#' >&2; \
	DATABASE_URL="$$url" RUST_LOG='$(RUST_LOG)' $(CARGO) run --release -- serve $(SERVE_ARGS)

test: deps test-models lint sqlx-check compose-check ## Everything CI checks: format, clippy, docs, .sqlx/, compose file, all tests (cargo, then browser) on PostgreSQL
	@url="$$(scripts/db.sh)"; \
	echo "make: DATABASE_URL=$$url" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#' >&2; \
	DATABASE_URL="$$url" $(CARGO) test --workspace --all-targets --no-fail-fast $(TEST_ARGS)
	@$(MAKE) --no-print-directory browser-test-run

browser-test: deps ## The page in Debian's chromium against a real docket serve (screenshots in test-output/)
	@$(MAKE) --no-print-directory browser-test-run

# Without deps, so `make test` does not install twice. The tests start target/debug/docket on a
# fresh database of their own (created and dropped on DATABASE_URL's server).
browser-test-run:
	@$(CARGO) build --quiet
	@url="$$(scripts/db.sh)"; \
	cd tests/browser && DATABASE_URL="$$url" node --test --test-concurrency=1 --test-reporter=tap

lint: ## Check formatting, clippy (warnings are errors) and the docs (broken intra-doc links are errors)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS='-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links' $(CARGO) doc --workspace --no-deps --document-private-items --quiet

prepare: deps ## Write .sqlx/ (the checked queries' offline data) from a scratch database; commit it
	@scripts/sqlx.sh prepare

sqlx-check: ## Check that the committed .sqlx/ matches the queries and migrations
	@scripts/sqlx.sh check

fmt: ## Format the code
	$(CARGO) fmt --all

compose-check: ## Validate docker-compose.yml (no Docker engine needed)
	DOCKET_API_TOKEN='$(COMPOSE_TOKEN)' docker-compose config -q

bench: deps test-models ## Run a benchmark: make bench BENCH=queue|embed (last line is JSON)
	@$(CARGO) build --release --quiet -p docket -p docket-bench
	@url="$$(scripts/db.sh)"; \
	DATABASE_URL="$$url" RUST_LOG='$(RUST_LOG)' target/release/docket bench $(BENCH)
