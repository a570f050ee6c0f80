# The release image: the static (musl) `kronjob` binary, its dependency list embedded, and its
# CycloneDX SBOM /kronjob.cdx.json, nothing else, running as 65532. It builds nothing: `just
# image` (scripts/image.sh) builds the binary with `cargo auditable` into
# target/image/<arch>/kronjob, writes its SBOM beside it, then assembles this image per
# architecture with buildah (no daemon, no registry: the base is empty). Docker's BuildKit
# builds it the same way from that folder once `just image` has built both architectures:
# `docker buildx build --platform linux/amd64,linux/arm64 .`.
FROM scratch
ARG TARGETARCH
COPY target/image/${TARGETARCH}/kronjob target/image/${TARGETARCH}/kronjob.cdx.json /
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["/kronjob"]
CMD ["run"]
