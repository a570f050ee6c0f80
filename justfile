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

# Unit and integration tests, benches run once as tests (e2e tests are ignored unless `just e2e`).
test:
    ./scripts/test.sh

# Formatting and clippy, warnings are errors.
lint:
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings

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

# Install `kronjob` (the manager) and the kubectl plugin `kubectl-kronjob` into ~/.cargo/bin.
install:
    cargo install --path . --locked

# Run the operator against the cluster in KUBECONFIG, installing or updating its CRD.
run *ARGS:
    cargo run --release -- run --install-crd {{ARGS}}

# End-to-end tests against the cluster in KUBECONFIG (needs KRONJOB_E2E=1 and a running manager or image).
e2e:
    KRONJOB_E2E=1 cargo test --test e2e -- --ignored --test-threads=1 --nocapture

# Benchmarks (criterion).
bench:
    cargo bench

# Build the container image.
docker tag="kronjob:dev":
    docker build -t {{tag}} .

# Everything CI checks (the tests last, so their summary closes the output).
ci: lint manifests
    cargo test --test e2e --no-run
    just test
