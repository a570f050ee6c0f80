//! Exclusion calendars and the active window on a real API server: a CronJob on `* * * * *`
//! whose Calendar excludes today (in its zone) creates no Job and says why (an Event and
//! `status.lastSkippedTime`), and runs at the next minute once the date is removed; a CronJob
//! naming a Calendar that does not exist reports `CalendarNotFound` (condition, Warning, metric)
//! until it is created; a window whose `notAfter` passed reports `Finished`; invalid Calendars
//! and exclusions are refused with a field path.

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kronjob::api::{Calendar, CronJob};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::cronjob::create;
use crate::harness::{Ctx, Env, apply, metric_sum, this_minute};
use crate::observe::{
    at_minute, cronjob, events, job_of_slot, minute_of, not_at_the_end_of_a_minute, status,
    wait_event, wait_status,
};

crate::cases!(
    calendar:
    an_excluded_day_runs_nothing_until_the_date_is_removed,
    a_missing_calendar_stops_every_slot_until_it_exists,
    a_window_that_ended_reports_finished,
);

const SOON: Duration = Duration::from_secs(30);
/// Long enough for the next minute's slot to fall due and be acted on.
const A_MINUTE: Duration = Duration::from_secs(75);

fn calendars(env: &Env) -> Api<Calendar> {
    Api::all(env.client.clone())
}

/// A Calendar name of this case's own (Calendars are cluster-scoped).
fn calendar_name(env: &Env, what: &str) -> String {
    format!("{what}-{}", env.namespace)
}

async fn delete_calendar(env: &Env, name: &str) {
    let _ = calendars(env).delete(name, &DeleteParams::default()).await;
}

/// Today in `zone`, as `YYYY-MM-DD`.
fn today_in(zone: &str) -> String {
    let tz = TimeZone::get(zone).expect("zone");
    Timestamp::now().to_zoned(tz).date().to_string()
}

pub async fn an_excluded_day_runs_nothing_until_the_date_is_removed(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let zone = "Asia/Tokyo";
    let name = calendar_name(&env, "holidays");
    // Created with kubectl apply, as a platform team would.
    let today = today_in(zone);
    let file = ctx.logs.join("calendar.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: batch.kronjob.dev/v1\nkind: Calendar\nmetadata:\n  name: {name}\nspec:\n  dates: [\"{today}\", \"2020-01-01\"]\n  yearly: [\"02-29\"]\n"
        ),
    )
    .expect("write the Calendar");
    env.kubectl_ok(&["apply", "-f", &file.display().to_string()]);
    let _manager = env.manager(&[]);
    not_at_the_end_of_a_minute().await;
    let created = this_minute();
    create(
        &env,
        cronjob(
            "closed",
            "* * * * *",
            json!({"timeZone": zone, "calendars": [name]}),
        ),
    )
    .await;
    // The first slot after creation is excluded: an Event names the Calendar and the date.
    let skipped = wait_event(
        &env,
        "closed",
        "SlotSkipped",
        &format!("Calendar {name} excludes {today}"),
        A_MINUTE,
    )
    .await;
    assert_eq!(skipped.type_, "Normal");
    let st = wait_status(&env, "closed", SOON, "lastSkippedTime", |s| {
        s.last_skipped_time.clone()
    })
    .await;
    let skipped_minute = minute_of(st.0);
    assert!(skipped_minute > created, "a slot after the creation");
    let now = status(&env, "closed").await;
    assert_eq!(now.last_schedule_time, None, "a skipped slot is no run");
    let tomorrow = TimeZone::get(zone)
        .ok()
        .and_then(|tz| {
            let date: jiff::civil::Date = today.parse().ok()?;
            date.tomorrow().ok()?.to_zoned(tz).ok()
        })
        .expect("tomorrow")
        .timestamp();
    assert_eq!(
        now.next_schedule_time.as_ref().map(|t| t.0),
        Some(tomorrow),
        "the next slot is the first of the next day in {zone}"
    );
    assert!(env.jobs_of("closed").await.is_empty(), "no Job");

    // The plugin's next skips the excluded slots, and shows them on request.
    let next = env.plugin_ok(&["next", "closed", "-n", &env.namespace, "--count", "1"]);
    assert!(
        next.contains(
            &tomorrow
                .to_zoned(TimeZone::get(zone).expect("zone"))
                .strftime("%Y-%m-%d")
                .to_string()
        ),
        "{next}"
    );
    let shown = env.plugin_ok(&[
        "next",
        "closed",
        "-n",
        &env.namespace,
        "--count",
        "1",
        "--show-skipped",
    ]);
    assert!(shown.contains(&format!("Calendar {name}")), "{shown}");

    // Remove the date: the next minute's slot runs.
    apply(
        &calendars(&env),
        json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
               "metadata": {"name": name}, "spec": {"dates": ["2020-01-01"]}}),
    )
    .await;
    let removed = this_minute();
    let job = job_of_slot(&env, "closed", removed + 1, A_MINUTE).await;
    assert!(job.metadata.name.is_some());
    let after = wait_status(&env, "closed", SOON, "the run recorded", |s| {
        s.last_schedule_time.clone()
    })
    .await;
    assert_eq!(after.0, at_minute(removed + 1));
    // Every slot up to the edit was skipped, none ran twice or late.
    let slots: Vec<i64> = env
        .jobs_of("closed")
        .await
        .iter()
        .filter_map(crate::harness::slot_of)
        .collect();
    assert_eq!(slots, vec![removed + 1], "only the slot after the edit ran");
    delete_calendar(&env, &name).await;
    env.cleanup().await;
}

pub async fn a_missing_calendar_stops_every_slot_until_it_exists(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let name = calendar_name(&env, "missing");
    let mut manager = env.manager(&[]);
    create(
        &env,
        cronjob("careful", "* * * * *", json!({"calendars": [name]})),
    )
    .await;
    let ready = wait_status(&env, "careful", SOON, "Ready=False CalendarNotFound", |s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready" && c.reason == "CalendarNotFound")
            .cloned()
    })
    .await;
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains(&name), "{}", ready.message);
    let warning = wait_event(&env, "careful", "CalendarNotFound", &name, SOON).await;
    assert_eq!(warning.type_, "Warning");
    manager.wait_ready(SOON).await;
    let labels = [
        ("namespace", env.namespace.as_str()),
        ("cronjob", "careful"),
    ];
    let missing = metric_sum(
        &manager.metrics_text().await,
        "kronjob_cronjob_calendar_missing",
        &labels,
    );
    assert_eq!(missing, 1.0, "the gauge the alert reads");

    // Invalid Calendars and exclusions are refused, naming the field.
    for (manifest, field) in [
        (
            json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
                   "metadata": {"name": format!("bad-{name}")},
                   "spec": {"ranges": [{"from": "2026-12-24", "to": "2026-12-01"}]}}),
            "spec.ranges[0].to",
        ),
        (
            json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
                   "metadata": {"name": format!("bad-{name}")},
                   "spec": {"dates": ["2026-02-30"]}}),
            "spec.dates[0]",
        ),
        (
            json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
                   "metadata": {"name": format!("bad-{name}")},
                   "spec": {"yearly": ["04-31"]}}),
            "spec.yearly[0]",
        ),
    ] {
        let refused = calendars(&env)
            .patch(
                &format!("bad-{name}"),
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&manifest),
            )
            .await
            .expect_err("an invalid Calendar is refused");
        assert!(refused.to_string().contains(field), "{field}: {refused}");
    }
    let bad_window = cronjob(
        "backwards",
        "* * * * *",
        json!({"notBefore": "2026-02-01T00:00:00Z", "notAfter": "2026-01-01T00:00:00Z"}),
    );
    let refused = env
        .api::<CronJob>()
        .patch(
            "backwards",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&bad_window),
        )
        .await
        .expect_err("a window ending before it begins is refused");
    assert!(refused.to_string().contains("spec.notAfter"), "{refused}");

    // The Calendar appears: the reference index reconciles the CronJob at once.
    let edited = std::time::Instant::now();
    apply(
        &calendars(&env),
        json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
               "metadata": {"name": name}, "spec": {"dates": ["2020-01-01"]}}),
    )
    .await;
    let ready = wait_status(
        &env,
        "careful",
        Duration::from_secs(10),
        "Ready=True",
        |s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")
                .cloned()
        },
    )
    .await;
    assert_eq!(ready.reason, "Scheduled");
    eprintln!(
        "e2e: calendar created to the CronJob scheduling again: {:.2} s",
        edited.elapsed().as_secs_f64()
    );
    let seen = events(&env, "careful").await;
    assert_eq!(
        seen.iter()
            .filter(|e| e.reason == "CalendarNotFound")
            .count(),
        1,
        "one Warning, not one per reconcile: {seen:?}"
    );
    delete_calendar(&env, &name).await;
    env.cleanup().await;
}

pub async fn a_window_that_ended_reports_finished(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let ended = Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let begun = ended - jiff::SignedDuration::from_hours(24);
    create(
        &env,
        cronjob(
            "over",
            "* * * * *",
            json!({"notBefore": begun.to_string(), "notAfter": ended.to_string()}),
        ),
    )
    .await;
    let ready = wait_status(&env, "over", SOON, "Ready=False Finished", |s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready" && c.reason == "Finished")
            .cloned()
    })
    .await;
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains("window ended"), "{}", ready.message);
    let st = status(&env, "over").await;
    assert_eq!(st.next_schedule_time, None);
    let list = env.plugin_ok(&["list", "-n", &env.namespace]);
    assert!(list.contains("Finished"), "{list}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = events(&env, "over").await;
    assert!(
        seen.iter().all(|e| e.type_ == "Normal"),
        "no Warning: {seen:?}"
    );
    assert!(env.jobs_of("over").await.is_empty());
    env.cleanup().await;
}
