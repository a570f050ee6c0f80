//! The floor: what the API server takes for N creates from one client (bare Jobs, and the runs
//! kronjob makes of each kind the run measures), before any controller runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde::Serialize;

use kronjob::workload::kinds::Row;

use crate::report::Spread;
use crate::{Args, BoxError, objects, phase, watch};

#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// The kind of the runs kronjob makes that were created, watched as the tool watches a
    /// controller's (`None`: bare Jobs, no watch).
    pub kind: Option<String>,
    pub creates: usize,
    pub in_flight: usize,
    pub seconds: f64,
    pub per_second: f64,
    /// Per create, seconds.
    pub latency: Option<Spread>,
    /// Arrival at the metadata watch after the first create was sent, seconds.
    pub arrived: Option<Spread>,
    /// When the creates began (UTC time of day).
    pub at: String,
}

/// Lock `m`, poisoned or not.
fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `Some(true)` for the end of a watch's initial list, `Some(false)` for an object seen after
/// it, `None` for anything else.
fn mark<K>(e: Result<watcher::Event<K>, watcher::Error>) -> Option<bool> {
    match e {
        Ok(watcher::Event::InitDone) => Some(true),
        Ok(watcher::Event::Apply(_)) => Some(false),
        _ => None,
    }
}

/// A metadata watch on `ns`'s objects of `kind`, recording each new one's arrival (seconds
/// after `started`) in `arrivals`; returns once its initial list is done.
async fn watch_arrivals(
    client: &kube::Client,
    ns: &str,
    kind: &Row,
    started: Arc<Mutex<Instant>>,
    arrivals: Arc<Mutex<Vec<f64>>>,
) -> tokio::task::JoinHandle<()> {
    let (ready, listed) = tokio::sync::oneshot::channel();
    let api = watch::meta_api_of(client, ns, kind);
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).map(mark).boxed();
        let mut ready = Some(ready);
        while let Some(event) = stream.next().await {
            match event {
                Some(true) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Some(false) => {
                    let at = guard(&started).elapsed().as_secs_f64();
                    guard(&arrivals).push(at);
                }
                None => {}
            }
        }
    });
    let _ = listed.await;
    task
}

/// The namespace of a floor: `scale-floor-bare`, else `scale-floor-kronjob-<plural>`.
pub fn namespace(kind: Option<&Row>) -> String {
    kind.map_or("scale-floor-bare".into(), |k| {
        format!("scale-floor-kronjob-{}", k.plural)
    })
}

/// The floor in the fresh namespace [`namespace`]: `--cronjobs` creates, `--in-flight` at a
/// time. With a `kind`, the runs of that kind kronjob makes for its CronJobs' slots (built by
/// its own code: labels, annotation, owner reference) with a metadata watch open on them;
/// else bare Jobs of the same template and no watch.
pub async fn measure(
    client: &kube::Client,
    args: &Args,
    kind: Option<&Row>,
) -> Result<Floor, BoxError> {
    let ns = &namespace(kind);
    objects::create_namespace(client, ns).await?;
    let arrivals: Arc<Mutex<Vec<f64>>> = Arc::default();
    let started = Arc::new(Mutex::new(Instant::now()));
    let watch = match kind {
        Some(kind) => {
            Some(watch_arrivals(client, ns, kind, started.clone(), arrivals.clone()).await)
        }
        None => None,
    };
    let what = kind.map_or("bare Job".into(), |k| format!("kronjob's {}", k.kind));
    eprintln!("floor: {} {what} creates in {ns}", args.cronjobs);
    let at = Timestamp::now().strftime("%H:%M:%S").to_string();
    *guard(&started) = Instant::now();
    let slot = phase::next_minute(Timestamp::now());
    let (n, in_flight) = (args.cronjobs, args.in_flight);
    let latencies = match kind {
        None => {
            let api: Api<Job> = Api::namespaced(client.clone(), ns);
            objects::create_all(&api, n, in_flight, objects::bare_job).await?
        }
        Some(kind) if objects::is_job(kind) => {
            let api: Api<Job> = Api::namespaced(client.clone(), ns);
            objects::create_all(&api, n, in_flight, |i| objects::kronjob_job(ns, i, slot)).await?
        }
        Some(kind) => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &objects::resource(kind));
            objects::create_all(&api, n, in_flight, |i| {
                objects::kronjob_object(ns, i, slot, kind)
            })
            .await?
        }
    };
    let seconds = guard(&started).elapsed().as_secs_f64();
    if let Some(watch) = watch {
        let limit = Instant::now() + Duration::from_secs(10);
        while guard(&arrivals).len() < args.cronjobs && Instant::now() < limit {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        watch.abort();
    }
    Ok(Floor {
        kind: kind.map(|k| k.kind.to_string()),
        creates: args.cronjobs,
        in_flight: args.in_flight,
        seconds,
        per_second: args.cronjobs as f64 / seconds,
        latency: Spread::of(latencies),
        arrived: Spread::of(std::mem::take(&mut *guard(&arrivals))),
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_end_of_the_list_and_new_objects_are_marked() {
        let job = Job::default;
        assert_eq!(mark::<Job>(Ok(watcher::Event::InitDone)), Some(true));
        assert_eq!(mark(Ok(watcher::Event::Apply(job()))), Some(false));
        assert_eq!(mark(Ok(watcher::Event::InitApply(job()))), None);
        assert_eq!(mark(Ok(watcher::Event::Delete(job()))), None);
        assert_eq!(mark::<Job>(Ok(watcher::Event::Init)), None);
    }
}
