//! A scripted mock API server (tower-test, as controller-rs's `ApiServerVerifier`): the test
//! lists the exact requests it expects, in order, with the answers the API server would give;
//! consecutive requests marked [`Expect::unordered`] may come in any order among themselves
//! (work sent by independent background workers). The verifier fails on a wrong method, path,
//! query or body, when an expected request does not come within a second, and when any request
//! comes after the script.
//!
//! Every request it sees is also appended to the API call log (see [`record_call`]), from which
//! the RBAC test checks that the manifests grant every call the code makes.

use std::io::Write;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Check = Box<dyn Fn(&Value) + Send>;
type Answer = Box<dyn Fn(&Value) -> (StatusCode, Value) + Send>;

/// Environment variable naming the directory of the API call log.
pub const CALL_LOG_ENV: &str = "KRONJOB_API_CALL_LOG";

/// Append `METHOD PATH?QUERY` to the API call log, when [`CALL_LOG_ENV`] names a directory.
/// Only the manager's calls are recorded: they must be granted by its RBAC.
pub fn record_call(method: &str, path_and_query: &str) {
    let Some(dir) = std::env::var_os(CALL_LOG_ENV) else {
        return;
    };
    let file = std::path::Path::new(&dir).join(format!("{}.log", std::process::id()));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    {
        // One write(2) per line: with O_APPEND it lands whole, even when test threads record at
        // the same time (formatting straight into the file issues one write per piece).
        let _ = f.write_all(format!("{method} {path_and_query}\n").as_bytes());
    }
}

/// A client of the manager whose requests go to the returned script handle (and are recorded
/// for the RBAC check).
pub fn mock_client() -> (kube::Client, Script) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), Script(handle, true))
}

/// The same for commands that run with the user's own credentials (not recorded).
pub fn mock_user_client() -> (kube::Client, Script) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), Script(handle, false))
}

/// The server side of [`mock_client`].
pub struct Script(Handle, bool);

impl Script {
    /// Serve `expected` in order on a task; join it to get the verdict.
    pub fn run(self, expected: Vec<Expect>) -> JoinHandle<()> {
        tokio::spawn(serve(self.0, expected, self.1))
    }
}

/// One expected request and the answer to it.
pub struct Expect {
    unordered: bool,
    method: Method,
    /// Exact path, or a prefix when it ends with `*`.
    path: String,
    query: String,
    check: Option<Check>,
    answer: Answer,
    /// How long the answer takes.
    delay: Duration,
}

impl std::fmt::Debug for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

impl Expect {
    fn new(method: Method, path: &str) -> Self {
        Self {
            unordered: false,
            method,
            path: path.to_string(),
            query: String::new(),
            check: None,
            answer: Box::new(|_| (StatusCode::OK, json!({}))),
            delay: Duration::ZERO,
        }
    }

    /// `GET path`.
    pub fn get(path: &str) -> Self {
        Self::new(Method::GET, path)
    }
    /// `POST path`; answers 201 with the body and `metadata.uid` `<name>-uid` unless told
    /// otherwise.
    pub fn post(path: &str) -> Self {
        Self::new(Method::POST, path).answer(|body| {
            let mut created = body.clone();
            let uid = format!(
                "{}-uid",
                created["metadata"]["name"].as_str().unwrap_or("new")
            );
            created["metadata"]["uid"] = json!(uid);
            created["metadata"]["resourceVersion"] = json!("2");
            (StatusCode::CREATED, created)
        })
    }
    /// `PATCH path`; answers 200 with the body unless told otherwise.
    pub fn patch(path: &str) -> Self {
        Self::new(Method::PATCH, path).answer(|body| (StatusCode::OK, body.clone()))
    }
    /// `PUT path`; answers 200 with the body unless told otherwise.
    pub fn put(path: &str) -> Self {
        Self::new(Method::PUT, path).answer(|body| (StatusCode::OK, body.clone()))
    }
    /// `DELETE path`; answers a `Status` Success unless told otherwise.
    pub fn delete(path: &str) -> Self {
        Self::new(Method::DELETE, path).reply(
            StatusCode::OK,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}),
        )
    }

    /// May come in any order among the unordered requests next to it.
    pub fn unordered(mut self) -> Self {
        self.unordered = true;
        self
    }

    fn matches(&self, method: &Method, path: &str) -> bool {
        self.method == method
            && match self.path.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == self.path,
            }
    }

    /// The query string must be exactly this (default: none).
    pub fn query(mut self, query: &str) -> Self {
        self.query = query.to_string();
        self
    }

    /// The JSON body must equal `want`.
    pub fn body(self, want: Value) -> Self {
        self.check(move |got| assert_eq!(got, &want, "request body"))
    }

    /// The JSON body must include `want` (extra fields allowed).
    pub fn body_includes(self, want: Value) -> Self {
        self.check(move |got| {
            assert_json_diff::assert_json_include!(actual: got.clone(), expected: want.clone())
        })
    }

    /// Run assertions on the JSON body (`Value::Null` when there is none).
    pub fn check(mut self, check: impl Fn(&Value) + Send + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }

    /// Answer with `status` and `body`.
    pub fn reply(self, status: StatusCode, body: Value) -> Self {
        self.answer(move |_| (status, body.clone()))
    }

    /// Answer 200 with `body`.
    pub fn ok(self, body: Value) -> Self {
        self.reply(StatusCode::OK, body)
    }

    /// Answer with a function of the request body.
    pub fn answer(
        mut self,
        answer: impl Fn(&Value) -> (StatusCode, Value) + Send + 'static,
    ) -> Self {
        self.answer = Box::new(answer);
        self
    }

    /// Answer only after `delay` (an API server that holds the request, e.g. while etcd is
    /// away).
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Answer with a `Status` failure, as the API server does.
    pub fn fails(self, status: StatusCode, reason: &str) -> Self {
        self.reply(status, status_body(status, reason))
    }
}

/// A `Status` failure body.
pub fn status_body(status: StatusCode, reason: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("mock {reason}"), "reason": reason, "code": status.as_u16(),
    })
}

async fn serve(mut handle: Handle, expected: Vec<Expect>, record: bool) {
    let mut expected: std::collections::VecDeque<Expect> = expected.into();
    while let Some(waiting_for) = expected.front().map(|first| format!("{first:?}")) {
        let (request, send) = tokio::time::timeout(Duration::from_secs(1), handle.next_request())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {waiting_for}"))
            .unwrap_or_else(|| panic!("client dropped before {waiting_for}"));
        let unordered = expected.iter().take_while(|e| e.unordered).count();
        let at = (0..unordered)
            .find(|i| expected[*i].matches(request.method(), request.uri().path()))
            .unwrap_or(0);
        let Some(expect) = expected.remove(at) else {
            break;
        };
        if record {
            let target = request.uri().path_and_query().map_or("", |p| p.as_str());
            record_call(request.method().as_str(), target);
        }
        assert_eq!(
            request.method(),
            expect.method,
            "method of {}",
            request.uri()
        );
        match expect.path.strip_suffix('*') {
            Some(prefix) => assert!(
                request.uri().path().starts_with(prefix),
                "path {} does not start with {prefix}",
                request.uri()
            ),
            None => assert_eq!(request.uri().path(), expect.path, "path"),
        }
        assert_eq!(
            request.uri().query().unwrap_or(""),
            expect.query,
            "query of {}",
            request.uri()
        );
        let bytes = request.into_body().collect_bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("JSON body")
        };
        if let Some(check) = &expect.check {
            check(&body);
        }
        let (status, reply) = (expect.answer)(&body);
        tokio::time::sleep(expect.delay).await;
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&reply).expect("reply JSON")))
                .expect("response"),
        );
    }
    if let Ok(Some((request, _))) =
        tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await
    {
        panic!("unexpected request {} {}", request.method(), request.uri());
    }
}
