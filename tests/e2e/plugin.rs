//! `kubectl kronjob` (the `kubectl-kronjob` binary) against a real API server, checked against
//! the formats the README documents: `list`/`get` (`-A`, `-l`, `-o wide|json|yaml`), `history`
//! of Jobs the Job controller really finished, `next` in the CronJob's zone, `suspend` and
//! `resume` (twice: nothing more changes), `trigger --wait`, the exit codes (0, 1 for an error,
//! 2 for a usage error) and `error: ...` on stderr.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{ANNOTATION_TRIGGER, CronJob};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::cronjob::create;
use crate::harness::{Ctx, Env, this_minute, wait_for};
use crate::observe::{
    at_minute, cronjob, finished_job, job_on_time, minutes_of_every_hour,
    not_at_the_end_of_a_minute,
};

crate::cases!(
    plugin:
    list_history_and_trigger_show_real_runs,
    next_suspend_resume_and_exit_codes,
);

const SOON: Duration = Duration::from_secs(30);

/// The lines of the README's example after the line `command` (up to the end of the block or
/// the next command).
fn readme_example(command: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(crate::tools::root().join("README.md")).expect("README");
    let mut lines = readme.lines().skip_while(|l| l.trim() != command);
    assert!(lines.next().is_some(), "README has no example `{command}`");
    lines
        .take_while(|l| !l.starts_with("```") && !l.starts_with("$ "))
        .map(str::to_string)
        .collect()
}

/// A kubectl-style table as rows of (column title -> cell), cut at the header's columns (a
/// title starts after two spaces or more; cells may hold single spaces).
pub fn parse_table(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let mut starts = vec![0];
    let bytes = header.as_bytes();
    for i in 2..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    let titles: Vec<String> = starts
        .iter()
        .enumerate()
        .map(|(n, &s)| {
            let end = starts.get(n + 1).copied().unwrap_or(header.len());
            header[s..end].trim().to_string()
        })
        .collect();
    let rows = lines
        .map(|line| {
            titles
                .iter()
                .enumerate()
                .map(|(n, title)| {
                    let start = starts[n].min(line.len());
                    let end = starts
                        .get(n + 1)
                        .copied()
                        .unwrap_or(line.len())
                        .min(line.len());
                    (title.clone(), line[start..end].trim().to_string())
                })
                .collect()
        })
        .collect();
    (titles, rows)
}

/// The column titles of a README example table.
fn readme_header(command: &str) -> Vec<String> {
    parse_table(&readme_example(command).join("\n")).0
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Check a failed command: exit `code`, nothing on stdout, one `error: ` line on stderr that
/// contains `says`.
fn assert_fails(out: &Output, code: i32, says: &str, what: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "{what}: {stdout}{stderr}");
    assert!(stdout.is_empty(), "{what}: stdout {stdout:?}");
    assert!(stderr.starts_with("error: "), "{what}: stderr {stderr:?}");
    assert!(stderr.contains(says), "{what}: stderr {stderr:?}");
}

/// An age or time since as kubectl prints it (`45s`, `5m30s`, `3h10m`, `4d`).
fn is_age(cell: &str) -> bool {
    !cell.is_empty()
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || "smhdy".contains(c))
        && cell.ends_with(|c: char| "smhdy".contains(c))
}

/// `kubectl kronjob trigger` with `--wait`, after the previous request is gone (a pending one
/// would be waited for again rather than a new one made); the manual run's name.
async fn trigger(env: &Env, name: &str) -> String {
    let cronjobs = env.api::<CronJob>();
    wait_for(SOON, "the previous trigger request removed", || async {
        let cj = cronjobs.get(name).await.ok()?;
        (!cj.annotations().contains_key(ANNOTATION_TRIGGER)).then_some(())
    })
    .await;
    // One request per second at most: the run is named after the second it was asked in.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let out = env.plugin_ok(&["trigger", name, "-n", &env.namespace, "--wait", "30s"]);
    let job = out
        .trim()
        .strip_prefix("job.batch/")
        .and_then(|rest| rest.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("trigger printed {out:?}"))
        .to_string();
    let suffix = job.strip_prefix(&format!("{name}-m")).unwrap_or_default();
    let asked = i64::from_str_radix(suffix, 36)
        .unwrap_or_else(|_| panic!("manual run {job:?} is not named <cronjob>-m<base 36>"));
    let ago = Timestamp::now().as_second() - asked;
    assert!(
        (0..=SOON.as_secs() as i64).contains(&ago),
        "{job}: asked {ago} s ago"
    );
    job
}

/// The name the README gives the manual run asked for at `at`: `<cronjob>-m<unix seconds,
/// base 36>`.
fn manual_run(cronjob: &str, at: Timestamp) -> String {
    let mut secs = at.as_second();
    let mut digits = Vec::new();
    while secs > 0 {
        digits.push(std::char::from_digit((secs % 36) as u32, 36).expect("a digit"));
        secs /= 36;
    }
    format!("{cronjob}-m{}", digits.iter().rev().collect::<String>())
}

/// The runs of `cj` the list case makes: three manual runs and one scheduled slot.
struct Runs {
    /// The slot (minutes since the epoch) the scheduled run is for.
    slot: i64,
    /// A manual run whose Pod succeeded.
    ok: String,
    /// A manual run whose Pod failed.
    failed: String,
    /// A manual run still running.
    running: String,
    /// The slot's run, whose Pod succeeded last.
    scheduled: String,
}

/// `cj` (label `team=a`) on the next minute only, with three manual runs (Complete, Failed,
/// Running) and its slot's run (Complete, the last to finish); `nightly` (label `team=b`),
/// suspended, in Europe/Berlin.
async fn cronjobs_with_runs(env: &Env) -> Runs {
    not_at_the_end_of_a_minute().await;
    let slot = this_minute() + 1;
    let mut manifest = cronjob("cj", &minutes_of_every_hour(&[slot]), json!({}));
    manifest["metadata"]["labels"] = json!({"team": "a"});
    let cj = create(env, manifest).await;
    let spec = json!({"timeZone": "Europe/Berlin", "suspend": true});
    let mut nightly = cronjob("nightly", "30 2 * * *", spec);
    nightly["metadata"]["labels"] = json!({"team": "b"});
    create(env, nightly).await;
    let ok = trigger(env, "cj").await;
    env.finish_pods(&ok, "Succeeded").await;
    finished_job(env, &ok).await;
    let failed = trigger(env, "cj").await;
    env.finish_pods(&failed, "Failed").await;
    finished_job(env, &failed).await;
    let running = trigger(env, "cj").await;
    let scheduled = job_on_time(env, &cj, slot).await.name_any();
    env.finish_pods(&scheduled, "Succeeded").await;
    finished_job(env, &scheduled).await;
    let manual = env.api::<Job>().get(&running).await.expect("manual run");
    assert_eq!(
        manual.annotations().get("batch.kronjob.dev/instantiate"),
        Some(&"manual".to_string())
    );
    crate::observe::wait_status(env, "cj", SOON, "one run active", |s| {
        (s.active_count == 1).then_some(())
    })
    .await;
    Runs {
        slot,
        ok,
        failed,
        running,
        scheduled,
    }
}

/// `cj` runs one scheduled slot and three manual runs, a suspended `nightly` none: `history`,
/// `list`, `get` and their variants show them as the README says.
pub async fn list_history_and_trigger_show_real_runs(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let runs = cronjobs_with_runs(&env).await;
    history_shows_every_run(&env, &runs).await;
    let titles = list_shows_last_and_next_runs(&env, &runs);
    list_variants(&env, &titles, runs.slot);
    env.cleanup().await;
}

/// `history`: newest first, every run with its slot (or `manual`), result, start and duration;
/// `-o json` a List of the Jobs; a CronJob without runs says so on stderr.
async fn history_shows_every_run(env: &Env, runs: &Runs) {
    let ns = env.namespace.as_str();
    let out = env.plugin_ok(&["history", "cj", "-n", ns]);
    let (titles, rows) = parse_table(&out);
    let readme = readme_header("$ kubectl kronjob history cj -n ns");
    assert_eq!(titles, readme, "{out}");
    let manual = || "manual".to_string();
    let mut want = BTreeMap::from([
        (
            &runs.scheduled,
            (at_minute(runs.slot).to_string(), "Complete"),
        ),
        (&runs.running, (manual(), "Running")),
        (&runs.failed, (manual(), "Failed")),
        (&runs.ok, (manual(), "Complete")),
    ]);
    assert_eq!(rows.len(), want.len(), "{out}");
    let mut newer: Option<Timestamp> = None;
    for row in &rows {
        let name = &row["NAME"];
        let (scheduled_at, result) = want
            .remove(name)
            .unwrap_or_else(|| panic!("{name}: not a run of cj, or listed twice\n{out}"));
        let cells = (row["SCHEDULED"].as_str(), row["RESULT"].as_str());
        assert_eq!(cells, (scheduled_at.as_str(), result), "{name}\n{out}");
        let start = row["START"].strip_suffix(" ago").unwrap_or_default();
        assert!(is_age(start), "START of {name}\n{out}");
        assert!(is_age(&row["DURATION"]), "DURATION of {name}\n{out}");
        let job = env.api::<Job>().get(name).await.expect("the Job");
        let created = job.creation_timestamp().expect("creationTimestamp").0;
        assert!(newer.is_none_or(|n| n >= created), "newest first:\n{out}");
        newer = Some(created);
    }
    let readme = readme_example("$ kubectl kronjob trigger cj -n ns");
    let documented = |l: &String| l.starts_with("job.batch/cj-m") && l.ends_with(" created");
    assert!(readme.iter().any(documented), "{readme:?}");
    let json = env.plugin_ok(&["history", "cj", "-n", ns, "-o", "json"]);
    let listed: Value = serde_json::from_str(&json).expect("history -o json");
    assert_eq!(listed["kind"], "List");
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(4), "{json}");
    let none = env.plugin(&["history", "nightly", "-n", ns]);
    assert_eq!(none.status.code(), Some(0));
    assert_eq!(
        text(&none.stderr).trim(),
        format!("No runs of cronjob.batch.kronjob.dev/nightly in {ns} namespace.")
    );
}

/// `list` and `get`: the README's columns, the newest finished run and the next run of `cj`,
/// `nightly` suspended in its zone without runs; the column titles.
fn list_shows_last_and_next_runs(env: &Env, runs: &Runs) -> Vec<String> {
    let ns = env.namespace.as_str();
    let out = env.plugin_ok(&["list", "-n", ns]);
    let (titles, rows) = parse_table(&out);
    assert_eq!(
        titles,
        readme_header("$ kubectl kronjob list -n ns"),
        "{out}"
    );
    let names: Vec<&str> = rows.iter().map(|r| r["NAME"].as_str()).collect();
    assert_eq!(names, ["cj", "nightly"], "{out}");
    let (cj, nightly) = (&rows[0], &rows[1]);
    assert_eq!(cj["SCHEDULE"], minutes_of_every_hour(&[runs.slot]));
    let cells = |row: &BTreeMap<String, String>, columns: &[&str]| -> Vec<String> {
        columns.iter().map(|c| row[*c].clone()).collect()
    };
    let settings = ["TIMEZONE", "SUSPEND", "ACTIVE"];
    assert_eq!(cells(cj, &settings), ["<none>", "false", "1"], "{out}");
    let last = cj["LAST RUN"].strip_suffix(" ago (Complete)");
    assert!(last.is_some_and(is_age), "LAST RUN\n{out}");
    let next = cj["NEXT RUN"].strip_prefix("in ");
    assert!(next.is_some_and(is_age), "NEXT RUN\n{out}");
    assert!(is_age(&cj["AGE"]), "{out}");
    let columns = ["TIMEZONE", "SUSPEND", "LAST RUN", "NEXT RUN"];
    let want = ["Europe/Berlin", "true", "<none>", "<none>"];
    assert_eq!(cells(nightly, &columns), want, "{out}");
    let get = env.plugin_ok(&["get", "-n", ns]);
    let (get_titles, get_rows) = parse_table(&get);
    assert_eq!(
        (&get_titles, get_rows.len()),
        (&titles, 2),
        "get is list:\n{get}"
    );
    titles
}

/// `list -A` (a NAMESPACE column first), `-l`, `-o wide` (CONTAINERS, IMAGES, LAST SUCCESS
/// after `titles`), `-o json` and `-o yaml` (a List of the CronJobs).
fn list_variants(env: &Env, titles: &[String], slot: i64) {
    let ns = env.namespace.as_str();
    let all = env.plugin_ok(&["list", "-A"]);
    let (all_titles, all_rows) = parse_table(&all);
    assert_eq!(
        (all_titles[0].as_str(), &all_titles[1..]),
        ("NAMESPACE", titles),
        "{all}"
    );
    let ours: Vec<&str> = all_rows
        .iter()
        .filter(|r| r["NAMESPACE"] == ns)
        .map(|r| r["NAME"].as_str())
        .collect();
    assert_eq!(ours, ["cj", "nightly"], "{all}");

    let labelled = env.plugin_ok(&["list", "-n", ns, "-l", "team=a"]);
    let rows = parse_table(&labelled).1;
    let names: Vec<&str> = rows.iter().map(|r| r["NAME"].as_str()).collect();
    assert_eq!(names, ["cj"], "{labelled}");

    let wide = env.plugin_ok(&["list", "-n", ns, "-o", "wide"]);
    let (wide_titles, rows) = parse_table(&wide);
    assert_eq!(&wide_titles[..titles.len()], titles, "{wide}");
    let added = ["CONTAINERS", "IMAGES", "LAST SUCCESS"];
    assert_eq!(&wide_titles[titles.len()..], added, "{wide}");
    let images = (rows[0]["CONTAINERS"].as_str(), rows[0]["IMAGES"].as_str());
    assert_eq!(images, ("c", "busybox:1.36"), "{wide}");
    let success = rows[0]["LAST SUCCESS"].strip_suffix(" ago");
    assert!(success.is_some_and(is_age), "{wide}");
    assert_eq!(rows[1]["LAST SUCCESS"], "<none>", "{wide}");

    let json = env.plugin_ok(&["list", "-n", ns, "-o", "json"]);
    let yaml = env.plugin_ok(&["list", "-n", ns, "-o", "yaml"]);
    let as_json: Value = serde_json::from_str(&json).expect("-o json");
    let as_yaml: Value = serde_yaml_ng::from_str(&yaml).expect("-o yaml");
    for listed in [&as_json, &as_yaml] {
        assert_eq!(
            (&listed["apiVersion"], &listed["kind"]),
            (&json!("v1"), &json!("List"))
        );
        let items = listed["items"].as_array().expect("items");
        let names: Vec<&str> = items
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["cj", "nightly"]);
        let kronjob =
            |i: &Value| i["kind"] == "CronJob" && i["apiVersion"] == "batch.kronjob.dev/v1";
        assert!(items.iter().all(kronjob), "{listed}");
        let last = &items[0]["status"]["lastScheduleTime"];
        assert_eq!(last, &json!(at_minute(slot).to_string()));
    }
}

/// `next` prints the README's example exactly and the coming runs of a CronJob in its zone;
/// `suspend` and `resume` print what the README says, and a second run changes nothing;
/// `trigger` without a manager fails after its wait and leaves the request, which a manager
/// started later runs; a missing CronJob is exit 1 with `error: ...`, a usage error exit 2.
pub async fn next_suspend_resume_and_exit_codes(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let spec = json!({"timeZone": "Europe/Berlin"});
    create(&env, cronjob("cj", "30 2 * * *", spec)).await;
    next_in_the_zone(&env);
    suspend_and_resume_twice(&env).await;
    let manager = trigger_waits_for_a_manager(&env).await;
    exit_codes(&env);
    drop(manager);
    env.cleanup().await;
}

/// `next`: the README's example word for word, and the next three runs at 02:30 in Berlin
/// (03:00 on a day that skips 02:30), with the same instants in UTC.
fn next_in_the_zone(env: &Env) {
    let ns = env.namespace.as_str();
    let command = "$ kubectl kronjob next cj -n ns --count 2 --from 2024-03-30T12:00:00Z";
    let from = "2024-03-30T12:00:00Z";
    let out = env.plugin_ok(&["next", "cj", "-n", ns, "--count", "2", "--from", from]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        readme_example(command),
        "{out}"
    );
    let out = env.plugin_ok(&["next", "cj", "-n", ns, "--count", "3"]);
    let (titles, rows) = parse_table(&out);
    assert_eq!(titles, ["Europe/Berlin", "UTC"], "{out}");
    assert_eq!(rows.len(), 3, "{out}");
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").expect("zone");
    let mut previous = Timestamp::now();
    for row in &rows {
        let zoned: Timestamp = row["Europe/Berlin"].parse().expect("a time and offset");
        let utc: Timestamp = row["UTC"].parse().expect("a UTC time");
        assert!(zoned == utc && row["UTC"].ends_with('Z'), "{out}");
        let local = zoned.to_zoned(berlin.clone());
        let shown = zoned.display_with_offset(local.offset()).to_string();
        assert_eq!(row["Europe/Berlin"], shown, "{out}");
        let at = (local.hour(), local.minute());
        assert!(at == (2, 30) || at == (3, 0), "{out}");
        assert!(zoned > previous, "{out}");
        previous = zoned;
    }
}

/// `suspend` twice, `resume` twice: the README's lines; the second of each changes nothing
/// (same resourceVersion). `next` on a suspended CronJob warns on stderr.
async fn suspend_and_resume_twice(env: &Env) {
    let ns = env.namespace.as_str();
    let api = env.api::<CronJob>();
    let steps = [
        ("suspend", true),
        ("suspend", true),
        ("resume", false),
        ("resume", false),
    ];
    for (verb, suspended) in steps {
        let before = api.get("cj").await.expect("CronJob");
        let out = env.plugin_ok(&[verb, "cj", "-n", ns]);
        let done = if suspended { "suspended" } else { "resumed" };
        let line = format!("cronjob.batch.kronjob.dev/cj {done}");
        assert_eq!(out, format!("{line}\n"));
        let readme = readme_example(&format!("$ kubectl kronjob {verb} cj -n ns"));
        assert_eq!(readme, [line]);
        let after = api.get("cj").await.expect("CronJob");
        assert_eq!(after.spec.suspend, Some(suspended), "after {verb}");
        if before.spec.suspend == Some(suspended) {
            let versions = (after.resource_version(), before.resource_version());
            assert_eq!(versions.0, versions.1, "a second {verb} changes nothing");
        }
    }
    env.plugin_ok(&["suspend", "cj", "-n", ns]);
    let out = env.plugin(&["next", "cj", "-n", ns]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0));
    let warning = "warning: cronjob.batch.kronjob.dev/cj is suspended";
    assert!(stderr.starts_with(warning), "{stderr}");
}

/// `trigger` with no manager: exit 1 after the wait, the request stays and no Job is made; a
/// manager started then runs it (only it) and removes it; a new `trigger` is a new run. The
/// manager, still running.
async fn trigger_waits_for_a_manager(env: &Env) -> crate::harness::Manager {
    let ns = env.namespace.as_str();
    let api = env.api::<CronJob>();
    let out = env.plugin(&["trigger", "cj", "-n", ns, "--wait", "2s"]);
    let says = "is the kronjob manager running?";
    assert_fails(&out, 1, says, "trigger without a manager");
    let request = api.get("cj").await.expect("CronJob");
    let annotations = request.annotations();
    let asked = annotations
        .get(ANNOTATION_TRIGGER)
        .expect("the request stays");
    let at: Timestamp = asked.parse().expect("the request is a time");
    let pending = manual_run("cj", at);
    let jobs = env.api::<Job>();
    let made = jobs.get_opt(&pending).await.expect("get Job");
    assert!(made.is_none(), "a Job without a manager");
    let mut manager = env.manager(&[]);
    manager.wait_ready(SOON).await;
    crate::observe::job_named(env, &pending, SOON).await;
    wait_for(SOON, "the request removed", || async {
        let cj = api.get("cj").await.ok()?;
        (!cj.annotations().contains_key(ANNOTATION_TRIGGER)).then_some(())
    })
    .await;
    let next = trigger(env, "cj").await;
    assert_ne!(next, pending, "a new request after the first ran");
    let runs: Vec<String> = env
        .jobs_of("cj")
        .await
        .iter()
        .map(|j| j.name_any())
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    manager
}

/// A missing CronJob: exit 1 and `error: ... not found`; a usage error: exit 2 and `error:
/// ...`; a namespace without CronJobs: exit 0 and kubectl's line on stderr.
fn exit_codes(env: &Env) {
    let ns = env.namespace.as_str();
    let missing = [
        vec!["history", "missing"],
        vec!["next", "missing"],
        vec!["suspend", "missing"],
        vec!["resume", "missing"],
        vec!["trigger", "missing", "--wait", "0"],
    ];
    for mut args in missing {
        args.extend(["-n", ns]);
        assert_fails(&env.plugin(&args), 1, "not found", &args.join(" "));
    }
    let usage = [
        (vec!["history"], "required"),
        (vec!["list", "-o", "table"], "invalid value"),
        (vec!["next", "cj", "--from", "yesterday"], "invalid --from"),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ];
    for (mut args, says) in usage {
        args.extend(["-n", ns]);
        assert_fails(&env.plugin(&args), 2, says, &args.join(" "));
    }
    let empty = format!("{ns}-nothing");
    let out = env.plugin(&["list", "-n", &empty]);
    assert_eq!((out.status.code(), out.stdout.is_empty()), (Some(0), true));
    let said = text(&out.stderr);
    assert_eq!(
        said.trim(),
        format!("No resources found in {empty} namespace.")
    );
}
