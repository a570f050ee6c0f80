//! Watches: raw event streams, selectors, bookmarks, 410 Expired, kube's watcher, outages.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{job, job_json, mp, pp};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use kronjob_apisim::{ApiSim, CostModel};
use kube::api::{Api, DeleteParams, Patch, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;

/// A free simulation without the Job controller, whose status writes would be extra events.
fn setup() -> (ApiSim, Api<Job>) {
    let sim = ApiSim::new(CostModel::free()).with_job_controller(false);
    let jobs = Api::namespaced(sim.client(), "default");
    (sim, jobs)
}

/// The next item, failing after 10 s (virtual time under pause).
async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("timed out")
        .expect("stream ended")
}

fn describe(event: &WatchEvent<Job>) -> String {
    match event {
        WatchEvent::Added(j) => format!("ADDED {}", j.metadata.name.as_deref().unwrap()),
        WatchEvent::Modified(j) => format!("MODIFIED {}", j.metadata.name.as_deref().unwrap()),
        WatchEvent::Deleted(j) => format!("DELETED {}", j.metadata.name.as_deref().unwrap()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn raw_watch_sees_added_modified_deleted_in_order() {
    let (sim, jobs) = setup();
    sim.insert(job_json("before", json!({})));
    let from = sim.resource_version().to_string();
    let mut stream = jobs
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();
    jobs.create(&pp(), &job("a")).await.unwrap();
    jobs.patch(
        "a",
        &mp(),
        &Patch::Merge(json!({"spec": {"parallelism": 2}})),
    )
    .await
    .unwrap();
    jobs.delete("a", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut versions = Vec::new();
    for _ in 0..3 {
        let event = next(&mut stream).await.unwrap();
        if let WatchEvent::Added(j) | WatchEvent::Modified(j) | WatchEvent::Deleted(j) = &event {
            versions.push(
                j.metadata
                    .resource_version
                    .clone()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
            );
        }
        seen.push(describe(&event));
    }
    assert_eq!(seen, ["ADDED a", "MODIFIED a", "DELETED a"]);
    assert_eq!(versions, [2, 3, 4]);

    // From resourceVersion 0: the current objects first.
    let mut stream = jobs
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next(&mut stream).await.unwrap()), "ADDED before");
}

#[tokio::test]
async fn watch_label_selector_transitions() {
    let (sim, jobs) = setup();
    let params = WatchParams::default().labels("app=web").disable_bookmarks();
    let mut stream = jobs
        .watch(&params, &sim.resource_version().to_string())
        .await
        .unwrap()
        .boxed();
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"app": v}}}));
    jobs.create(&pp(), &job("a")).await.unwrap();
    jobs.patch("a", &mp(), &label("web")).await.unwrap();
    jobs.patch(
        "a",
        &mp(),
        &Patch::Merge(json!({"spec": {"parallelism": 2}})),
    )
    .await
    .unwrap();
    jobs.patch("a", &mp(), &label("db")).await.unwrap();
    jobs.patch(
        "a",
        &mp(),
        &Patch::Merge(json!({"spec": {"parallelism": 3}})),
    )
    .await
    .unwrap();
    jobs.patch("a", &mp(), &label("web")).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(describe(&next(&mut stream).await.unwrap()));
    }
    assert_eq!(seen, ["ADDED a", "MODIFIED a", "DELETED a", "ADDED a"]);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_initial_events_and_timeout() {
    let (sim, jobs) = setup();
    sim.insert(job_json("a", json!({})));
    sim.insert(job_json("b", json!({})));
    let started = tokio::time::Instant::now();
    let params = WatchParams::streaming_lists().timeout(3);
    let events: Vec<_> = jobs
        .watch(&params, "")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        started.elapsed().as_secs(),
        3,
        "timeoutSeconds ends the stream"
    );
    let seen: Vec<String> = events.iter().map(describe).collect();
    assert_eq!(&seen[..3], ["ADDED a", "ADDED b", "BOOKMARK 2"]);
    let WatchEvent::Bookmark(end) = &events[2] else {
        unreachable!()
    };
    assert_eq!(
        end.metadata.annotations["k8s.io/initial-events-end"],
        "true"
    );
    assert!(
        seen.len() >= 4 && seen[3..].iter().all(|s| s == "BOOKMARK 2"),
        "idle bookmarks: {seen:?}"
    );

    // Without allowWatchBookmarks, no bookmarks.
    let params = WatchParams::default().disable_bookmarks().timeout(3);
    let events: Vec<_> = jobs
        .watch(&params, "2")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(events.is_empty());
}

#[tokio::test]
async fn expired_resource_version_gets_410() {
    let sim = ApiSim::new(CostModel::free())
        .with_event_capacity(3)
        .with_job_controller(false);
    let jobs: Api<Job> = Api::namespaced(sim.client(), "default");
    for i in 0..5 {
        sim.insert(job_json(&format!("j{i}"), json!({})));
    }
    let mut stream = jobs
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(
        stream.next().await.is_none(),
        "the stream ends after the error"
    );
    // Version 2 is still covered: events 3, 4, 5 are retained.
    let mut stream = jobs
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next(&mut stream).await.unwrap()), "ADDED j2");
}

fn names(events: &[Event<Job>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Init => "init".to_string(),
            Event::InitApply(j) => format!("init-apply {}", j.metadata.name.as_deref().unwrap()),
            Event::InitDone => "init-done".to_string(),
            Event::Apply(j) => format!("apply {}", j.metadata.name.as_deref().unwrap()),
            Event::Delete(j) => format!("delete {}", j.metadata.name.as_deref().unwrap()),
        })
        .collect()
}

/// Collects watcher events (skipping errors) until `until` is seen.
async fn until<S>(stream: &mut S, until: &str) -> (Vec<Event<Job>>, usize)
where
    S: Stream<Item = Result<Event<Job>, watcher::Error>> + Unpin,
{
    let (mut events, mut errors) = (Vec::new(), 0);
    loop {
        match next(stream).await {
            Ok(event) => {
                let done = names(std::slice::from_ref(&event))[0] == until;
                events.push(event);
                if done {
                    return (events, errors);
                }
            }
            Err(_) => errors += 1,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn kube_watcher_follows_changes_survives_an_outage_and_relists_after_410() {
    let sim = ApiSim::new(CostModel::measured())
        .with_event_capacity(5)
        .with_job_controller(false);
    let jobs: Api<Job> = Api::namespaced(sim.client(), "default");
    sim.insert(job_json("a", json!({})));
    let mut stream = watcher::watcher(jobs.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let (events, _) = until(&mut stream, "init-done").await;
    assert_eq!(names(&events), ["init", "init-apply a", "init-done"]);

    jobs.create(&pp(), &job("b")).await.unwrap();
    jobs.delete("a", &DeleteParams::default()).await.unwrap();
    let (events, _) = until(&mut stream, "delete a").await;
    assert_eq!(names(&events), ["apply b", "delete a"]);

    // Down: the open watch ends with an error and requests are refused.
    sim.set_down(true);
    let refused = jobs.get("b").await;
    assert!(
        matches!(refused, Err(kube::Error::Service(_))),
        "{refused:?}"
    );
    assert!(next(&mut stream).await.is_err());
    // While it is down, more changes than the event log keeps.
    for i in 0..10 {
        sim.insert(job_json(&format!("c{i}"), json!({})));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    sim.set_down(false);
    // The watcher re-watches from its old version, gets 410 and lists again.
    let (events, _) = until(&mut stream, "init-done").await;
    let seen = names(&events);
    let relisted: Vec<&String> = seen.iter().skip_while(|s| *s != "init").collect();
    assert_eq!(relisted.len(), 13, "{seen:?}");
    assert_eq!(relisted[1], "init-apply b");
    let watches = sim
        .requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.status == 200)
        .count();
    assert!(watches >= 2);
    assert!(sim.counts()["list jobs"] >= 2);

    jobs.create(&pp(), &job("d")).await.unwrap();
    let (events, _) = until(&mut stream, "apply d").await;
    assert_eq!(names(&events), ["apply d"]);
}

#[tokio::test(start_paused = true)]
async fn kube_watcher_with_streaming_lists() {
    let (sim, jobs) = setup();
    sim.insert(job_json("a", json!({})));
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher::watcher(jobs.clone(), config).boxed();
    let (events, errors) = until(&mut stream, "init-done").await;
    assert_eq!(
        (names(&events), errors),
        (
            vec![
                "init".to_string(),
                "init-apply a".into(),
                "init-done".into()
            ],
            0
        )
    );
    jobs.create(&pp(), &job("b")).await.unwrap();
    let (events, _) = until(&mut stream, "apply b").await;
    assert_eq!(names(&events), ["apply b"]);
    assert_eq!(
        sim.counts().get("list jobs"),
        None,
        "a streaming list does not list"
    );
}
