//! The report: what was measured, as markdown tables and as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::floor::Floor;
use crate::phase::{Phase, Replica};

/// Nearest-rank percentile of an ascending slice.
fn rank<T: Copy>(sorted: &[T], percent: usize) -> Option<T> {
    let n = sorted.len();
    let r = (percent.min(100) * n).div_ceil(100).max(1);
    sorted.get(r - 1).copied()
}

/// p50, p99 and max of a set of seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        values.sort_by(f64::total_cmp);
        Some(Spread {
            p50: rank(&values, 50)?,
            p99: rank(&values, 99)?,
            max: *values.last()?,
        })
    }

    /// `p50 / p99 / max`, seconds to two digits; `-` for none.
    pub fn show(s: Option<Spread>) -> String {
        s.map_or("-".into(), |s| {
            format!("{:.2} / {:.2} / {:.2}", s.p50, s.p99, s.max)
        })
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub cronjobs: usize,
    pub slots: u32,
    /// kronjob processes (`--replicas`; above 1, sharded).
    pub replicas: usize,
    /// The kronjob binary measured.
    pub kronjob: String,
    pub load_before: String,
    pub load_after: String,
    /// Bare Job creates.
    pub floor_bare: Floor,
    /// The runs kronjob makes, of each kind measured (Jobs first), watched as the slots' are.
    pub floors_watched: Vec<Floor>,
    pub phases: Vec<Phase>,
    /// The start-up scenario, when one was asked for: running Jobs per CronJob before the
    /// start, and how long before the first measured slot kronjob started.
    pub existing_jobs: u32,
    pub start_before_s: Option<u64>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

pub(crate) fn floor_row(out: &mut String, what: &str, f: &Floor) {
    let _ = writeln!(
        out,
        "| {what} | {}: {} creates, {} in flight: {:.2} s ({:.0}/s); per create p50/p99/max {} ms{} |",
        f.at,
        f.creates,
        f.in_flight,
        f.seconds,
        f.per_second,
        f.latency.map_or("-".into(), |l| format!(
            "{:.1} / {:.1} / {:.1}",
            l.p50 * 1e3,
            l.p99 * 1e3,
            l.max * 1e3
        )),
        f.arrived.map_or(String::new(), |a| format!(
            "; arrival at the metadata watch p50/p99/max {} s",
            Spread::show(Some(a))
        )),
    );
}

/// The worst of a phase's slots, rank by rank.
fn worst(p: &Phase) -> Option<Spread> {
    p.slots.iter().filter_map(|s| s.skew).reduce(|a, b| Spread {
        p50: a.p50.max(b.p50),
        p99: a.p99.max(b.p99),
        max: a.max.max(b.max),
    })
}

/// A p99 skew as a multiple of a floor, `-` when either is missing.
fn ratio(skew: Option<Spread>, floor: Option<f64>) -> String {
    match (skew, floor) {
        (Some(s), Some(f)) if f > 0.0 => format!("{:.2}x", s.p99 / f),
        _ => "-".into(),
    }
}

/// A row of the summary table: its title and how a phase's cell is written.
type SummaryRow = (String, Box<dyn Fn(&Phase) -> String>);

/// Per CronJob and slot, the mean over a phase's slots: runs created, status writes, Events
/// (`1.00 / 1.00 / 1.00` when each slot cost one of each).
fn per_cronjob(p: &Phase) -> String {
    let total = (p.cronjobs * p.slots.len()) as f64;
    if total == 0.0 {
        return "-".into();
    }
    let sum = |f: fn(&crate::phase::Slot) -> usize| p.slots.iter().map(f).sum::<usize>() as f64;
    format!(
        "{:.2} / {:.2} / {:.2}",
        sum(|s| s.runs) / total,
        sum(|s| s.status_writes) / total,
        sum(|s| s.events) / total
    )
}

/// A phase's column: its controller and the kind its CronJobs run.
fn column(p: &Phase) -> String {
    format!("{} ({})", p.controller, p.kind)
}

impl Report {
    /// Whether a phase ran more than one replica.
    fn sharded(&self) -> bool {
        self.phases.iter().any(|p| p.replicas.len() > 1)
    }

    fn summary_rows(&self) -> Vec<SummaryRow> {
        let bare = self.floor_bare.seconds;
        let watched: Vec<(Option<String>, Option<f64>)> = self
            .floors_watched
            .iter()
            .map(|f| (f.kind.clone(), f.arrived.map(|a| a.p99)))
            .collect();
        // The watched floor of a phase's own kind.
        let watched = move |p: &Phase| {
            watched
                .iter()
                .find(|(kind, _)| kind.as_deref() == Some(p.kind.as_str()))
                .and_then(|(_, p99)| *p99)
        };
        let sum = if self.sharded() {
            ", sum of the replicas"
        } else {
            ""
        };
        vec![
            (
                "creating the CronJobs, s".into(),
                Box::new(|p| format!("{:.1}", p.create_cronjobs_s)),
            ),
            ("start: /readyz, s".into(), Box::new(|p| opt(p.ready_s, 1))),
            (
                "start: every CronJob reconciled (first status write), s".into(),
                Box::new(|p| opt(p.startup_s, 1)),
            ),
            (
                format!("RSS / CPU when every CronJob was reconciled, MiB / s{sum}"),
                Box::new(|p| match p.startup_s {
                    Some(_) => format!("{:.0} / {:.1}", p.at_startup.rss_mib, p.at_startup.cpu_s),
                    None => "-".into(),
                }),
            ),
            (
                "skew (watch arrival) p50/p99/max, s (worst slot)".into(),
                Box::new(|p| Spread::show(worst(p))),
            ),
            (
                "p99 skew / bare floor time".into(),
                Box::new(move |p| ratio(worst(p), Some(bare))),
            ),
            (
                "p99 skew / watched floor p99 arrival (of its kind)".into(),
                Box::new(move |p| ratio(worst(p), watched(p))),
            ),
            (
                "runs missing / duplicate (all slots)".into(),
                Box::new(|p| {
                    format!(
                        "{} / {}",
                        p.slots.iter().map(|s| s.missing).sum::<usize>(),
                        p.slots.iter().map(|s| s.duplicates).sum::<usize>()
                    )
                }),
            ),
            (
                "runs at the end".into(),
                Box::new(|p| p.runs_at_end.to_string()),
            ),
            (
                "per CronJob and slot: runs / status writes / Events (mean)".into(),
                Box::new(per_cronjob),
            ),
            (
                format!("RSS after each slot, MiB{sum}"),
                Box::new(|p| {
                    p.slots
                        .iter()
                        .map(|s| format!("{:.0}", s.process.rss_mib))
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
            ),
            (
                format!("RSS peak (VmHWM), MiB{sum}"),
                Box::new(|p| format!("{:.0}", p.peak_rss_mib)),
            ),
            (
                format!("CPU over the run, s{sum}"),
                Box::new(|p| format!("{:.1}", p.cpu_s)),
            ),
        ]
    }

    fn summary_table(&self, out: &mut String) {
        let names: Vec<String> = self.phases.iter().map(column).collect();
        let _ = writeln!(out, "| | {} |", names.join(" | "));
        let _ = writeln!(out, "|---|{}", "---|".repeat(self.phases.len()));
        for (what, f) in self.summary_rows() {
            let cells: Vec<String> = self.phases.iter().map(f.as_ref()).collect();
            let _ = writeln!(out, "| {what} | {} |", cells.join(" | "));
        }
    }

    fn slot_table(&self, out: &mut String) {
        let sum = if self.sharded() { " (sum)" } else { "" };
        let _ = writeln!(
            out,
            "\n| controller | slot | runs | missing | duplicate | skew p50/p99/max, s | run to status write p50/p99/max, s | status writes | Events | RSS, MiB{sum} | CPU, s{sum} |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for p in &self.phases {
            for s in &p.slots {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.1} |",
                    column(p),
                    s.slot.strftime("%H:%M"),
                    s.runs,
                    s.missing,
                    s.duplicates,
                    Spread::show(s.skew),
                    Spread::show(s.recorded),
                    s.status_writes,
                    s.events,
                    s.process.rss_mib,
                    s.process.cpu_s,
                );
            }
        }
    }

    /// Markdown: the run, the floor, a summary per controller, every slot, and the replicas.
    pub fn tables(&self) -> String {
        let mut out = String::new();
        let replicas = if self.replicas > 1 {
            format!(", {} kronjob replicas (--sharding)", self.replicas)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{} CronJobs on `* * * * *`, {} slots{replicas}, kronjob from {}; load average {} at the start, {} at the end\n",
            self.cronjobs, self.slots, self.kronjob, self.load_before, self.load_after
        );
        if self.existing_jobs > 0 || self.start_before_s.is_some() {
            let _ = writeln!(
                out,
                "start-up scenario: {} running Jobs per CronJob before kronjob started, {}\n",
                self.existing_jobs,
                self.start_before_s
                    .map_or("at once after the CronJobs were created".into(), |s| {
                        format!("{s} s before the first measured slot")
                    })
            );
        }
        let _ = writeln!(out, "| floor | |\n|---|---|");
        floor_row(&mut out, "bare Jobs", &self.floor_bare);
        for f in &self.floors_watched {
            let kind = f.kind.as_deref().unwrap_or("Job");
            let what = format!("kronjob's {kind}s, watched as the controller's are");
            floor_row(&mut out, &what, f);
        }
        out.push('\n');
        self.summary_table(&mut out);
        for (p, fault) in self
            .phases
            .iter()
            .filter_map(|p| Some((p, p.fault.as_ref()?)))
        {
            let _ = writeln!(out, "\n{} fault: {}", p.controller, fault.show());
        }
        for p in &self.phases {
            if let Some(f) = &p.failover {
                let _ = writeln!(out, "\n{} failover: {}", p.controller, f.show());
            }
            for (i, w) in p.writes.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{} slot {}: writes per CronJob {}",
                    p.controller,
                    i + 1,
                    crate::failover::show_writes(w)
                );
            }
        }
        self.slot_table(&mut out);
        for p in self.phases.iter().filter(|p| p.replicas.len() > 1) {
            replica_table(&mut out, &column(p), &p.replicas);
        }
        out
    }
}

/// Per replica of a phase: RSS after each slot, peak RSS, CPU time and the CronJobs it
/// schedules; then their sums.
fn replica_table(out: &mut String, controller: &str, replicas: &[Replica]) {
    let _ = writeln!(
        out,
        "\n| {controller} replica | RSS after each slot, MiB | RSS peak (VmHWM), MiB | CPU over the run, s | CronJobs scheduled (kronjob_shard_cronjobs) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    let slots = |rss: Vec<f64>| -> String {
        rss.iter()
            .map(|m| format!("{m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for r in replicas {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} | {} |",
            r.name,
            slots(r.slots.iter().map(|s| s.rss_mib).collect()),
            r.peak_rss_mib,
            r.cpu_s,
            opt(r.shard_cronjobs, 0),
        );
    }
    let slot_count = replicas.iter().map(|r| r.slots.len()).max().unwrap_or(0);
    let slot_sums = (0..slot_count)
        .map(|i| {
            replicas
                .iter()
                .filter_map(|r| r.slots.get(i))
                .map(|s| s.rss_mib)
                .sum()
        })
        .collect();
    let shard_sum = replicas
        .iter()
        .map(|r| r.shard_cronjobs)
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.iter().sum());
    let _ = writeln!(
        out,
        "| sum | {} | {:.1} | {:.1} | {} |",
        slots(slot_sums),
        replicas.iter().map(|r| r.peak_rss_mib).sum::<f64>(),
        replicas.iter().map(|r| r.cpu_s).sum::<f64>(),
        opt(shard_sum, 0),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::ProcSample;

    #[test]
    fn nearest_rank_and_spread() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Spread::of(v).expect("values");
        assert_eq!((s.p50, s.p99, s.max), (50.0, 99.0, 100.0));
        assert!(Spread::of(Vec::new()).is_none());
        assert_eq!(rank(&[3.0], 99), Some(3.0));
        assert_eq!(Spread::show(None), "-");
    }

    #[test]
    fn a_floor_row_shows_the_watch_arrival_when_one_was_measured() {
        let spread = |p50, p99, max| Some(Spread { p50, p99, max });
        let mut floor = Floor {
            kind: None,
            creates: 10_000,
            in_flight: 32,
            seconds: 6.5,
            per_second: 1538.46,
            latency: spread(0.0171, 0.0556, 0.0759),
            arrived: None,
            at: "15:50:01".into(),
        };
        let mut out = String::new();
        floor_row(&mut out, "bare", &floor);
        assert_eq!(
            out,
            "| bare | 15:50:01: 10000 creates, 32 in flight: 6.50 s (1538/s); per create p50/p99/max 17.1 / 55.6 / 75.9 ms |\n"
        );
        floor.arrived = spread(3.45, 6.77, 6.81);
        let mut out = String::new();
        floor_row(&mut out, "watched", &floor);
        assert!(out.ends_with(
            "75.9 ms; arrival at the metadata watch p50/p99/max 3.45 / 6.77 / 6.81 s |\n"
        ));
    }

    #[test]
    fn a_skew_against_a_floor() {
        let skew = Some(Spread {
            p50: 4.0,
            p99: 9.0,
            max: 9.5,
        });
        assert_eq!(ratio(skew, Some(6.0)), "1.50x");
        assert_eq!(ratio(skew, None), "-");
        assert_eq!(ratio(skew, Some(0.0)), "-");
        assert_eq!(ratio(None, Some(6.0)), "-");
    }

    fn slot(runs: usize, status_writes: usize, events: usize) -> crate::phase::Slot {
        crate::phase::Slot {
            slot: "2026-01-01T00:01:00Z".parse().expect("time"),
            runs,
            missing: 0,
            duplicates: 0,
            skew: None,
            recorded: None,
            status_writes,
            events,
            process: ProcSample::default(),
        }
    }

    #[test]
    fn a_phases_writes_per_cronjob_and_slot() {
        let mut phase = Phase {
            controller: "kronjob".into(),
            kind: "JobSet".into(),
            cronjobs: 2,
            create_cronjobs_s: 0.0,
            ready_s: None,
            startup_s: None,
            at_startup: ProcSample::default(),
            slots: vec![slot(2, 2, 2), slot(2, 3, 1)],
            peak_rss_mib: 0.0,
            cpu_s: 0.0,
            replicas: Vec::new(),
            runs_at_end: 4,
            fault: None,
            failover: None,
            writes: Vec::new(),
        };
        assert_eq!(column(&phase), "kronjob (JobSet)");
        assert_eq!(per_cronjob(&phase), "1.00 / 1.25 / 0.75");
        phase.slots.clear();
        assert_eq!(per_cronjob(&phase), "-");
    }

    fn replica(name: &str, rss: &[f64], peak: f64, cpu: f64, shard: Option<f64>) -> Replica {
        Replica {
            name: name.into(),
            slots: rss
                .iter()
                .map(|&rss_mib| ProcSample {
                    rss_mib,
                    hwm_mib: peak,
                    cpu_s: cpu,
                })
                .collect(),
            peak_rss_mib: peak,
            cpu_s: cpu,
            shard_cronjobs: shard,
        }
    }

    #[test]
    fn the_replica_table_has_a_row_each_and_their_sums() {
        let replicas = [
            replica("kronjob-0", &[40.2, 45.0], 52.1, 10.3, Some(4990.0)),
            replica("kronjob-1", &[38.0, 44.4], 50.0, 9.5, Some(5010.0)),
        ];
        let mut out = String::new();
        replica_table(&mut out, "kronjob", &replicas);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("| kronjob replica | RSS after each slot"));
        assert_eq!(lines[3], "| kronjob-0 | 40, 45 | 52.1 | 10.3 | 4990 |");
        assert_eq!(lines[4], "| kronjob-1 | 38, 44 | 50.0 | 9.5 | 5010 |");
        assert_eq!(lines[5], "| sum | 78, 89 | 102.1 | 19.8 | 10000 |");
        // A replica whose gauge could not be read leaves the sum unknown.
        let mut out = String::new();
        replica_table(
            &mut out,
            "kronjob",
            &[
                replica("kronjob-0", &[40.0], 52.0, 1.0, Some(1.0)),
                replica("kronjob-1", &[40.0], 52.0, 1.0, None),
            ],
        );
        assert!(
            out.lines()
                .any(|l| l == "| kronjob-1 | 40 | 52.0 | 1.0 | - |")
        );
        assert!(out.lines().any(|l| l == "| sum | 80 | 104.0 | 2.0 | - |"));
    }
}
