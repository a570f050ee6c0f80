//! The unsigned provenance statement `scripts/provenance.py` writes for a release's files (the
//! release workflow signs it): an in-toto Statement v1 whose subjects are the files by name and
//! sha256, with a SLSA v1 predicate naming the source commit, Cargo.lock's digest, the
//! toolchain, and the workflow run that built them.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::tools;

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(tools::root())
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The statement for `files`, with `env` set for the script.
fn provenance(files: &[std::path::PathBuf], env: &[(&str, &str)]) -> Value {
    let mut command = Command::new(tools::root().join("scripts/provenance.py"));
    command.args(files).env_remove("GITHUB_ACTIONS");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run scripts/provenance.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON statement")
}

#[test]
fn the_provenance_names_each_file_by_digest_and_the_source_and_run_that_built_it() {
    let dir = std::env::temp_dir().join(format!("kronjob-provenance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let files: Vec<_> = [
        ("kronjob-9.8.7-linux-amd64.tar.gz", &b"a binary"[..]),
        ("SHA256SUMS", b"sums"),
    ]
    .iter()
    .map(|(name, content)| {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write");
        path
    })
    .collect();
    let commit = git(&["rev-parse", "HEAD"]);
    let run = [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_SERVER_URL", "https://github.com"),
        ("GITHUB_REPOSITORY", "acme/kronjob"),
        ("GITHUB_REF", "refs/tags/v9.8.7"),
        ("GITHUB_SHA", commit.as_str()),
        (
            "GITHUB_WORKFLOW_REF",
            "acme/kronjob/.github/workflows/release.yml@refs/tags/v9.8.7",
        ),
        ("GITHUB_RUN_ID", "4242"),
        ("GITHUB_RUN_ATTEMPT", "2"),
        ("BUILD_STARTED_ON", "2026-01-02T03:04:05Z"),
    ];
    let statement = provenance(&files, &run);

    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let subjects: BTreeMap<&str, &str> = statement["subject"]
        .as_array()
        .expect("subject")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().expect("name"),
                s["digest"]["sha256"].as_str().expect("sha256"),
            )
        })
        .collect();
    let expected: BTreeMap<&str, String> = [
        ("kronjob-9.8.7-linux-amd64.tar.gz", sha256_hex(b"a binary")),
        ("SHA256SUMS", sha256_hex(b"sums")),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        subjects,
        expected.iter().map(|(k, v)| (*k, v.as_str())).collect(),
        "each file by its digest"
    );

    let build = &statement["predicate"]["buildDefinition"];
    assert!(
        build["buildType"]
            .as_str()
            .is_some_and(|t| t.ends_with("docs/verify.md#provenance"))
    );
    assert_eq!(
        build["externalParameters"]["repository"],
        "https://github.com/acme/kronjob"
    );
    assert_eq!(build["externalParameters"]["ref"], "refs/tags/v9.8.7");
    assert_eq!(
        build["externalParameters"]["workflow"],
        ".github/workflows/release.yml"
    );
    assert!(
        build["internalParameters"]["rustc"]
            .as_str()
            .is_some_and(|v| v.starts_with("rustc "))
    );
    let dependencies = build["resolvedDependencies"]
        .as_array()
        .expect("resolvedDependencies");
    assert_eq!(
        dependencies[0]["uri"],
        "git+https://github.com/acme/kronjob@refs/tags/v9.8.7"
    );
    assert_eq!(dependencies[0]["digest"]["gitCommit"], commit.as_str());
    let lock = std::fs::read(tools::root().join("Cargo.lock")).expect("Cargo.lock");
    assert_eq!(dependencies[1]["uri"], "Cargo.lock");
    assert_eq!(
        dependencies[1]["digest"]["sha256"],
        sha256_hex(&lock).as_str()
    );

    let run_details = &statement["predicate"]["runDetails"];
    assert_eq!(
        run_details["builder"]["id"],
        "https://github.com/acme/kronjob/.github/workflows/release.yml@refs/tags/v9.8.7"
    );
    assert_eq!(
        run_details["metadata"]["invocationId"],
        "https://github.com/acme/kronjob/actions/runs/4242/attempts/2"
    );
    assert_eq!(run_details["metadata"]["startedOn"], "2026-01-02T03:04:05Z");
    assert!(run_details["metadata"]["finishedOn"].is_string());

    // Built here: the commit checked out, and whether the work tree held more than it.
    let local = provenance(&files[..1], &[]);
    let build = &local["predicate"]["buildDefinition"];
    assert_eq!(
        build["resolvedDependencies"][0]["digest"]["gitCommit"],
        commit.as_str()
    );
    assert!(build["internalParameters"]["workTreeModified"].is_boolean());
    assert!(
        local["predicate"]["runDetails"]["builder"]["id"]
            .as_str()
            .is_some_and(|id| id.ends_with("#local-builds"))
    );
    assert!(local["predicate"]["runDetails"]["metadata"]["invocationId"].is_null());
    std::fs::remove_dir_all(&dir).expect("clean up");
}
