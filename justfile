# kronjob developer recipes. `just ci` is what CI runs (.ci/run installs the tools first).

export PATH := justfile_directory() + "/.tools/bin:" + env_var("PATH")

crd_file := "crd/cronjobs.batch.kronjob.dev.yaml"
image_arch := if arch() == "aarch64" { "arm64" } else { "amd64" }
image_target := if arch() == "aarch64" { "aarch64-unknown-linux-musl" } else { "x86_64-unknown-linux-musl" }
chart := "config/helm/kronjob"
monitoring := "--set serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true"
chart_cert_manager := "--set webhook.certManager.enabled=true"
chart_sharding := "--set sharding.enabled=true --set replicaCount=3"
chart_no_webhook := "--set webhook.enabled=false"

# List the recipes.
default:
    @just --list

# Install helm, kubectl, just, actionlint, cargo-deny, cargo-audit, cargo-auditable and
# cargo-cyclonedx into .tools/bin, and Debian's prometheus (promtool) and buildah, with the
# static Rust targets the image needs.
tools:
    ./scripts/install-tools.sh

# Build both binaries (release): kronjob (the manager) and kubectl-kronjob (the plugin).
build:
    cargo build --release

# Unit, integration and e2e tests, benches run once as tests (the e2e tests need KUBEBUILDER_ASSETS,
# else they are skipped with one line).
test:
    ./scripts/test.sh

# Formatting and clippy, warnings are errors; the load tools (crates/loadtest) are linted, not
# built, so they keep up with the product at the cost of a type check; so are the fuzz
# targets, in the product's target folder (most of what they use is checked there already).
lint: lint-workflows
    cargo fmt --check
    cargo fmt --check --manifest-path fuzz/Cargo.toml
    cargo clippy --all-targets -- -D warnings
    cargo clippy -p kronjob-loadtest --all-targets -- -D warnings
    cargo clippy --manifest-path fuzz/Cargo.toml --target-dir target --all-targets -- -D warnings

# Build the fuzz targets (fuzz/) and run each for `seconds`, seeded from the tests' tables
# (docs/fuzzing.md); e.g. `just fuzz 1800 schedule` for a long run of one target. CI builds
# them unoptimised and runs each for 10 s (`scripts/fuzz.sh --dev 10`).
fuzz seconds="20" *TARGETS:
    ./scripts/fuzz.sh {{seconds}} {{TARGETS}}

# Regenerate the CRD YAML and its copy in the helm chart.
generate:
    cargo run --quiet -- crd > {{crd_file}}
    cargo run --quiet -- crd --calendar > crd/calendars.batch.kronjob.dev.yaml
    if [ -d {{chart}}/crds ]; then cp {{crd_file}} crd/calendars.batch.kronjob.dev.yaml {{chart}}/crds/; fi

# Render every install path: kustomize, and the helm chart linted strictly (its values checked
# against values.schema.json) and rendered in each mode: defaults, cert-manager, sharding, no
# webhook, and with the monitoring objects; check and unit-test the chart's alerting rules with
# promtool.
manifests:
    kubectl kustomize config/default > /dev/null
    kubectl kustomize config/release > /dev/null
    kubectl kustomize config/samples > /dev/null
    kubectl kustomize crd > /dev/null
    cmp {{crd_file}} {{chart}}/crds/$(basename {{crd_file}})
    for mode in "" "{{chart_cert_manager}}" "{{chart_sharding}}" "{{chart_no_webhook}}" "{{monitoring}}"; do \
      helm lint --strict {{chart}} $mode > /dev/null && \
      helm template kronjob {{chart}} --namespace kronjob-system $mode > /dev/null || \
      { echo "manifests: the chart fails with: ${mode:-its defaults}" >&2; exit 1; }; \
    done
    ./scripts/check-rules.sh

# Supply chain: licenses, bans (no OpenSSL) and sources (crates.io only) with cargo-deny, and
# advisories when the advisory database can be fetched (deny.toml).
deny:
    ./scripts/deny.sh

# The CycloneDX SBOMs of both binaries for a target (default: the image's) from the locked
# dependencies, into target/sbom/<target>/ (scripts/sbom.sh; `just image` and the release
# write theirs beside the binaries).
sbom target=image_target:
    ./scripts/sbom.sh {{target}} target/sbom/{{target}}

# The unsigned SLSA provenance statement (in-toto) of FILES, on stdout (scripts/provenance.py;
# the release workflow signs it).
provenance +FILES:
    ./scripts/provenance.py {{FILES}}

# Check built binaries (default: the image's, after `just image`) for the dependency list
# cargo auditable embeds, and `cargo audit bin` them when the advisory database can be had.
audit *BINARIES:
    ./scripts/audit.sh {{BINARIES}}

# Install `kronjob` (the manager) and the kubectl plugin `kubectl-kronjob` into ~/.cargo/bin.
install:
    cargo install --path . --locked

# Run the operator against the cluster in KUBECONFIG, installing or updating its CRD (the
# `quick` profile: optimised, without the release's link-time optimisation).
run *ARGS:
    cargo run --profile quick -- run --install-crd {{ARGS}}

# End-to-end tests on a real control plane started from KUBEBUILDER_ASSETS (etcd, kube-apiserver,
# kube-controller-manager), e.g. `KUBEBUILDER_ASSETS=$(setup-envtest use 1.34.x -p path) just e2e`.
e2e *ARGS:
    KRONJOB_E2E_REQUIRED=1 cargo test --test e2e -- {{ARGS}}

# Benchmarks (criterion).
bench:
    cargo bench

# Build the release image without a daemon (scripts/image.sh): the static binaries by cargo,
# the image (empty base, /kronjob, user 65532) by buildah, as the manifest list `tag` with one
# image per architecture (`tag-amd64`, `tag-arm64`). E.g. `just image kronjob:dev amd64`.
image tag="kronjob:dev" *ARCHES="amd64 arm64":
    ./scripts/image.sh --tag {{tag}} {{ARCHES}}

# Build the image for both architectures and push it with buildah (`buildah login` first);
# prints the pushed digest.
image-push tag:
    ./scripts/image.sh --push --tag {{tag}} amd64 arm64

# Check the GitHub Actions workflows with actionlint (installed by `just tools`).
lint-workflows:
    actionlint -color=false .github/workflows/*.yml

# Everything CI checks (the tests last, so their summary closes the output); the image for
# this machine's architecture only (`just image`: both), its binary audited and its
# provenance statement written, which the e2e case `image` and tests/releases check; each
# fuzz target for 10 s.
ci: lint deny manifests
    cargo test --test e2e --no-run
    ./scripts/image.sh {{image_arch}}
    just audit
    ./scripts/provenance.py target/image/{{image_arch}}/kronjob target/image/{{image_arch}}/kronjob.cdx.json > target/image/{{image_arch}}/provenance.intoto.json
    ./scripts/fuzz.sh --dev 10
    just test
