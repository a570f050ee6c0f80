//! The SBOMs `scripts/sbom.sh` writes (as `just image` and the release do), for the image's
//! target on this machine, compared with what cargo builds for that target:
//! - every crate the binary links (`cargo tree -e normal,no-proc-macro`: normal dependencies,
//!   proc macros and what only they use left out) is listed, at its version, with scope
//!   `required`, and nothing else is `required`;
//! - every other crate listed is one cargo compiles to build the binary (build scripts'
//!   dependencies, proc macros: scope `excluded`); so no dev-dependency, no crate of another
//!   platform, and no crate that only a feature of another workspace member pulls in.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::tools;

/// The musl target the image is built for on this machine.
fn image_target() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x86_64-unknown-linux-musl",
        "aarch64" => "aarch64-unknown-linux-musl",
        other => panic!("no image for {other}"),
    }
}

/// The (name, version) of every crate `cargo tree -e EDGES` reaches from the package, itself
/// left out.
fn cargo_tree(target: &str, edges: &str) -> BTreeSet<(String, String)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(tools::root())
        .args(["tree", "--locked", "-p", "kronjob", "--target", target])
        .args(["-e", edges, "--prefix", "none", "-f", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let version = words.next()?.strip_prefix('v')?;
            Some((name.to_string(), version.to_string()))
        })
        .filter(|(name, _)| name != "kronjob")
        .collect()
}

/// The components of an SBOM: (name, version) to scope.
fn components(sbom: &Value) -> BTreeMap<(String, String), String> {
    sbom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| {
            let field = |k: &str| {
                c[k].as_str()
                    .unwrap_or_else(|| panic!("{k}: {c}"))
                    .to_string()
            };
            ((field("name"), field("version")), field("scope"))
        })
        .collect()
}

#[test]
fn the_sboms_list_every_crate_the_binaries_link_and_only_what_builds_them() {
    let target = image_target();
    let dir = std::env::temp_dir().join(format!("kronjob-sbom-{}", std::process::id()));
    let out = Command::new(tools::root().join("scripts/sbom.sh"))
        .arg(target)
        .arg(&dir)
        .output()
        .expect("run scripts/sbom.sh");
    assert!(
        out.status.success(),
        "scripts/sbom.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let linked = cargo_tree(target, "normal,no-proc-macro");
    let compiled = cargo_tree(target, "normal,build");
    let dev = cargo_tree(target, "dev");
    // The sets mean something: the binary links the crates of Cargo.toml, a build compiles more
    // (proc macros, build scripts' dependencies), and tests use crates the binary does not.
    for krate in ["kube", "tokio", "rustls", "jiff"] {
        assert!(
            linked.iter().any(|(name, _)| name == krate),
            "{krate} is linked"
        );
    }
    for krate in ["serde_derive", "cc"] {
        assert!(
            !linked.iter().any(|(name, _)| name == krate),
            "{krate} is not linked"
        );
        assert!(
            compiled.iter().any(|(name, _)| name == krate),
            "{krate} is compiled"
        );
    }
    assert!(
        dev.iter().any(|(name, _)| name == "proptest"),
        "proptest is a dev-dependency"
    );

    for binary in ["kronjob", "kubectl-kronjob"] {
        let path = dir.join(format!("{binary}.cdx.json"));
        let sbom: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("the SBOM")).expect("JSON");
        assert_eq!(sbom["bomFormat"], "CycloneDX");
        assert_eq!(sbom["specVersion"], "1.5");
        assert_eq!(sbom["metadata"]["component"]["name"], binary);
        assert_eq!(sbom["metadata"]["component"]["type"], "application");
        assert_eq!(
            sbom["metadata"]["component"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        let platform = sbom["metadata"]["properties"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "cdx:rustc:sbom:target:triple");
        assert_eq!(
            platform.map(|p| &p["value"]),
            Some(&Value::from(target)),
            "{binary}"
        );

        let listed = components(&sbom);
        let required: BTreeSet<_> = listed
            .iter()
            .filter(|(_, scope)| *scope == "required")
            .map(|(key, _)| key.clone())
            .collect();
        let missing: Vec<_> = linked.difference(&required).collect();
        assert!(
            missing.is_empty(),
            "{binary}: linked but not listed as required: {missing:?}"
        );
        let extra: Vec<_> = required.difference(&linked).collect();
        assert!(
            extra.is_empty(),
            "{binary}: required but not linked: {extra:?}"
        );
        let foreign: Vec<_> = listed.keys().filter(|k| !compiled.contains(*k)).collect();
        assert!(
            foreign.is_empty(),
            "{binary}: listed but never compiled for it: {foreign:?}"
        );
        for (key, scope) in &listed {
            assert!(
                scope == "required" || scope == "excluded",
                "{key:?}: {scope}"
            );
            if dev.contains(key) && !compiled.contains(key) {
                panic!("{binary}: dev-dependency {key:?} listed");
            }
        }
        // Each component names its package and, from crates.io, the digest of its source.
        for c in sbom["components"].as_array().expect("components") {
            let purl = c["purl"].as_str().unwrap_or_default();
            assert!(purl.starts_with("pkg:cargo/"), "{c}");
            assert!(c["hashes"][0]["alg"] == "SHA-256", "{c}");
        }
        // The dependency graph names listed components only.
        let refs: BTreeSet<&str> = sbom["components"]
            .as_array()
            .expect("components")
            .iter()
            .filter_map(|c| c["bom-ref"].as_str())
            .chain(sbom["metadata"]["component"]["bom-ref"].as_str())
            .collect();
        for dependency in sbom["dependencies"].as_array().expect("dependencies") {
            for r in std::iter::once(&dependency["ref"])
                .chain(dependency["dependsOn"].as_array().into_iter().flatten())
            {
                assert!(
                    refs.contains(r.as_str().unwrap_or_default()),
                    "{binary}: {r}"
                );
            }
        }
        eprintln!(
            "{binary}: {} crates linked, {} more compiled to build it",
            required.len(),
            listed.len() - required.len()
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}
