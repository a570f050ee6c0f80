#!/usr/bin/env bash
# Builds the release image without a daemon or a registry: `cargo auditable` builds the static
# (musl) `kronjob` binary per architecture, its dependency list embedded (section .dep-v0), into
# target/image/<arch>/kronjob with its SBOM kronjob.cdx.json beside it (scripts/sbom.sh), then
# buildah assembles the Dockerfile (an empty base, the binary and its SBOM, user 65532) for
# each into one manifest list.
#
#   scripts/image.sh [--push] [--tag IMAGE] [ARCH...]     ARCH: amd64 (default: amd64 arm64)
#
# --tag names the manifest list (default kronjob:dev); each architecture's image is also
# tagged IMAGE-ARCH (e.g. kronjob:dev-amd64). --push pushes the list with every image to the
# registry of IMAGE and prints its digest (buildah's credentials: `buildah login`).
# Needs buildah (Debian's package), cargo-auditable and cargo-cyclonedx in .tools/bin
# (scripts/install-tools.sh installs them all), rustup's musl
# targets (added here), and for arm64 on an x86_64 host Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross.
# buildah runs as root here (CI does), with the vfs storage driver: no kernel overlay needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

push=false
tag=kronjob:dev
arches=()
while [ $# -gt 0 ]; do
  case "$1" in
    --push) push=true ;;
    --tag) tag=$2; shift ;;
    amd64|arm64) arches+=("$1") ;;
    *) echo "image: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)

triple() {
  case "$1" in
    amd64) echo x86_64-unknown-linux-musl ;;
    arm64) echo aarch64-unknown-linux-musl ;;
  esac
}

export PATH="$root/.tools/bin:$PATH"

# The binaries: `cargo auditable build --release` for each musl target, and their SBOMs.
for arch in "${arches[@]}"; do
  target=$(triple "$arch")
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
    # Debian's cross compiler links the binary and compiles the crypto crate's C and assembly;
    # the musl target brings its own C runtime.
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
  fi
  cargo auditable build --release --locked --bin kronjob --target "$target"
  mkdir -p "target/image/$arch"
  install -m 0755 "target/$target/release/kronjob" "target/image/$arch/kronjob"
  ./scripts/sbom.sh "$target" "target/image/$arch"
done

# The image: one per architecture, gathered in the manifest list `$tag`.
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
buildah manifest rm "$tag" >/dev/null 2>&1 || true
buildah manifest create "$tag" >/dev/null
for arch in "${arches[@]}"; do
  buildah rmi "$tag-$arch" >/dev/null 2>&1 || true
  buildah build --quiet --layers=false --platform "linux/$arch" \
    --build-arg "TARGETARCH=$arch" -f Dockerfile -t "$tag-$arch" . >/dev/null
  buildah manifest add "$tag" "containers-storage:localhost/$tag-$arch" >/dev/null 2>&1 ||
    buildah manifest add "$tag" "$tag-$arch" >/dev/null
  size=$(buildah inspect --format '{{.FromImageID}}' "$tag-$arch" >/dev/null 2>&1 && \
    du -b "target/image/$arch/kronjob" | cut -f1)
  echo "image: $tag-$arch (binary ${size} bytes)"
done
if $push; then
  digest_file=$(mktemp)
  buildah manifest push --all --digestfile "$digest_file" "$tag" "docker://$tag"
  echo "image: pushed $tag@$(cat "$digest_file")"
  rm -f "$digest_file"
fi
