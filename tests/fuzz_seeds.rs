//! The fuzz targets' seeds (`fuzz/`, docs/fuzzing.md), taken from the tests' own tables and
//! fixtures so the fuzzers start from every case the tests know, and stay in step with them:
//! the string literals of the tables that the product reads as a schedule, a zone, an instant,
//! a date or an annotation, and the fixture CronJobs, Jobs and AdmissionReviews. Written to
//! `target/tmp/fuzz-seeds/<target>/`, one file per seed named by its hash, which `just fuzz`
//! hands to each target. Fails when a target has too few seeds (a table moved, or a target was
//! added without seeds).

use std::collections::BTreeSet;
use std::path::PathBuf;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{
    ANNOTATION_BACKFILL, ANNOTATION_TRIGGER, CalendarSpec, ConcurrencyPolicy, CronJob, DateRange,
};
use kronjob::schedule::exclusions::{parse_date, parse_yearly};
use kronjob::schedule::{ParseError, Schedule, time_zone};
use serde_json::{Value, json};

#[path = "support/mod.rs"]
mod support;

use support::admission::review;
use support::fixtures::{CronJobFixture, JobFixture, cronjob, job, manifest};

/// The tables read, by what they hold.
const SCHEDULE_TABLES: &[&str] = &[
    include_str!("schedule_parse.rs"),
    include_str!("schedule_next.rs"),
    include_str!("schedule_slots.rs"),
    include_str!("../src/schedule/tests.rs"),
    include_str!("../src/schedule/upstream_tests.rs"),
    include_str!("../src/schedule/parse.rs"),
    include_str!("../src/controller/cronjob/plan/upstream_tests.rs"),
];
const CALENDAR_TABLES: &[&str] = &[
    include_str!("../src/schedule/exclusions/tests.rs"),
    include_str!("../src/controller/cronjob/plan/calendar_tests.rs"),
    include_str!("../src/api/validation.rs"),
];
const ANNOTATION_TABLES: &[&str] = &[
    include_str!("../src/api/trigger.rs"),
    include_str!("../src/controller/cronjob/plan/manual.rs"),
    include_str!("../src/workload/backfill/tests.rs"),
    include_str!("../src/controller/cronjob/plan/backfill/tests.rs"),
    include_str!("backfill.rs"),
];
const HEADER_TABLES: &[&str] = &[
    include_str!("../src/metrics_auth/decision.rs"),
    include_str!("../src/metrics_auth/mod.rs"),
];
/// Jobs as the API server sent them (the cache decoders' fixtures).
const JOB_PAYLOADS: &[&str] = &[
    include_str!("../src/controller/cache/testdata/create.json"),
    include_str!("../src/controller/cache/testdata/finished.json"),
    include_str!("../src/controller/cache/testdata/deleting.json"),
    include_str!("../src/controller/cache/testdata/watch.json"),
    include_str!("../src/controller/cache/testdata/list.json"),
];
/// The fuzz crate, for its targets' names.
const FUZZ_MANIFEST: &str = include_str!("../fuzz/Cargo.toml");

/// The string literals of Rust source `text`, unescaped (plain and raw strings; comments and
/// character literals skipped).
fn literals(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' => {
                // A character literal ('x', '\n', '"') or a lifetime ('a).
                i += match (chars.get(i + 1), chars.get(i + 2)) {
                    (Some('\\'), _) => {
                        let close = chars.iter().skip(i + 3).position(|c| *c == '\'');
                        close.map_or(1, |p| p + 4)
                    }
                    (Some(_), Some('\'')) => 3,
                    _ => 1,
                };
                continue;
            }
            'r' if matches!(chars.get(i + 1), Some('"' | '#'))
                && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')) =>
            {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                let quote = i + 1 + hashes;
                if chars.get(quote) != Some(&'"') {
                    i += 1;
                    continue;
                }
                let closing: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let start = quote + 1;
                let end = (start..chars.len())
                    .find(|at| chars[*at..].starts_with(&closing))
                    .unwrap_or(chars.len());
                out.push(chars[start..end].iter().collect());
                i = end + closing.len();
                continue;
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some('0') => s.push('\0'),
                            Some('u') => {
                                let close = chars[i..].iter().position(|c| *c == '}');
                                let hex: String =
                                    chars[i + 2..i + close.unwrap_or(2)].iter().collect();
                                if let Some(c) =
                                    u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                                {
                                    s.push(c);
                                }
                                i += close.unwrap_or(0);
                            }
                            Some('\n') => {
                                while chars.get(i + 1).is_some_and(|c| c.is_whitespace()) {
                                    i += 1;
                                }
                            }
                            Some(c) => s.push(*c),
                            None => {}
                        }
                    } else {
                        s.push(chars[i]);
                    }
                    i += 1;
                }
                out.push(s);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn literals_of(tables: &[&str]) -> BTreeSet<String> {
    tables.iter().flat_map(|t| literals(t)).collect()
}

/// Whether `text` was written as a schedule: it parses, or is refused for what it says rather
/// than for its number of fields.
fn schedule_like(text: &str) -> bool {
    let cronish = text.starts_with('@')
        || text.contains("TZ=")
        || text.contains(|c: char| c.is_ascii_digit() || c == '*' || c == '?');
    cronish
        && !text.contains('\n')
        && match Schedule::parse(text, "ns/name") {
            Ok(_) => true,
            Err(ParseError::FieldCount { found, .. }) => (4..=7).contains(&found),
            Err(ParseError::Empty) => false,
            Err(_) => true,
        }
}

/// What the tables hold, sorted and deduplicated.
struct Tables {
    schedules: Vec<String>,
    valid: Vec<String>,
    zones: Vec<String>,
    instants: Vec<String>,
    dates: Vec<String>,
    yearly: Vec<String>,
}

impl Tables {
    fn read() -> Self {
        let schedule = literals_of(SCHEDULE_TABLES);
        let calendar = literals_of(CALENDAR_TABLES);
        let every: BTreeSet<String> = schedule.iter().chain(&calendar).cloned().collect();
        let schedules: Vec<String> = every.iter().filter(|s| schedule_like(s)).cloned().collect();
        Tables {
            valid: schedules
                .iter()
                .filter(|s| Schedule::parse(s, "ns/name").is_ok())
                .cloned()
                .collect(),
            schedules,
            zones: every
                .iter()
                .filter(|z| z.contains('/') && time_zone(Some(z)).is_ok())
                .cloned()
                .collect(),
            instants: every
                .iter()
                .filter(|t| t.parse::<Timestamp>().is_ok())
                .cloned()
                .collect(),
            dates: calendar
                .iter()
                .filter(|d| parse_date(d).is_ok())
                .cloned()
                .collect(),
            yearly: calendar
                .iter()
                .filter(|d| parse_yearly(d).is_ok())
                .cloned()
                .collect(),
        }
    }
}

/// The `i`th item of `items`, round and round (`-` when there are none).
fn pick(items: &[String], i: usize) -> &str {
    if items.is_empty() {
        "-"
    } else {
        &items[i % items.len()]
    }
}

fn schedule_seeds(t: &Tables) -> Vec<String> {
    let header = |i: usize| {
        let zone = if i.is_multiple_of(3) {
            "-"
        } else {
            pick(&t.zones, i)
        };
        let now = pick(&t.instants, i);
        let created = pick(&t.instants, i * 7 + 1);
        let deadline = ["-", "0", "10", "200"][i % 4];
        format!("{now} {zone} ns/cj-{i} {created} - {deadline}")
    };
    let mut seeds: Vec<String> = t
        .schedules
        .iter()
        .enumerate()
        .map(|(i, expr)| format!("{}\n{expr}", header(i)))
        .collect();
    for (i, pair) in t.valid.chunks(2).enumerate() {
        seeds.push(format!("{}\n{}", header(i), pair.join("\n")));
    }
    seeds
}

fn calendar_seeds(t: &Tables) -> Vec<String> {
    let mut seeds = Vec::new();
    for i in 0..t.dates.len() {
        let dates = &t.dates[i..(i + 3).min(t.dates.len())];
        let ranges: Vec<DateRange> = dates
            .windows(2)
            .map(|w| DateRange {
                from: w[0].clone(),
                to: w[1].clone(),
            })
            .collect();
        let yearly: Vec<String> = t.yearly.iter().skip(i).take(2).cloned().collect();
        let spec = CalendarSpec {
            dates: dates.to_vec(),
            ranges,
            yearly,
        };
        let calendar = kronjob::api::Calendar::new(&format!("days-{i}"), spec);
        let first = dates[0].clone() + "T00:00:00Z";
        let zone = pick(&t.zones, i);
        let window = if i % 4 == 3 {
            format!("{first} {}", pick(&t.instants, i))
        } else {
            "- -".into()
        };
        seeds.push(format!(
            "{first} {zone} {window}\n{}\n{}",
            pick(&t.valid, i),
            serde_json::to_string(&calendar).expect("a Calendar encodes")
        ));
    }
    seeds
}

/// Fixture CronJobs: one per valid schedule of the tables, each with another of the spec's
/// features set.
fn fixture_cronjobs(t: &Tables) -> Vec<CronJob> {
    t.valid
        .iter()
        .enumerate()
        .map(|(i, expr)| {
            let cj = cronjob(expr).named(&format!("cj-{i}"));
            match i % 8 {
                0 => cj,
                1 => cj.zone(pick(&t.zones, i)),
                2 => cj.policy(ConcurrencyPolicy::Forbid).deadline(200),
                3 => cj.schedules(&[expr, pick(&t.valid, i + 1)]),
                4 => cj.suspend_after(3).history(1, 0),
                5 => {
                    let mut cj = cj.policy(ConcurrencyPolicy::Enqueue);
                    cj.spec.exclusions = Some(CalendarSpec {
                        dates: t.dates.iter().take(2).cloned().collect(),
                        ranges: Vec::new(),
                        yearly: t.yearly.iter().take(1).cloned().collect(),
                    });
                    cj
                }
                6 => {
                    let mut cj = cj.policy(ConcurrencyPolicy::Replace);
                    let at = pick(&t.instants, i).to_string();
                    cj.metadata.annotations = Some(
                        [
                            (ANNOTATION_TRIGGER.to_string(), at.clone()),
                            (
                                ANNOTATION_BACKFILL.to_string(),
                                json!({"from": at, "to": pick(&t.instants, i + 1)}).to_string(),
                            ),
                        ]
                        .into(),
                    );
                    cj
                }
                _ => cj.last_scheduled(pick(&t.instants, i)),
            }
        })
        .collect()
}

fn admission_seeds(t: &Tables) -> Vec<String> {
    let mut seeds = Vec::new();
    let cronjobs = fixture_cronjobs(t);
    for (i, cj) in cronjobs.iter().enumerate() {
        let object = manifest(cj);
        let body = match i % 4 {
            0 => review("CREATE", object, Value::Null),
            1 => review("UPDATE", object, manifest(&cronjobs[i - 1])),
            2 => review("DELETE", Value::Null, object),
            _ => object,
        };
        seeds.push(body.to_string());
    }
    for (i, expr) in t.schedules.iter().enumerate().step_by(5) {
        let object = manifest(&cronjob(expr).named(&format!("invalid-{i}")));
        seeds.push(review("CREATE", object, Value::Null).to_string());
    }
    seeds
}

/// The Jobs of the cache decoders' fixtures, wherever a payload holds them.
fn payload_jobs() -> Vec<Value> {
    let mut jobs = Vec::new();
    for payload in JOB_PAYLOADS {
        // One object, or a watch stream of one event per line.
        for value in serde_json::Deserializer::from_str(payload).into_iter::<Value>() {
            let value = value.expect("a fixture payload is JSON");
            let objects = match (&value["object"], &value["items"]) {
                (object @ Value::Object(_), _) => vec![object.clone()],
                (_, Value::Array(items)) => items.clone(),
                _ => vec![value.clone()],
            };
            for mut object in objects {
                // A list's items carry no kind of their own.
                if object.get("kind").is_none() {
                    object["apiVersion"] = json!("batch/v1");
                    object["kind"] = json!("Job");
                }
                if object["kind"] == "Job" {
                    jobs.push(object);
                }
            }
        }
    }
    jobs
}

fn cronjob_seeds(t: &Tables) -> Vec<String> {
    let payloads = payload_jobs();
    let fixtures: Vec<Job> = vec![
        job("cj-a").scheduled().complete_at("2016-05-19T09:01:00Z"),
        job("cj-b")
            .scheduled_for("2016-05-19T10:00:00Z")
            .started_at("2016-05-19T10:00:01Z"),
        job("cj-c")
            .manual()
            .failed_at("2016-05-19T10:30:00Z")
            .ttl(60),
        job("cj-d").scheduled().deleting(),
    ];
    fixture_cronjobs(t)
        .into_iter()
        .enumerate()
        .map(|(i, cj)| {
            let mut cj = cj;
            if i % 5 == 4 {
                cj = cj
                    .running(&[&fixtures[1]])
                    .last_scheduled("2016-05-19T10:00:00Z");
            }
            let cj = serde_json::to_value(&cj).expect("a CronJob encodes");
            match i % 3 {
                0 => cj.to_string(),
                1 => json!([cj, fixtures[i % fixtures.len()], fixtures[(i + 1) % 4]]).to_string(),
                _ => json!([cj, payloads[i % payloads.len()]]).to_string(),
            }
        })
        .collect()
}

fn annotation_seeds(t: &Tables) -> Vec<String> {
    let values = literals_of(ANNOTATION_TABLES);
    let backfills = values
        .iter()
        .filter(|v| serde_json::from_str::<Value>(v).is_ok_and(|v| v.get("from").is_some()));
    let triggers = values.iter().filter(|v| {
        v.split(',')
            .any(|entry| entry.trim().parse::<Timestamp>().is_ok())
    });
    let mut seeds: Vec<String> = backfills.chain(triggers).cloned().collect();
    for (i, pair) in t.instants.windows(2).enumerate().step_by(3) {
        let parallel = i % 12;
        seeds.push(json!({"from": pair[0], "to": pair[1], "parallel": parallel}).to_string());
        seeds.push(pair.join(","));
    }
    seeds
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let now = pick(&t.instants, i);
            format!("{now} {}\n{value}", pick(&t.valid, i))
        })
        .collect()
}

fn header_seeds() -> Vec<String> {
    let headers: Vec<String> = literals_of(HEADER_TABLES)
        .into_iter()
        .filter(|v| {
            let scheme = v.split(' ').next().unwrap_or_default();
            ["bearer", "basic"].contains(&scheme.to_ascii_lowercase().as_str())
        })
        .collect();
    let mut seeds = headers.clone();
    // The fuzz target's reviewer answers by the token: `sa-` authenticates, `reader` may read,
    // a final `!` fails the review.
    for token in ["sa-reader", "sa-no-rbac", "forged", "sa-reader!"] {
        seeds.push(format!("Bearer {token}"));
        seeds.push(format!("Basic dXNlcjpwYXNz\nBearer {token}"));
    }
    seeds
}

/// The seeds of every fuzz target, by target.
fn seeds() -> Vec<(&'static str, Vec<String>)> {
    let t = Tables::read();
    vec![
        ("schedule", schedule_seeds(&t)),
        ("calendar", calendar_seeds(&t)),
        ("admission", admission_seeds(&t)),
        ("cronjob", cronjob_seeds(&t)),
        ("annotations", annotation_seeds(&t)),
        ("metrics_auth", header_seeds()),
    ]
}

/// The fuzz targets `fuzz/Cargo.toml` declares: the names of its `[[bin]]` tables.
fn targets() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_bin = false;
    for line in FUZZ_MANIFEST.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(name) = line.strip_prefix("name = ") {
            names.insert(name.trim_matches('"').to_string());
        }
    }
    names
}

#[test]
fn every_fuzz_target_is_seeded_from_the_tables() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-seeds");
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = seeds();
    let seeded: BTreeSet<String> = seeds.iter().map(|(t, _)| t.to_string()).collect();
    assert_eq!(
        seeded,
        targets(),
        "the targets of fuzz/Cargo.toml and the seeded ones"
    );
    for (target, seeds) in &seeds {
        let distinct: BTreeSet<&String> = seeds.iter().collect();
        eprintln!("{target}: {} seeds", distinct.len());
        let least = match *target {
            "schedule" | "admission" => 100,
            "cronjob" => 40,
            _ => 10,
        };
        assert!(
            distinct.len() >= least,
            "{target}: {} seeds, expected at least {least}",
            distinct.len()
        );
        let at = dir.join(target);
        std::fs::create_dir_all(&at).expect("the seed folder");
        for seed in distinct {
            let name = format!("{:016x}", kronjob::hash::fnv1a64(&[seed.as_bytes()]));
            std::fs::write(at.join(name), seed).expect("a seed written");
        }
    }
}

#[test]
fn literals_are_read_as_rust_writes_them() {
    let source = r###"
        // "a comment"
        let a = "plain \"quoted\" \u{b5}s";
        let b = r#"raw "inner""#;
        let c = '"'; let d: &'static str = "after";
        let e = "one \
                 line";
    "###;
    assert_eq!(
        literals(source),
        ["plain \"quoted\" µs", "raw \"inner\"", "after", "one line"]
    );
}
