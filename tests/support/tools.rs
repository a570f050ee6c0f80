//! The command-line tools users install kronjob with (kubectl, helm), as the tests find them:
//! `.tools/bin` (where `./scripts/install-tools.sh` puts them), else the PATH. A test that needs
//! one fails when it is missing rather than passing without checking anything.

// Every test crate that includes this file uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The path of `name`, from `.tools/bin` or the PATH.
pub fn tool(name: &str) -> PathBuf {
    let local = root().join(".tools/bin").join(name);
    if local.exists() {
        return local;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{name} not found: run ./scripts/install-tools.sh"))
}

/// Runs `tool` with `args` and returns its stdout; panics with its stderr when it fails.
pub fn run(tool: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "{} {}: {}",
        tool.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The non-empty documents of a multi-document YAML stream.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter(|doc| !doc.is_null())
        .collect()
}
