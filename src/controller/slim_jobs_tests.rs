//! The layer under a kube client, in front of a server that answers with the fixtures of a
//! real kube-apiserver 1.34 (`cache/testdata/`).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use http_body_util::Full;
use kube::api::{Api, ListParams, PostParams, WatchParams};
use kube::core::{PartialObjectMeta, WatchEvent};
use serde_json::Value;

use super::*;
use crate::controller::cache::SlimJob;
use crate::controller::cache::protobuf::tests as fixtures;

type Job = k8s_openapi::api::batch::v1::Job;

fn request(method: Method, uri: &str, accept: Option<&str>) -> Request<()> {
    let mut r = Request::builder().method(method).uri(uri);
    if let Some(accept) = accept {
        r = r.header(ACCEPT, accept);
    }
    r.body(()).expect("a request")
}

#[test]
fn only_reads_and_creates_of_jobs_asking_for_json_are_changed() {
    let cases = [
        (
            Method::GET,
            "/apis/batch/v1/jobs?labelSelector=x",
            None,
            true,
        ),
        (
            Method::GET,
            "/apis/batch/v1/namespaces/a/jobs?watch=true",
            None,
            true,
        ),
        (
            Method::GET,
            "/apis/batch/v1/namespaces/a/jobs/j",
            Some("application/json"),
            true,
        ),
        (
            Method::POST,
            "/apis/batch/v1/namespaces/a/jobs?",
            None,
            true,
        ),
        (
            Method::POST,
            "/apis/batch/v1/namespaces/a/jobs?dryRun=All",
            None,
            false,
        ),
        (
            Method::GET,
            "/apis/batch/v1/namespaces/a/jobs/j/status",
            None,
            false,
        ),
        (
            Method::DELETE,
            "/apis/batch/v1/namespaces/a/jobs/j",
            None,
            false,
        ),
        (
            Method::PATCH,
            "/apis/batch/v1/namespaces/a/jobs/j",
            None,
            false,
        ),
        (
            Method::PUT,
            "/apis/batch/v1/namespaces/a/jobs/j",
            None,
            false,
        ),
        (
            Method::GET,
            "/apis/batch/v1/namespaces/a/cronjobs",
            None,
            false,
        ),
        (Method::GET, "/apis/batch/v1/namespaces//jobs", None, false),
        (Method::GET, "/apis/batch/v1/jobsx", None, false),
        (
            Method::GET,
            "/apis/batch.kronjob.dev/v1/namespaces/a/cronjobs",
            None,
            false,
        ),
        (Method::GET, "/api/v1/namespaces/a/pods", None, false),
        (
            Method::GET,
            "/apis/batch/v1/jobs?watch=true",
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            false,
        ),
    ];
    for (method, uri, accept, slim) in cases {
        let r = request(method.clone(), uri, accept);
        assert_eq!(is_slim_job_request(&r), slim, "{method} {uri} {accept:?}");
    }
}

/// A server answering from the fixtures: in protobuf when asked for it (unless `json_only`),
/// otherwise in JSON; it notes each request's `Accept`.
#[derive(Clone)]
struct Fixtures {
    accepts: Arc<Mutex<Vec<String>>>,
    json_only: bool,
}

impl Fixtures {
    fn new(json_only: bool) -> Self {
        Fixtures {
            accepts: Arc::default(),
            json_only,
        }
    }

    fn client(&self) -> kube::Client {
        let me = self.clone();
        let service = tower::service_fn(move |r: Request<kube::client::Body>| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.answer(&r)) }
        });
        kube::Client::new(SlimJobsLayer.layer(service), "fixtures")
    }

    fn answer(&self, r: &Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let accept = r
            .headers()
            .get(ACCEPT)
            .map(|a| a.to_str().expect("ASCII").to_string())
            .unwrap_or_default();
        self.accepts.lock().expect("lock").push(accept.clone());
        let pb = accept.starts_with(MEDIA_TYPE) && !self.json_only;
        let path = r.uri().path();
        let watch = r.uri().query().is_some_and(|q| q.contains("watch=true"));
        let (status, (body_pb, body_json)) = match (r.method().clone(), path) {
            (Method::POST, _) => (201, fixtures::CREATE),
            (_, p) if p.ends_with("/jobs/nope") => (404, fixtures::NOT_FOUND),
            (_, p) if p.ends_with("/jobs/hello-29000000") => (200, fixtures::FINISHED),
            (_, _) if watch => (200, fixtures::WATCH),
            _ => (200, fixtures::LIST),
        };
        let content_type = match (pb, watch) {
            (true, true) => "application/vnd.kubernetes.protobuf;stream=watch",
            (true, false) => MEDIA_TYPE,
            (false, _) => "application/json",
        };
        let body = if pb {
            Bytes::from_static(body_pb)
        } else {
            Bytes::from_static(body_json.as_bytes())
        };
        Response::builder()
            .status(status)
            .header(CONTENT_TYPE, content_type)
            .header(CONTENT_LENGTH, body.len())
            .body(Full::new(body))
            .expect("a response")
    }
}

async fn read_everything(client: kube::Client) -> Vec<Value> {
    let jobs: Api<SlimJob> = Api::namespaced(client, "fixtures");
    let got = jobs.get("hello-29000000").await.expect("get");
    let listed = jobs.list(&ListParams::default()).await.expect("list");
    let created = jobs
        .create(&PostParams::default(), &got)
        .await
        .expect("create");
    let missing = jobs.get_opt("nope").await.expect("a 404 is None");
    let error = match jobs.get("nope").await {
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone()),
        other => panic!("not an API error: {other:?}"),
    };
    let events: Vec<WatchEvent<SlimJob>> = jobs
        .watch(&WatchParams::default(), "1")
        .await
        .expect("watch")
        .try_collect()
        .await
        .expect("events");
    vec![
        serde_json::to_value(got).expect("encodes"),
        serde_json::to_value(listed.items).expect("encodes"),
        serde_json::to_value(created).expect("encodes"),
        serde_json::to_value(missing).expect("encodes"),
        serde_json::to_value(error).expect("encodes"),
        serde_json::to_value(events).expect("encodes"),
    ]
}

#[tokio::test]
async fn through_kube_protobuf_answers_read_as_json_ones_do() {
    let protobuf = Fixtures::new(false);
    let json = Fixtures::new(true);
    let ours = read_everything(protobuf.client()).await;
    let theirs = read_everything(json.client()).await;
    assert_eq!(ours, theirs);
    assert_eq!(ours[4], serde_json::json!([404, "NotFound"]));
    assert_eq!(ours[5].as_array().map(Vec::len), Some(3));
    // Every request asked for protobuf; the JSON-only server's answers passed through.
    let accepts = protobuf.accepts.lock().expect("lock").clone();
    assert_eq!(accepts.len(), 6);
    assert!(accepts.iter().all(|a| a == ACCEPT_PROTOBUF), "{accepts:?}");
}

#[tokio::test]
async fn other_requests_keep_their_accept_and_their_answer() {
    let server = Fixtures::new(false);
    let client = server.client();
    let metadata: Api<PartialObjectMeta<Job>> = Api::namespaced(client.clone(), "fixtures");
    // The fixture server answers the metadata list with the JSON list: it is passed on as is.
    let listed = metadata
        .list_metadata(&ListParams::default())
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    let accepts = server.accepts.lock().expect("lock").clone();
    assert!(
        accepts[0].contains("as=PartialObjectMetadata"),
        "{accepts:?}"
    );
}

#[tokio::test]
async fn a_watch_stream_arriving_in_pieces_gives_each_event_once() {
    let chunks: Vec<Result<http_body::Frame<Bytes>, Infallible>> = fixtures::WATCH
        .0
        .chunks(5)
        .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let body = StreamBody::new(futures::stream::iter(chunks));
    let out = watch_body(body).collect().await.expect("body").to_bytes();
    let lines: Vec<&[u8]> = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 3);
    let mut cut = fixtures::WATCH.0.to_vec();
    cut.truncate(cut.len() - 3);
    let body = Full::new(Bytes::from(cut));
    let out = watch_body(body).collect().await.expect("body").to_bytes();
    // The last frame never arrived whole: two events, and no error.
    assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 2);
}

/// What the server behind the layer received for one request: its content type and body.
async fn sent(method: Method, uri: &str, content_type: &str, body: Vec<u8>) -> (String, Bytes) {
    let seen: Arc<Mutex<Option<(String, Bytes)>>> = Arc::default();
    let record = seen.clone();
    let service = tower::service_fn(move |r: Request<kube::client::Body>| {
        let record = record.clone();
        async move {
            let content_type = r
                .headers()
                .get(CONTENT_TYPE)
                .map_or(String::new(), |c| c.to_str().expect("ASCII").to_string());
            let body = r.into_body().collect_bytes().await.expect("a body");
            *record.lock().expect("lock") = Some((content_type, body));
            Ok::<_, Infallible>(
                Response::builder()
                    .status(201)
                    .header(CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from_static(fixtures::CREATE.1.as_bytes())))
                    .expect("a response"),
            )
        }
    });
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("a request");
    tower::ServiceExt::oneshot(SlimJobsLayer.layer(service), request)
        .await
        .expect("an answer");
    let seen = seen.lock().expect("lock").take();
    seen.expect("the server was called")
}

const JOBS: &str = "/apis/batch/v1/namespaces/team-a/jobs?fieldManager=kronjob";

#[tokio::test]
async fn a_created_job_is_sent_in_protobuf() {
    let job = crate::proto::tests::rich_job();
    let json = serde_json::to_vec(&job).expect("JSON");
    let (content_type, body) = sent(Method::POST, JOBS, "application/json", json).await;
    assert_eq!(content_type, MEDIA_TYPE);
    let (api_version, kind, read) = crate::proto::tests::read_job(&body);
    assert_eq!((api_version.as_str(), kind.as_str()), ("batch/v1", "Job"));
    assert_eq!(read["metadata"]["name"], job["metadata"]["name"]);
    assert_eq!(
        read["spec"]["template"]["spec"]["containers"][0]["args"],
        job["spec"]["template"]["spec"]["containers"][0]["args"]
    );
    // The same bytes as the encoder's.
    assert_eq!(body, crate::proto::job(&job).expect("encodes"));
}

#[tokio::test]
async fn a_job_the_schema_cannot_write_and_other_bodies_are_sent_as_they_were() {
    let mut newer = crate::proto::tests::rich_job();
    newer["spec"]["template"]["spec"]["someFieldOfKubernetes2"] = serde_json::json!(true);
    let newer = serde_json::to_vec(&newer).expect("JSON");
    let rich = serde_json::to_vec(&crate::proto::tests::rich_job()).expect("JSON");
    let cases: [(&str, Method, &str, &str, Vec<u8>); 5] = [
        (
            "a field the schema lacks",
            Method::POST,
            JOBS,
            "application/json",
            newer,
        ),
        (
            "not JSON",
            Method::POST,
            JOBS,
            "application/json",
            b"{not json".to_vec(),
        ),
        (
            "a dry run",
            Method::POST,
            "/apis/batch/v1/namespaces/a/jobs?dryRun=All",
            "application/json",
            rich.clone(),
        ),
        (
            "a patch",
            Method::PATCH,
            "/apis/batch/v1/namespaces/a/jobs/j",
            "application/merge-patch+json",
            rich.clone(),
        ),
        (
            "another resource",
            Method::POST,
            "/api/v1/namespaces/a/pods",
            "application/json",
            rich,
        ),
    ];
    for (what, method, uri, content_type, body) in cases {
        let (got_type, got_body) = sent(method, uri, content_type, body.clone()).await;
        assert_eq!(
            (got_type.as_str(), &got_body[..]),
            (content_type, &body[..]),
            "{what}"
        );
    }
}
