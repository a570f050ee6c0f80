//! `kubectl kronjob backfill` on a real API server: ten slots of `* * * * *` from before the
//! CronJob's creation, `--parallel 3`, with Jobs that really run (the case finishes their Pods
//! as a kubelet would, so the next ones start): all ten created oldest first, each named and
//! annotated as its slot's scheduled Job, never more than three unfinished at once; then, with
//! those Jobs deleted, the same range again creates nothing.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{ANNOTATION_BACKFILL, ANNOTATION_BACKFILLED, ANNOTATION_SCHEDULED_AT, CronJob};
use kronjob::workload::scheduled_name;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

use crate::cronjob::create;
use crate::harness::{Ctx, Env, wait_for};
use crate::observe::{cronjob, wait_event};

crate::cases!(
    backfill:
    ten_slots_three_at_a_time_and_the_repeat_creates_nothing,
);

const NAME: &str = "backfilled";

/// Whether the Job has finished (`Complete` or `Failed` true).
fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// The backfill's Jobs of `NAME`, by name.
async fn backfill_jobs(env: &Env) -> Vec<Job> {
    env.jobs_of(NAME)
        .await
        .into_iter()
        .filter(|j| j.annotations().contains_key(ANNOTATION_BACKFILLED))
        .collect()
}

pub async fn ten_slots_three_at_a_time_and_the_repeat_creates_nothing(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    // Suspended: a backfill is explicit and still runs; the schedule adds no Jobs of its own.
    let cj = create(
        &env,
        cronjob(
            NAME,
            "* * * * *",
            json!({"suspend": true, "successfulJobsHistoryLimit": 20}),
        ),
    )
    .await;
    let created = cj.creation_timestamp().expect("created").0;
    // The ten minutes up to the creation: slots that never ran.
    let last = Timestamp::from_second(created.as_second().div_euclid(60) * 60).expect("minute");
    let first = last - jiff::SignedDuration::from_mins(9);
    let slots: Vec<Timestamp> = (0..10)
        .map(|m| first + jiff::SignedDuration::from_mins(m))
        .collect();
    let names: Vec<String> = slots.iter().map(|s| scheduled_name(NAME, *s)).collect();
    let (from, to) = (first.to_string(), last.to_string());
    let flags = |extra: &[&'static str]| {
        let mut args = vec![
            "backfill".to_string(),
            NAME.to_string(),
            "-n".to_string(),
            env.namespace.clone(),
            "--from".to_string(),
            from.clone(),
            "--to".to_string(),
            to.clone(),
            "--parallel".to_string(),
            "3".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let refs = |args: &[String]| {
        args.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    };

    // --dry-run: every slot, oldest first, to run; nothing asked.
    let dry = flags(&["--dry-run"]);
    let shown = env.plugin_ok(&dry.iter().map(String::as_str).collect::<Vec<_>>());
    let rows: Vec<&str> = shown.lines().filter(|l| l.ends_with(" run")).collect();
    assert_eq!(rows.len(), 10, "{shown}");
    for (row, name) in rows.iter().zip(&names) {
        assert!(
            row.contains(name.as_str()),
            "oldest first: {row} / {name}\n{shown}"
        );
    }
    assert!(shown.contains("10 of 10 slots to run"), "{shown}");
    let fresh = env.api::<CronJob>().get(NAME).await.expect("cronjob");
    assert!(
        !fresh.annotations().contains_key(ANNOTATION_BACKFILL),
        "a dry run asks nothing"
    );

    // A future --to: refused with exit code 2.
    let future = (Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
    let refused = env.plugin(&[
        "backfill",
        NAME,
        "-n",
        &env.namespace,
        "--from",
        &from,
        "--to",
        &future,
    ]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");

    // The backfill, the plugin waiting; the case finishes each Job's Pods as they come, three
    // at a time at most.
    let args = flags(&["--wait", "5m"]);
    let kubeconfig = env.kubeconfig.clone();
    let plugin = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kronjob"))
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("kubectl-kronjob")
    });
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut most = 0;
    let mut finished_names = BTreeSet::new();
    loop {
        let jobs = backfill_jobs(&env).await;
        let running: Vec<&Job> = jobs.iter().filter(|j| !finished(j)).collect();
        most = most.max(running.len());
        assert!(running.len() <= 3, "{} unfinished at once", running.len());
        if jobs.len() == 10 && running.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{} of 10 created", jobs.len());
        // Three at once: the fourth waits for one to finish.
        let full = running.len() == 3;
        if full || (jobs.len() == 10 && !running.is_empty()) {
            if full {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let again = backfill_jobs(&env).await;
                let unfinished = again.iter().filter(|j| !finished(j)).count();
                assert!(unfinished <= 3, "{unfinished} unfinished at once");
            }
            for job in running {
                if finished_names.insert(job.name_any()) {
                    env.finish_pods(&job.name_any(), "Succeeded").await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(most, 3, "three ran at once");
    let output = plugin.await.expect("the plugin");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for name in &names {
        assert!(
            printed.contains(&format!("job.batch/{name} created")),
            "{name}:\n{printed}"
        );
    }
    let jobs = backfill_jobs(&env).await;
    let got: Vec<String> = jobs.iter().map(|j| j.name_any()).collect();
    assert_eq!(got, names, "each slot's own name");
    for (job, slot) in jobs.iter().zip(&slots) {
        let at: Timestamp = job.annotations()[ANNOTATION_SCHEDULED_AT]
            .parse()
            .expect("RFC 3339");
        assert_eq!(at, *slot, "{}", job.name_any());
    }
    wait_event(
        &env,
        NAME,
        "BackfillDone",
        "10 Jobs created, 0 slots already run",
        Duration::from_secs(30),
    )
    .await;
    let done = env.api::<CronJob>().get(NAME).await.expect("cronjob");
    assert!(
        !done.annotations().contains_key(ANNOTATION_BACKFILL),
        "the request is removed"
    );
    let status = done.status.expect("status");
    assert_eq!(
        status.last_schedule_time, None,
        "a backfill does not move lastScheduleTime"
    );

    // `history` shows them with their slots, marked.
    let history = env.plugin_ok(&["history", NAME, "-n", &env.namespace]);
    for (name, slot) in names.iter().zip(&slots) {
        let row = format!("{}   Complete", format_args!("{slot} (backfill)"));
        assert!(
            history
                .lines()
                .any(|l| l.starts_with(name.as_str()) && l.contains(&row)),
            "{name}: {history}"
        );
    }

    // The Jobs go (as history limits or a TTL would take them): the repeat still runs nothing.
    let jobs_api = env.api::<Job>();
    jobs_api
        .delete_collection(
            &DeleteParams::background(),
            &ListParams::default().labels(&format!("batch.kronjob.dev/cronjob={NAME}")),
        )
        .await
        .expect("delete the Jobs");
    wait_for(Duration::from_secs(30), "the Jobs gone", || async {
        env.jobs_of(NAME).await.is_empty().then_some(())
    })
    .await;
    let repeat = flags(&["--wait", "1m"]);
    let again = env.plugin_ok(&repeat.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(again.contains("0 of 10 slots to run"), "{again}");
    assert!(
        again.contains("backfill done: 0 of 0 runs created"),
        "{again}"
    );
    wait_event(
        &env,
        NAME,
        "BackfillDone",
        "0 Jobs created, 10 slots already run",
        Duration::from_secs(30),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        env.jobs_of(NAME).await.is_empty(),
        "the repeat created nothing: {}",
        refs(&repeat)
    );
    env.cleanup().await;
}
