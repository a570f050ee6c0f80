//! The request front end: a tower `Service` that logs each request, injects faults, pays the
//! cost model and dispatches to the operations.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response};
use serde_json::Value;
use tokio::time::Instant;

use crate::body::{SimBody, error_response, json_response};
use crate::fault::ApiError;
use crate::ops::parse_body;
use crate::route::{Query, Route, Target, has_status_subresource, parse_path};
use crate::selector::{FieldSelector, LabelSelector};
use crate::watch::{WatchSpec, project};
use crate::{ApiSim, RequestRecord, discovery, jobs};

/// The simulator as a `tower::Service` for `kube::Client::new`.
#[derive(Clone, Debug)]
pub struct SimService {
    sim: ApiSim,
}

impl SimService {
    pub(crate) fn new(sim: ApiSim) -> Self {
        SimService { sim }
    }
}

impl tower::Service<Request<kube::client::Body>> for SimService {
    type Response = Response<SimBody>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Response<SimBody>>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let sim = self.sim.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.map_err(io::Error::other)?;
            sim.handle(parts, body).await
        })
    }
}

fn object_response(code: u16, object: &Value, meta_only: bool) -> Response<SimBody> {
    let text = if meta_only {
        project(object).to_string()
    } else {
        object.to_string()
    };
    json_response(code, text)
}

fn verb_of(method: &Method, target: &Target, query: &Query) -> &'static str {
    let named = matches!(target, Target::Resource(Route { name: Some(_), .. }));
    match *method {
        Method::GET if named || !matches!(target, Target::Resource(_)) => "get",
        Method::GET if query.flag("watch") => "watch",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn refused() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionRefused,
        "apisim: the API server is down",
    )
}

fn selectors(query: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

impl ApiSim {
    /// Answers one request: log, down check, fault, cost, operation.
    pub(crate) async fn handle(&self, parts: Parts, body: Bytes) -> io::Result<Response<SimBody>> {
        let inner = &self.inner;
        let started = Instant::now();
        let path = parts.uri.path().to_string();
        let raw_query = parts.uri.query().unwrap_or_default().to_string();
        let query = Query::parse(&raw_query);
        let target = parse_path(&path);
        let dry_run = query.get("dryRun") == Some("All")
            || (parts.method == Method::DELETE
                && serde_json::from_slice::<Value>(&body).is_ok_and(|o| {
                    o["dryRun"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|v| v == "All"))
                }));
        let (group, resource, namespace, name) = match &target {
            Target::Resource(r) => {
                let resource = match &r.sub {
                    Some(sub) => format!("{}/{sub}", r.res.plural),
                    None => r.res.plural.clone(),
                };
                (
                    r.res.group.clone(),
                    resource,
                    r.namespace.clone(),
                    r.name.clone(),
                )
            }
            _ => (String::new(), path.clone(), None, None),
        };
        let mut record = RequestRecord {
            method: parts.method.to_string(),
            verb: verb_of(&parts.method, &target, &query),
            path,
            query: raw_query,
            group,
            resource,
            namespace,
            name,
            status: 0,
            dry_run,
            started,
            finished: started,
            at: inner.now(),
        };
        if parts.method == Method::POST && record.name.is_none() {
            // A create names its object in the body.
            record.name = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["metadata"]["name"].as_str().map(str::to_string));
        }
        if inner.is_down() {
            inner.record(record, 0);
            return Err(refused());
        }
        if !inner.held(parts.method.as_str(), &record.path).await {
            inner.record(record, 0);
            return Err(refused());
        }
        if let Some(error) = inner.take_fault(parts.method.as_str(), &record.path) {
            inner.record(record, error.code);
            return Ok(error_response(&error));
        }
        inner.pay(is_write(&parts.method)).await;
        if inner.is_down() {
            inner.record(record, 0);
            return Err(refused());
        }
        let response = match target {
            Target::Resource(route) => self
                .resource(&parts, &route, &query, &body, dry_run)
                .unwrap_or_else(|e| error_response(&e)),
            other => discovery::respond(inner, &other),
        };
        inner.record(record, response.status().as_u16());
        Ok(response)
    }

    fn resource(
        &self,
        parts: &Parts,
        route: &Route,
        query: &Query,
        body: &[u8],
        dry_run: bool,
    ) -> Result<Response<SimBody>, ApiError> {
        let inner = &self.inner;
        if route.sub.is_some() && !(route.is_status() && has_status_subresource(&route.res.plural))
        {
            return Err(ApiError::no_route());
        }
        let header = |name| {
            parts
                .headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .unwrap_or("")
        };
        let meta_only = header(ACCEPT).contains("as=PartialObjectMetadata");
        let options = || {
            if body.is_empty() {
                Ok(Value::Null)
            } else {
                parse_body(body)
            }
        };
        let content_type = header(CONTENT_TYPE);
        let json_body = content_type.is_empty() || content_type.contains("json");
        if matches!(parts.method, Method::POST | Method::PUT) && !json_body {
            let message = format!("apisim speaks JSON only, not {content_type:?}");
            return Err(ApiError::new(415, "UnsupportedMediaType", message));
        }
        match (&parts.method, route.name.is_some()) {
            (&Method::GET, true) => Ok(object_response(200, &*inner.read(route)?, meta_only)),
            (&Method::GET, false) => {
                let (labels, fields) = selectors(query)?;
                if query.flag("watch") {
                    return self.watch(route, query, labels, fields, meta_only);
                }
                let (rv, items) = inner.list(route, &labels, &fields);
                Ok(self.list_response(route, rv, &items, meta_only))
            }
            (&Method::POST, false) => {
                let created = inner.create(route, parse_body(body)?, dry_run)?;
                if !dry_run {
                    jobs::on_create(inner, route, &created);
                }
                Ok(object_response(201, &created, meta_only))
            }
            (&Method::PUT, true) => Ok(object_response(
                200,
                &*inner.update(route, parse_body(body)?, dry_run)?,
                meta_only,
            )),
            (&Method::PATCH, true) => {
                let (patched, created) = inner.patch(route, header(CONTENT_TYPE), body, dry_run)?;
                if created && !dry_run {
                    jobs::on_create(inner, route, &patched);
                }
                Ok(object_response(
                    if created { 201 } else { 200 },
                    &patched,
                    meta_only,
                ))
            }
            (&Method::DELETE, true) => Ok(object_response(
                200,
                &*inner.delete(route, &options()?, dry_run)?,
                meta_only,
            )),
            (&Method::DELETE, false) => {
                let (labels, fields) = selectors(query)?;
                let (rv, items) =
                    inner.delete_collection(route, &labels, &fields, &options()?, dry_run);
                Ok(self.list_response(route, rv, &items, meta_only))
            }
            _ => Err(ApiError::method_not_allowed()),
        }
    }

    fn list_response(
        &self,
        route: &Route,
        rv: u64,
        items: &[Arc<Value>],
        meta_only: bool,
    ) -> Response<SimBody> {
        let (api_version, kind) = if meta_only {
            (
                "meta.k8s.io/v1".to_string(),
                "PartialObjectMetadataList".to_string(),
            )
        } else {
            (
                route.api_version(),
                format!("{}List", self.inner.kind_name(&route.res)),
            )
        };
        let items: Vec<String> = items
            .iter()
            .map(|o| {
                if meta_only {
                    project(o).to_string()
                } else {
                    o.to_string()
                }
            })
            .collect();
        let text = format!(
            "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{{\"resourceVersion\":\"{rv}\"}},\"items\":[{}]}}",
            Value::from(api_version),
            Value::from(kind),
            items.join(",")
        );
        json_response(200, text)
    }

    fn watch(
        &self,
        route: &Route,
        query: &Query,
        labels: LabelSelector,
        fields: FieldSelector,
        meta_only: bool,
    ) -> Result<Response<SimBody>, ApiError> {
        let timeout = match query.get("timeoutSeconds") {
            Some(t) => Some(std::time::Duration::from_secs(t.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid timeoutSeconds: {t}"))
            })?)),
            None => None,
        };
        let spec = WatchSpec {
            res: route.res.clone(),
            namespace: route.namespace.clone(),
            labels,
            fields,
            bookmarks: query.flag("allowWatchBookmarks"),
            timeout,
            meta_only,
            api_version: route.api_version(),
            kind: self.inner.kind_name(&route.res),
        };
        let stream = crate::watch::start(self.inner.clone(), spec, query)?;
        let mut response = json_response(200, Bytes::new());
        *response.body_mut() = SimBody::stream(stream);
        Ok(response)
    }
}
