# The release image: the static (musl) `kronjob` binary and nothing else, running as 65532.
# It builds nothing: `just image` (scripts/image.sh) builds the binaries with cargo into
# target/image/<arch>/kronjob, then assembles this image per architecture with buildah (no
# daemon, no registry: the base is empty). Docker's BuildKit builds it the same way from that
# folder: `docker buildx build --platform linux/amd64,linux/arm64 .` after `just image-binaries`.
FROM scratch
ARG TARGETARCH
COPY target/image/${TARGETARCH}/kronjob /kronjob
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["/kronjob"]
CMD ["run"]
