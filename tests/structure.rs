//! The module layout's rules, read from the source: the webhook and the commands stand on the
//! `workload` module and the small shared pieces, never on the controllers or the manager; and the
//! code the layout keeps in one place (the guarded delete, Job names, backoff) has no copy.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir` (relative to the crate), with its text.
fn sources(dir: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut pending = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                files.push((path, text));
            }
        }
    }
    files.sort();
    files
}

/// The code of `text`: each line without its `//` comment (doc comments included).
fn code(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let code = line.split("//").next().unwrap_or_default();
            (i + 1, code.to_string())
        })
        .filter(|(_, code)| !code.trim().is_empty())
        .collect()
}

/// The module paths `text` names from the crate root: `crate::a::b` in `use` lines and in
/// code, and each member of a `use crate::{a::b, c::{d, e}}` group (`crate::a::b`,
/// `crate::c`).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut group: Option<(usize, String)> = None;
    for (number, line) in code(text) {
        if let Some((start, body)) = group.as_mut() {
            body.push_str(&line);
            if line.contains("};") {
                let (start, body) = (*start, std::mem::take(body));
                group = None;
                found.extend(members(&body).into_iter().map(|m| (start, m)));
            }
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("use crate::{") {
            if rest.contains("};") {
                found.extend(members(rest).into_iter().map(|m| (number, m)));
            } else {
                group = Some((number, rest.to_string()));
            }
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            found.push((number, tail[..end].trim_end_matches(':').to_string()));
            rest = &tail[end..];
        }
    }
    found
}

/// The top-level members of a `use crate::{...}` group's body, as `crate::` paths up to any
/// nested group.
fn members(body: &str) -> Vec<String> {
    let mut members = Vec::new();
    let (mut depth, mut current) = (0usize, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => members.push(std::mem::take(&mut current)),
            c if depth == 0 => current.push(c),
            _ => {}
        }
    }
    members.push(current);
    members
        .into_iter()
        .map(|m| m.split_whitespace().collect::<String>())
        .map(|m| m.trim_end_matches(':').to_string())
        .filter(|m| !m.is_empty())
        .map(|m| format!("crate::{m}"))
        .collect()
}

#[test]
fn the_path_reader_sees_single_grouped_and_inline_paths() {
    let text = "use crate::a::b;\n// use crate::manager::x;\nuse crate::{\n    manager::y,\n    workload::{self, z},\n};\nfn f() { crate::controller::g(); }\nuse crate::{manager, api::X};\n";
    let paths: Vec<String> = crate_paths(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        paths,
        [
            "crate::a::b",
            "crate::manager::y",
            "crate::workload",
            "crate::controller::g",
            "crate::manager",
            "crate::api::X",
        ]
    );
}

/// The webhook and the commands import nothing of the controllers (not the CronJob
/// controller's internals, nor anything else of them) and nothing of the manager.
#[test]
fn the_webhook_and_the_commands_stand_below_the_controllers_and_the_manager() {
    let mut wrong = Vec::new();
    for dir in ["src/webhook", "src/cli"] {
        for (path, text) in sources(dir) {
            for (line, used) in crate_paths(&text) {
                let above = ["crate::controller", "crate::manager"]
                    .iter()
                    .any(|m| used == *m || used.starts_with(&format!("{m}::")));
                if above {
                    wrong.push(format!("{}:{line}: {used}", path.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports from above:\n{}",
        wrong.join("\n")
    );
}

/// The files of `src` whose code contains `needle`, relative to the crate.
fn files_with(needle: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    sources("src")
        .into_iter()
        .filter(|(_, text)| code(text).iter().any(|(_, line)| line.contains(needle)))
        .map(|(path, _)| {
            path.strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string()
        })
        .collect()
}

/// One guarded delete (the migration's delete of a CronJob keeps its own: a conflict there is
/// an error to report, not a Job already replaced); one place that names Jobs; one backoff
/// family (no jitter drawn from a `RandomState`: the Event recorder's keyed hashers make a
/// digest, not a delay).
#[test]
fn what_the_layout_keeps_in_one_place_has_no_copy() {
    let cases: [(&str, &[&str]); 7] = [
        (
            "Preconditions {",
            &["src/cli/migrate/apply.rs", "src/workload/delete.rs"],
        ),
        ("as_second() / 60", &["src/workload/name.rs"]),
        ("-m{}", &["src/workload/name.rs"]),
        ("ExponentialBuilder", &["src/backoff.rs"]),
        ("ExponentialBackoff", &["src/backoff.rs"]),
        ("RetryPolicy", &[]),
        ("RandomState", &["src/controller/events.rs"]),
    ];
    for (needle, want) in cases {
        assert_eq!(files_with(needle), want, "{needle}");
    }
}
