# syntax=docker/dockerfile:1
# A static (musl) binary on distroless/static, running as non-root.
FROM rust:1.95-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kronjob && cp target/release/kronjob /kronjob

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kronjob /kronjob
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["/kronjob"]
CMD ["run"]
