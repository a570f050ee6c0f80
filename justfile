# kronjob developer recipes. `just ci` is what CI runs (.ci/run installs the tools first).

export PATH := justfile_directory() + "/.tools/bin:" + env_var("PATH")

crd_file := "crd/cronjobs.batch.kronjob.dev.yaml"
chart := "config/helm/kronjob"
monitoring := "--set serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true"

# List the recipes.
default:
    @just --list

# Install helm, kubectl and just into .tools/bin, and promtool (Debian's prometheus package).
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
# built, so they keep up with the product at the cost of a type check.
lint:
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings
    cargo clippy -p kronjob-loadtest --all-targets -- -D warnings

# Regenerate the CRD YAML and its copy in the helm chart.
generate:
    cargo run --quiet -- crd > {{crd_file}}
    if [ -d {{chart}}/crds ]; then cp {{crd_file}} {{chart}}/crds/; fi

# Render every install path: kustomize and the helm chart (default, cert-manager, and with the
# monitoring objects); check and unit-test the chart's alerting rules with promtool.
manifests:
    kubectl kustomize config/default > /dev/null
    kubectl kustomize config/release > /dev/null
    kubectl kustomize config/samples > /dev/null
    kubectl kustomize crd > /dev/null
    if [ -d {{chart}} ]; then \
      cmp {{crd_file}} {{chart}}/crds/$(basename {{crd_file}}) && \
      helm lint {{chart}} && \
      helm lint {{chart}} --set webhook.certManager.enabled=true && \
      helm lint {{chart}} {{monitoring}} && \
      helm template kronjob {{chart}} --namespace kronjob-system > /dev/null && \
      helm template kronjob {{chart}} --namespace kronjob-system --set webhook.certManager.enabled=true > /dev/null && \
      helm template kronjob {{chart}} --namespace kronjob-system {{monitoring}} > /dev/null && \
      ./scripts/check-rules.sh; \
    fi

# Supply chain: licenses, bans (no OpenSSL) and sources (crates.io only) with cargo-deny, and
# advisories when the advisory database can be fetched (deny.toml).
deny:
    ./scripts/deny.sh

# Install `kronjob` (the manager) and the kubectl plugin `kubectl-kronjob` into ~/.cargo/bin.
install:
    cargo install --path . --locked

# Run the operator against the cluster in KUBECONFIG, installing or updating its CRD.
run *ARGS:
    cargo run --release -- run --install-crd {{ARGS}}

# End-to-end tests on a real control plane started from KUBEBUILDER_ASSETS (etcd, kube-apiserver,
# kube-controller-manager), e.g. `KUBEBUILDER_ASSETS=$(setup-envtest use 1.34.x -p path) just e2e`.
e2e *ARGS:
    KRONJOB_E2E_REQUIRED=1 cargo test --test e2e -- {{ARGS}}

# Benchmarks (criterion).
bench:
    cargo bench

# Build the container image.
docker tag="kronjob:dev":
    docker build -t {{tag}} .

# Everything CI checks (the tests last, so their summary closes the output).
ci: lint deny manifests
    cargo test --test e2e --no-run
    just test
