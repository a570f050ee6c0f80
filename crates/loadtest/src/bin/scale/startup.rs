//! The start-up scenario (`--existing-jobs`, `--start-before`): a manager that starts on a
//! cluster where its CronJobs already have running Jobs (left by a previous manager, as after
//! a restart or a replacement), shortly before a slot.
//!
//! The slot the manager starts before is chosen once the CronJobs exist, far enough ahead for
//! the Jobs to be created first ([`LEAD`]). Each CronJob gets `--existing-jobs` running Jobs,
//! the ones kronjob makes (built by its own code, owned by the CronJob's real UID), for the
//! slots just before that one, so no slot between the CronJob's creation and the start lacks
//! its Job (none is run late at the start); then the manager starts `--start-before` seconds
//! before the slot: the start-up (every CronJob's first status write, with its running Jobs in
//! `active`) and that slot's skew are measured in one run.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};

use kronjob::api::CronJob;

use crate::phase::{next_minute, secs};
use crate::{Args, BoxError};

/// The least time from choosing the first slot to it: the CronJobs' Jobs are created meanwhile
/// (30,000 take 20-40 s on a shared 2-core machine), and the manager starts before it.
const LEAD: SignedDuration = SignedDuration::from_secs(90);

/// With `--start-before`: the slot the manager will start before, the first minute boundary
/// at least [`LEAD`] from now. Without: `None`.
pub fn first_slot(args: &Args) -> Result<Option<Timestamp>, BoxError> {
    if args.start_before.is_none() {
        return Ok(None);
    }
    Ok(Some(next_minute(Timestamp::now().checked_add(LEAD)?)))
}

/// Create `args.existing_jobs` running Jobs for each CronJob in `ns`, for the slots before
/// `before` (the first measured slot, else the minute the CronJobs were created in, `created`):
/// how long it took, seconds.
pub async fn existing_jobs(
    client: &kube::Client,
    ns: &str,
    args: &Args,
    (before, created): (Option<Timestamp>, Timestamp),
) -> Result<f64, BoxError> {
    if args.existing_jobs == 0 {
        return Ok(0.0);
    }
    let started = Timestamp::now();
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let mut owners = Vec::with_capacity(args.cronjobs);
    let mut params = ListParams::default().limit(1000);
    loop {
        let page = cronjobs.list(&params).await?;
        owners.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    let last = match before {
        Some(slot) => slot.checked_sub(SignedDuration::from_mins(1))?,
        None => Timestamp::from_second(created.as_second().div_euclid(60) * 60)?,
    };
    let slots: Vec<Timestamp> = (0..args.existing_jobs)
        .map(|k| last.checked_sub(SignedDuration::from_mins(i64::from(k))))
        .collect::<Result<_, _>>()?;
    let jobs: Vec<Job> = owners
        .iter()
        .flat_map(|cj| slots.iter().map(move |slot| (cj, *slot)))
        .filter_map(|(cj, slot)| {
            kronjob::workload::for_slot(cj, slot, &jiff::tz::TimeZone::UTC, None)
                .and_then(kronjob::workload::NewWorkload::into_job)
        })
        .collect();
    let want = owners.len() * slots.len();
    if owners.len() != args.cronjobs {
        return Err(format!("listed {} of {} CronJobs", owners.len(), args.cronjobs).into());
    }
    if jobs.len() != want {
        return Err(format!("built {} of {want} existing Jobs", jobs.len()).into());
    }
    eprintln!("creating {want} existing Jobs in {ns}");
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    futures::stream::iter(jobs)
        .map(|job| {
            let (api, pp) = (&api, &pp);
            async move { api.create(pp, &job).await.map(|_| ()) }
        })
        .buffer_unordered(args.in_flight.max(1))
        .try_collect::<()>()
        .await?;
    Ok(secs(Timestamp::now().duration_since(started)))
}

/// With `--start-before S`: wait until S seconds before `slot` (from [`first_slot`]); an
/// error if that time has passed (the Jobs took longer than [`LEAD`] allows).
pub async fn wait_to_start(args: &Args, slot: Option<Timestamp>) -> Result<(), BoxError> {
    let (Some(before), Some(slot)) = (args.start_before, slot) else {
        return Ok(());
    };
    let start = slot.checked_sub(SignedDuration::from_secs(i64::try_from(before)?))?;
    let wait = Duration::try_from(start.duration_since(Timestamp::now()))
        .map_err(|_| format!("too late to start {before} s before the slot {slot}"))?;
    eprintln!("starting the manager {before} s before the slot {slot}");
    tokio::time::sleep(wait).await;
    Ok(())
}
