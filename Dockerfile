# Dockerfile — builds docket in a Rust image and runs it in a small Debian one.
#
# Why two stages: the toolchain and the build cache stay in the builder; the runtime image holds
# only the binary and what it calls at run time (pdftotext from poppler-utils, prlimit from
# util-linux to limit that subprocess, CA roots for HTTPS embedding APIs). Both stages are bookworm,
# so the binary links against the same glibc it was built with. The process runs as an
# unprivileged user. docker-compose.yml shows how to run it.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build
# No database exists while the image builds: sqlx's checked queries use the committed .sqlx/.
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never

# Dependencies first, against stub sources, so editing docket's own code does not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src

COPY . .
# COPY keeps the sources' timestamps, which can be older than the stub build: touching them
# makes cargo rebuild docket itself instead of shipping the stub.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked \
    && install -m 755 target/release/docket /usr/local/bin/docket

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates poppler-utils util-linux \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/docket --create-home docket \
    && mkdir -p /var/lib/docket/models \
    && chown -R docket:docket /var/lib/docket
COPY --from=builder /usr/local/bin/docket /usr/local/bin/docket

USER docket
WORKDIR /var/lib/docket
# Off loopback inside the container, so docket insists on DOCKET_API_TOKEN at start-up.
ENV DOCKET_BIND=0.0.0.0:8080 \
    DOCKET_MODEL_DIR=/var/lib/docket/models \
    RUST_LOG=info
EXPOSE 8080
ENTRYPOINT ["docket"]
CMD ["serve"]
