//! The chart as a platform team reviews it: `values.schema.json` refuses a wrong value before
//! anything is rendered or installed, naming the field, and accepts the defaults and every
//! documented example; the ArtifactHub annotations of Chart.yaml name the chart's CRDs and the
//! image its defaults run, and a release's packaged chart keeps both in step.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::tools;

fn chart() -> PathBuf {
    tools::root().join("config/helm/kronjob")
}

/// `helm template` of the chart with `--set` values: its output, or helm's error.
fn template(sets: &[&str]) -> Result<String, String> {
    let mut command = Command::new(tools::tool("helm"));
    command
        .args(["template", "kronjob"])
        .arg(chart())
        .args(["--namespace", "kronjob-system"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_schema_refuses_wrong_values_naming_the_field() {
    // (the value, what helm's error must say: the field, and for a misspelt key the key).
    let cases = [
        (
            "replicaCount=two",
            "at '/replicaCount': got string, want integer",
        ),
        // A misspelt key, at the top and deeper down.
        ("replicas=2", "additional properties 'replicas' not allowed"),
        (
            "webhook.certManager.enable=true",
            "at '/webhook/certManager': additional properties 'enable' not allowed",
        ),
        ("ttl.jobs=some", "at '/ttl/jobs': value must be one of"),
        (
            "webhook.timeoutSeconds=60",
            "at '/webhook/timeoutSeconds': maximum",
        ),
        (
            "logging.format=xml",
            "at '/logging/format': value must be one of",
        ),
        (
            "metrics.prometheusRule.for.skew=15min",
            "at '/metrics/prometheusRule/for/skew': '15min' does not match",
        ),
        (
            "podLabels.team=1",
            "at '/podLabels/team': got number, want string",
        ),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
    ];
    for (set, expected) in cases {
        match template(&[set]) {
            Ok(_) => panic!("--set {set} was accepted"),
            Err(err) => assert!(
                err.contains("don't meet the specifications of the schema")
                    && err.contains(expected),
                "--set {set}: expected {expected:?} in\n{err}"
            ),
        }
    }
}

/// Every `--set KEY=VALUE` in README.md and docs/ (commands and prose, across line breaks).
fn documented_sets() -> BTreeSet<String> {
    let mut texts = vec![std::fs::read_to_string(tools::root().join("README.md")).expect("README")];
    for entry in std::fs::read_dir(tools::root().join("docs")).expect("docs/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            texts.push(std::fs::read_to_string(path).expect("a doc"));
        }
    }
    let mut sets = BTreeSet::new();
    for text in texts {
        let mut words = text.split_whitespace();
        while let Some(word) = words.next() {
            if word.trim_start_matches('`') == "--set" {
                let value = words.next().expect("a value after --set");
                // As the shell passes it: without its quotes.
                sets.insert(
                    value
                        .trim_matches(['`', ',', '.', ';', ')', '('])
                        .replace(['\'', '"'], ""),
                );
            }
        }
    }
    sets
}

#[test]
fn the_schema_accepts_the_defaults_and_every_documented_example() {
    template(&[]).expect("the defaults");
    let documented = documented_sets();
    // The docs show the install modes: the image, cert-manager, selectors, sharding, monitoring.
    for expected in [
        "image.tag=dev",
        "webhook.certManager.enabled=true",
        "webhook.objectSelector.matchLabels.team=b",
        "replicaCount=3",
        "metrics.dashboard.enabled=true",
    ] {
        assert!(
            documented.contains(expected),
            "{expected} not found in {documented:?}"
        );
    }
    // The examples in values.yaml's comments, and every value of its enumerations.
    let commented = [
        "logging.level=debug",
        r"logging.level=info\,kronjob=debug",
        "logging.format=text",
        "controller.defaultJobTTL=24h",
        "controller.namespaces={team-a,team-b}",
        "webhook.objectSelector.matchLabels.team=a",
        "webhook.enabled=false",
        "ttl.jobs=all",
        "ttl.jobs=off",
        "ttl.pods=true",
        "metrics.prometheusRule.alertLabels.severity=page",
        "metrics.prometheusRule.webhookDeniedPerSecond=0.5",
        "podDisruptionBudget.minAvailable=50%",
        "serviceMonitor.readerServiceAccount.name=prometheus",
    ];
    for set in documented.iter().map(String::as_str).chain(commented) {
        if let Err(err) = template(&[set]) {
            panic!("--set {set} is refused:\n{err}");
        }
    }
    // All of them at once (webhook.enabled=false aside, which the ServiceMonitor refuses with
    // a CA to trust: the template says so).
    let all: Vec<&str> = documented
        .iter()
        .map(String::as_str)
        .chain(commented)
        .filter(|s| *s != "webhook.enabled=false")
        .collect();
    template(&all).expect("every documented value together");
    let err = template(&["webhook.enabled=false", "serviceMonitor.enabled=true"])
        .expect_err("a ServiceMonitor without a CA to trust");
    assert!(
        err.contains("serviceMonitor.insecureSkipVerify=true"),
        "{err}"
    );
}

fn yaml_file(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An annotation of Chart.yaml that holds YAML (ArtifactHub's lists).
fn annotation(chart: &Value, name: &str) -> Vec<Value> {
    let text = chart["annotations"][name]
        .as_str()
        .unwrap_or_else(|| panic!("annotation {name}"));
    serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("annotation {name}: {e}"))
}

/// Checks the ArtifactHub annotations of the chart in `dir` against its CRDs and values.
fn check_artifacthub(dir: &std::path::Path) {
    let chart = yaml_file(dir.join("Chart.yaml"));
    let values = yaml_file(dir.join("values.yaml"));
    assert_eq!(
        chart["annotations"]["artifacthub.io/license"],
        env!("CARGO_PKG_LICENSE")
    );
    // Every CRD of crds/, by kind, version and name, and nothing else.
    let mut shipped = BTreeSet::new();
    for entry in std::fs::read_dir(dir.join("crds")).expect("crds/") {
        let crd = yaml_file(entry.expect("an entry").path());
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            shipped.insert((
                crd["spec"]["names"]["kind"]
                    .as_str()
                    .expect("kind")
                    .to_string(),
                version["name"].as_str().expect("version").to_string(),
                crd["metadata"]["name"].as_str().expect("name").to_string(),
            ));
        }
    }
    let listed: BTreeSet<_> = annotation(&chart, "artifacthub.io/crds")
        .iter()
        .map(|c| {
            let field = |k: &str| {
                c[k].as_str()
                    .unwrap_or_else(|| panic!("crds: {k}"))
                    .to_string()
            };
            assert!(!field("description").is_empty());
            (field("kind"), field("version"), field("name"))
        })
        .collect();
    assert_eq!(listed, shipped, "artifacthub.io/crds");
    let kinds: BTreeSet<String> = shipped.iter().map(|(kind, _, _)| kind.clone()).collect();
    for example in annotation(&chart, "artifacthub.io/crdsExamples") {
        let kind = example["kind"].as_str().expect("an example's kind");
        assert!(kinds.contains(kind), "crdsExamples: {kind}");
        assert_eq!(example["apiVersion"], "batch.kronjob.dev/v1");
    }
    // The image the defaults run: the values' repository at the chart's appVersion.
    let images = annotation(&chart, "artifacthub.io/images");
    let image = format!(
        "{}:{}",
        values["image"]["repository"]
            .as_str()
            .expect("image.repository"),
        chart["appVersion"].as_str().expect("appVersion")
    );
    assert_eq!(images.len(), 1, "{images:?}");
    assert_eq!(images[0]["image"], image.as_str(), "artifacthub.io/images");
    for link in annotation(&chart, "artifacthub.io/links") {
        assert!(
            link["name"].is_string()
                && link["url"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("https://")),
            "{link}"
        );
    }
}

#[test]
fn the_artifacthub_metadata_names_the_charts_crds_and_image() {
    check_artifacthub(&chart());
}

#[test]
fn a_released_chart_names_the_released_image() {
    let dir = std::env::temp_dir().join(format!("kronjob-chart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let script = tools::root().join("scripts/package-chart.sh");
    let out = Command::new(&script)
        .args(["9.8.7", "acme/kronjob", "registry.example.com/acme"])
        .arg(&dir)
        .env("PATH", path_with_tools())
        .output()
        .expect("run scripts/package-chart.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = Command::new("tar")
        .arg("-xmzf")
        .arg(dir.join("kronjob-9.8.7.tgz"))
        .arg("-C")
        .arg(&dir)
        .status()
        .expect("tar");
    assert!(status.success());
    let packaged = dir.join("kronjob");
    let chart = yaml_file(packaged.join("Chart.yaml"));
    assert_eq!(chart["version"], "9.8.7");
    assert_eq!(chart["appVersion"], "9.8.7");
    assert_eq!(
        yaml_file(packaged.join("values.yaml"))["image"]["repository"],
        "registry.example.com/acme/kronjob"
    );
    check_artifacthub(&packaged);
    let text = std::fs::read_to_string(packaged.join("Chart.yaml")).expect("Chart.yaml");
    assert!(!text.contains("github.com/kronjob/kronjob"), "{text}");
    assert!(text.contains("https://github.com/acme/kronjob"), "{text}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The PATH with `.tools/bin` first, where the scripts find helm.
fn path_with_tools() -> std::ffi::OsString {
    let mut paths = vec![tools::root().join(".tools/bin")];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("a PATH")
}
