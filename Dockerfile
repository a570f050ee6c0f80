# A static (musl) binary on distroless/static, running as non-root. Needs BuildKit (the default
# builder of Docker 23 and later) for the cache mounts.
#
# Both base images are pinned by digest (the tag is kept for readers); to move them, resolve the
# tag again (`crane digest rust:1.95-alpine`, `crane digest gcr.io/distroless/static-debian12:nonroot`)
# and replace the digest.
FROM rust:1.95-alpine@sha256:606fd313a0f49743ee2a7bd49a0914bab7deedb12791f3a846a34a4711db7ed2 AS build
# lld places the functions a running manager executes first in its code (build.rs,
# link/hot-functions.txt); the toolchain's own lld is used when it ships one.
RUN apk add --no-cache musl-dev lld
WORKDIR /src
COPY . .
# `--target` named, as scripts/hot-functions.sh builds: the functions' names then match the list.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    triple=$(rustc -vV | sed -n 's/^host: //p') && \
    cargo build --release --locked --target "$triple" --bin kronjob && \
    cp "target/$triple/release/kronjob" /kronjob

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /kronjob /kronjob
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["/kronjob"]
CMD ["run"]
