//! `kubectl kronjob next`: the next run times of a CronJob (`next NAME`, read from the cluster)
//! or of bare schedule expressions (`next --schedule EXPR`, repeated for several, no cluster
//! needed).

use std::io::Write;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kube::{Api, Client};

use super::CliError;
use super::cluster::KubeArgs;
use super::table::Table;
use crate::api::{Calendar, CronJob, ScheduleFieldsError};
use crate::schedule::exclusions::{
    Exclusions, Grid, Next, Skip, Source, Verdict, Window, next_allowed, verdict,
};
use crate::schedule::{
    ListError, ParseError, Schedule, SlotQuery, ZoneError, scheduled_at, slots, time_zone,
};

/// Print the next times a CronJob, or a schedule, fires.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["cronjob", "schedule"])))]
pub struct NextArgs {
    /// Name of the CronJob: its schedule, time zone and `H` key come from the cluster; times
    /// print in its zone and in UTC.
    cronjob: Option<String>,
    /// A schedule instead of a CronJob, e.g. "*/15 * * * *", "@daily", "@every 90m",
    /// "H H * * *"; times print one RFC 3339 UTC timestamp per line. Repeat it for several
    /// schedules, as in `spec.schedules`: their times merged, each once.
    #[arg(long, value_name = "EXPR")]
    schedule: Vec<String>,
    /// With --schedule: the IANA time zone it is evaluated in (default UTC).
    #[arg(long, conflicts_with = "cronjob")]
    time_zone: Option<String>,
    /// Start from this instant (RFC 3339) instead of now; printed times are strictly after it.
    #[arg(long)]
    from: Option<String>,
    /// How many times to print.
    #[arg(long, default_value_t = 5)]
    count: usize,
    /// With a CronJob: also list the slots its calendars skip (each counts towards --count),
    /// with the calendar and the date that skip them.
    #[arg(long, conflicts_with = "schedule")]
    show_skipped: bool,
    /// With --schedule: NAMESPACE/NAME of the CronJob, the key `H` hashes (required when the
    /// schedule uses `H`).
    #[arg(long, conflicts_with = "cronjob")]
    name: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
}

impl NextArgs {
    /// The CronJob named, when the times are those of a CronJob in the cluster.
    pub fn cronjob(&self) -> Option<&str> {
        self.cronjob.as_deref()
    }

    /// The connection flags.
    pub fn kube(&self) -> &KubeArgs {
        &self.kube
    }
}

/// Why `kubectl kronjob next` failed. `Display` is the message for stderr.
#[derive(thiserror::Error, Debug)]
pub enum NextError {
    /// The schedule does not parse.
    #[error(transparent)]
    Schedule(#[from] ParseError),
    /// One of several schedules does not parse, or they cannot be combined.
    #[error(transparent)]
    Schedules(ListError),
    /// The CronJob has neither `schedule` nor `schedules`, or both.
    #[error(transparent)]
    Fields(#[from] ScheduleFieldsError),
    /// The time zone is unknown or not allowed.
    #[error(transparent)]
    Zone(#[from] ZoneError),
    /// `--from` is not an RFC 3339 instant.
    #[error("invalid --from {value:?}: {reason}")]
    From {
        /// The value given.
        value: String,
        /// The parser's reason.
        reason: String,
    },
    /// The schedule uses `H` but no `--name` was given.
    #[error("schedule {0} uses H: pass --name NAMESPACE/NAME to pick its times")]
    MissingName(String),
    /// The schedule parses but can never fire (e.g. "0 0 30 2 *").
    #[error("schedule {0} never fires")]
    NeverFires(String),
    /// Neither a CronJob nor `--schedule` was given.
    #[error("name a CronJob, or pass --schedule EXPR")]
    NothingToDo,
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// Parse the expressions of a schedule: one is reported as `spec.schedule` is, several name the
/// one at fault.
pub fn parse_schedule(exprs: &[String], key: &str) -> Result<Schedule, NextError> {
    match exprs {
        [one] => Ok(Schedule::parse(one, key)?),
        several => Schedule::parse_each(several, key).map_err(NextError::Schedules),
    }
}

impl From<NextError> for CliError {
    fn from(error: NextError) -> Self {
        match error {
            NextError::Io(e) => CliError::Io(e),
            NextError::From { .. } | NextError::NothingToDo => CliError::Usage(error.to_string()),
            other => CliError::Failed(other.to_string()),
        }
    }
}

/// Run `kubectl kronjob next --schedule EXPR`, writing to `out`; `now` is used when `--from` is
/// absent.
pub fn run(args: &NextArgs, now: Timestamp, out: &mut dyn Write) -> Result<(), NextError> {
    if args.schedule.is_empty() {
        return Err(NextError::NothingToDo);
    }
    let key = args.name.as_deref().unwrap_or("");
    let schedule = parse_schedule(&args.schedule, key)?;
    if schedule.uses_hash() && args.name.is_none() {
        return Err(NextError::MissingName(schedule.describe()));
    }
    let tz = time_zone(args.time_zone.as_deref())?;
    let from = start(args, now)?;
    for n in next_times(&schedule, &tz, from, args.count)? {
        writeln!(out, "{}", scheduled_at(n, &TimeZone::UTC))?;
    }
    Ok(())
}

/// The days `cj`'s `spec.exclusions` and the Calendars it names exclude, as the cluster holds
/// them, and the names of the Calendars it names that do not exist.
pub async fn exclusions_of(
    client: Client,
    cj: &CronJob,
) -> Result<(Exclusions, Vec<String>), kube::Error> {
    let calendars = Api::<Calendar>::all(client);
    let mut excluded = Exclusions::none();
    if let Some(inline) = &cj.spec.exclusions {
        excluded = excluded.with(Source::Inline, inline.days());
    }
    let mut missing = Vec::new();
    for calendar in cj.spec.calendars.iter().flatten() {
        match calendars.get_opt(calendar).await? {
            Some(found) => {
                excluded = excluded.with(Source::Calendar(calendar.clone()), found.spec.days());
            }
            None => missing.push(calendar.clone()),
        }
    }
    Ok((excluded, missing))
}

/// Run `kubectl kronjob next NAME`: the CronJob's next runs in its zone and in UTC.
pub async fn run_cronjob(
    client: Client,
    args: &NextArgs,
    now: Timestamp,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let Some(name) = args.cronjob.as_deref() else {
        return Err(NextError::NothingToDo.into());
    };
    let from = start(args, now)?;
    let namespace = args.kube.namespace(&client);
    let cj = Api::<CronJob>::namespaced(client.clone(), &namespace)
        .get(name)
        .await?;
    let zone_name = cj.spec.time_zone.as_deref();
    let exprs = cj.spec.schedule_exprs().map_err(NextError::from)?;
    let schedule = parse_schedule(exprs, &hash_key(&cj))?;
    let tz = time_zone(zone_name).map_err(NextError::from)?;
    let (excluded, missing) = exclusions_of(client, &cj).await?;
    for calendar in missing {
        writeln!(
            err,
            "warning: Calendar {calendar} not found: no slot of cronjob.batch.kronjob.dev/{name} runs until it exists"
        )?;
    }
    let window = cj.spec.window();
    let first = cronjob_times(&cj, &schedule, &tz, from, 1)?;
    let rows = allowed_times(
        &schedule,
        &tz,
        first.first().copied(),
        &excluded,
        &window,
        args.count,
        args.show_skipped,
    );
    if cj.spec.is_suspended() {
        writeln!(
            err,
            "warning: cronjob.batch.kronjob.dev/{name} is suspended: it runs at these times only once resumed"
        )?;
    }
    if rows.is_empty() && window.not_after.is_some_and(|end| end < from) {
        writeln!(
            err,
            "cronjob.batch.kronjob.dev/{name} has finished: its window ended at {}",
            window.not_after.unwrap_or(from)
        )?;
    }
    let table = if args.show_skipped {
        skipped_table(&rows, zone_name.unwrap_or("UTC"), &tz)
    } else {
        let times: Vec<Timestamp> = rows.iter().map(|(t, _)| *t).collect();
        zoned_table(&times, zone_name.unwrap_or("UTC"), &tz)
    };
    out.write_all(table.render().as_bytes())?;
    Ok(())
}

/// The next `count` slots of `schedule` from `first` (a slot) that the calendars and the
/// window allow; with `show_skipped`, the slots the calendars skip too, with why (each counts).
/// Slots before `notBefore` are passed over, and none after `notAfter` is given.
pub fn allowed_times(
    schedule: &Schedule,
    tz: &TimeZone,
    first: Option<Timestamp>,
    excluded: &Exclusions,
    window: &Window,
    count: usize,
    show_skipped: bool,
) -> Vec<(Timestamp, Option<Skip>)> {
    let mut rows = Vec::new();
    let mut candidate = first;
    let grid = Grid::of(schedule, first.unwrap_or_default());
    while rows.len() < count {
        let Some(slot) = candidate else {
            break;
        };
        if show_skipped {
            if window.ended_by(slot) {
                break;
            }
            match verdict(slot, excluded, window, tz) {
                Verdict::Allowed => rows.push((slot, None)),
                Verdict::Excluded(skip) => rows.push((slot, Some(skip))),
                Verdict::OutsideWindow => {
                    candidate = window.not_before.and_then(|b| grid.at_or_after(b, tz));
                    continue;
                }
            }
            candidate = grid.after(slot, tz);
            continue;
        }
        match next_allowed(grid, slot, excluded, window, tz) {
            Next::At(t) => {
                rows.push((t, None));
                candidate = grid.after(t, tz);
            }
            Next::WindowEnded | Next::GaveUp => break,
        }
    }
    rows
}

/// `--from`, else `now`.
fn start(args: &NextArgs, now: Timestamp) -> Result<Timestamp, NextError> {
    match &args.from {
        Some(s) => s.parse::<Timestamp>().map_err(|e| NextError::From {
            value: s.clone(),
            reason: e.to_string(),
        }),
        None => Ok(now),
    }
}

/// The first `count` times `schedule` fires strictly after `from`.
pub fn next_times(
    schedule: &Schedule,
    tz: &TimeZone,
    from: Timestamp,
    count: usize,
) -> Result<Vec<Timestamp>, NextError> {
    if count > 0 && !schedule.ever_fires() {
        return Err(NextError::NeverFires(schedule.describe()));
    }
    let mut times = Vec::with_capacity(count);
    let mut t = from;
    while times.len() < count {
        let Some(n) = schedule.next_after(t, tz) else {
            break;
        };
        times.push(n);
        t = n;
    }
    Ok(times)
}

/// The first `count` runs of `cj` strictly after `from`. As [`next_times`], except that an
/// `@every` grid starts where the controller starts it: at `status.lastScheduleTime`, else at
/// the creation time. For any other schedule the times after `from` are the schedule's, even
/// when `from` is before the CronJob's last run or its creation (`next --from` may ask about
/// any time).
pub fn cronjob_times(
    cj: &CronJob,
    schedule: &Schedule,
    tz: &TimeZone,
    from: Timestamp,
    count: usize,
) -> Result<Vec<Timestamp>, NextError> {
    if schedule.every_seconds().is_none() {
        return next_times(schedule, tz, from, count);
    }
    let query = SlotQuery {
        schedule,
        tz,
        last_schedule_time: cj
            .status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0),
        creation_timestamp: cj
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(from, |t| t.0),
        starting_deadline_seconds: None,
        now: from,
    };
    let first = match slots(&query) {
        Ok(slots) => slots.next,
        Err(_) => return Err(NextError::NeverFires(schedule.describe())),
    };
    let Some(first) = first.filter(|_| count > 0) else {
        return Ok(Vec::new());
    };
    let mut times = vec![first];
    times.extend(next_times(schedule, tz, first, count - 1)?);
    Ok(times)
}

/// The key `H` hashes for a CronJob: `namespace/name`.
pub fn hash_key(cj: &CronJob) -> String {
    format!(
        "{}/{}",
        cj.metadata.namespace.as_deref().unwrap_or_default(),
        cj.metadata.name.as_deref().unwrap_or_default()
    )
}

/// As [`zoned_table`], with a column SKIPPED naming the calendar and the date that skip a slot
/// (empty for a slot that runs).
pub fn skipped_table(rows: &[(Timestamp, Option<Skip>)], zone_name: &str, tz: &TimeZone) -> Table {
    let mut table = Table::verbatim(&[zone_name, "UTC", "SKIPPED"]);
    for (t, skip) in rows {
        let why = skip.as_ref().map_or(String::new(), |s| {
            format!("{} excludes {}", s.source, s.date)
        });
        table.push(vec![
            scheduled_at(*t, tz),
            scheduled_at(*t, &TimeZone::UTC),
            why,
        ]);
    }
    table
}

/// The times in the zone `zone_name` and in UTC, one column each (one column when the zone is
/// UTC itself).
pub fn zoned_table(times: &[Timestamp], zone_name: &str, tz: &TimeZone) -> Table {
    let utc_only = zone_name == "UTC";
    let mut table = if utc_only {
        Table::verbatim(&["UTC"])
    } else {
        Table::verbatim(&[zone_name, "UTC"])
    };
    for t in times {
        let utc = scheduled_at(*t, &TimeZone::UTC);
        table.push(if utc_only {
            vec![utc]
        } else {
            vec![scheduled_at(*t, tz), utc]
        });
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::fixtures::t;

    #[test]
    fn zoned_table_shows_the_zone_and_utc() {
        let tz = time_zone(Some("America/New_York")).expect("zone");
        let schedule = Schedule::parse("30 2 * * *", "ns/cj").expect("parses");
        // Across the spring-forward gap: 02:30 does not exist on 2024-03-10 and runs at 03:00.
        let times = next_times(&schedule, &tz, t("2024-03-09T12:00:00Z"), 2).expect("times");
        assert_eq!(
            zoned_table(&times, "America/New_York", &tz).render(),
            "\
America/New_York            UTC
2024-03-10T03:00:00-04:00   2024-03-10T07:00:00Z
2024-03-11T02:30:00-04:00   2024-03-11T06:30:00Z
"
        );
        let utc =
            next_times(&schedule, &TimeZone::UTC, t("2024-03-09T12:00:00Z"), 1).expect("times");
        assert_eq!(
            zoned_table(&utc, "UTC", &TimeZone::UTC).render(),
            "UTC\n2024-03-10T02:30:00Z\n"
        );
    }

    #[test]
    fn allowed_times_skip_excluded_days_or_show_them_and_stop_at_the_window() {
        let tz = time_zone(Some("Europe/Berlin")).expect("zone");
        let daily = Schedule::parse("0 6 * * *", "ns/cj").expect("parses");
        let days = crate::schedule::exclusions::Days::of(
            &["2026-12-23".to_string()],
            [("2026-12-24", "2026-12-26")],
            &[],
        );
        let excluded = Exclusions::none().with(Source::Calendar("holidays".into()), days);
        let first = Some(t("2026-12-22T05:00:00Z"));
        let open = Window::default();
        let shown = |rows: Vec<(Timestamp, Option<Skip>)>| -> Vec<String> {
            rows.iter()
                .map(|(at, skip)| match skip {
                    Some(s) => format!("{at} {} {}", s.source, s.date),
                    None => at.to_string(),
                })
                .collect()
        };
        let runs = allowed_times(&daily, &tz, first, &excluded, &open, 2, false);
        assert_eq!(
            shown(runs),
            ["2026-12-22T05:00:00Z", "2026-12-27T05:00:00Z"]
        );
        let all = allowed_times(&daily, &tz, first, &excluded, &open, 3, true);
        assert_eq!(
            shown(all),
            [
                "2026-12-22T05:00:00Z",
                "2026-12-23T05:00:00Z Calendar holidays 2026-12-23",
                "2026-12-24T05:00:00Z Calendar holidays 2026-12-24",
            ]
        );
        let window = Window {
            not_before: Some(t("2026-12-27T00:00:00Z")),
            not_after: Some(t("2026-12-28T05:00:00Z")),
        };
        for show in [false, true] {
            let bounded = allowed_times(&daily, &tz, first, &excluded, &window, 5, show);
            assert_eq!(
                shown(bounded),
                ["2026-12-27T05:00:00Z", "2026-12-28T05:00:00Z"],
                "show_skipped {show}"
            );
        }
    }

    #[test]
    fn next_times_stops_at_count_and_refuses_schedules_that_never_fire() {
        let every = Schedule::parse("@every 1h", "").expect("parses");
        let times = next_times(&every, &TimeZone::UTC, t("2024-01-01T00:00:00Z"), 3).expect("ok");
        assert_eq!(times.len(), 3);
        assert!(
            next_times(&every, &TimeZone::UTC, t("2024-01-01T00:00:00Z"), 0)
                .expect("ok")
                .is_empty()
        );
        let never = Schedule::parse("0 0 30 2 *", "").expect("parses");
        let err = next_times(&never, &TimeZone::UTC, t("2024-01-01T00:00:00Z"), 1)
            .expect_err("never fires");
        assert_eq!(err.to_string(), "schedule \"0 0 30 2 *\" never fires");
    }
}
