//! The HTTP front end, through a `kube::Client` configured with `http://127.0.0.1:PORT`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{job, job_json, pp};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kronjob_apisim::{ApiSim, CostModel};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test]
async fn http_front_end_serves_list_and_watch() {
    // No Job controller: its status write would be one more event on the watch.
    let sim = ApiSim::new(CostModel::free()).with_job_controller(false);
    sim.insert(job_json("seeded", json!({"app": "web"})));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sim.clone().serve_http(listener, async {
        let _ = stopped.await;
    }));

    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "v1.34.0-apisim"
    );
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "batch"));
    let resources = client.list_api_group_resources("batch/v1").await.unwrap();
    assert!(
        resources
            .resources
            .iter()
            .any(|r| r.name == "jobs" && r.namespaced)
    );

    let jobs: Api<Job> = Api::namespaced(client, "default");
    let list = jobs
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();

    let mut stream = jobs
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    jobs.create(&pp(), &job("over-http")).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Added(j) => assert_eq!(j.metadata.name.as_deref(), Some("over-http")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let status = match jobs.get("nope").await {
        Err(kube::Error::Api(status)) => status,
        other => panic!("{other:?}"),
    };
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(sim.counts()["watch jobs"], 1);

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The open watch ends when the server stops.
    let rest = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(!matches!(rest, Some(Ok(_))), "{rest:?}");
}
