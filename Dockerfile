# A static (musl) binary on distroless/static, running as non-root. Needs BuildKit (the default
# builder of Docker 23 and later) for the cache mounts.
#
# Both base images are pinned by digest (the tag is kept for readers); to move them, resolve the
# tag again (`crane digest rust:1.95-alpine`, `crane digest gcr.io/distroless/static-debian12:nonroot`)
# and replace the digest.
FROM rust:1.95-alpine@sha256:606fd313a0f49743ee2a7bd49a0914bab7deedb12791f3a846a34a4711db7ed2 AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kronjob && \
    cp target/release/kronjob /kronjob

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /kronjob /kronjob
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["/kronjob"]
CMD ["run"]
