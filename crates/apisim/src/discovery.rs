//! Non-resource paths: `/version`, health checks and legacy discovery (`/api`, `/apis`,
//! `/api/v1`, `/apis/{group}/{version}`) for the resources the simulator knows.

use std::collections::{BTreeMap, BTreeSet};

use http::Response;
use serde_json::{Value, json};

use crate::body::{SimBody, error_response, json_response};
use crate::fault::ApiError;
use crate::route::{Target, WELL_KNOWN, api_version, has_status_subresource};
use crate::{Inner, KindInfo, lock};

/// One served resource: (group, version, plural, kind, namespaced).
type Row = (String, String, String, String, bool);

/// The well-known resources, those learned from writes and CRDs, and anything stored.
fn rows(inner: &Inner) -> BTreeSet<Row> {
    let mut rows: BTreeSet<Row> = WELL_KNOWN
        .iter()
        .map(|r| {
            (
                r.0.to_string(),
                r.1.to_string(),
                r.3.to_string(),
                r.2.to_string(),
                r.4,
            )
        })
        .collect();
    for (
        res,
        KindInfo {
            version,
            kind,
            namespaced,
        },
    ) in lock(&inner.kinds).iter()
    {
        rows.retain(|r| !(r.0 == res.group && r.2 == res.plural));
        rows.insert((
            res.group.clone(),
            version.clone(),
            res.plural.clone(),
            kind.clone(),
            *namespaced,
        ));
    }
    rows
}

fn json(code: u16, body: &Value) -> Response<SimBody> {
    json_response(code, body.to_string())
}

pub(crate) fn respond(inner: &Inner, target: &Target) -> Response<SimBody> {
    match target {
        Target::Version => json(
            200,
            &json!({
                "major": "1", "minor": "34", "gitVersion": "v1.34.0-apisim", "gitCommit": "apisim",
                "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6",
                "compiler": "gc", "platform": "linux/amd64",
            }),
        ),
        Target::Health => {
            let mut response = json_response(200, "ok");
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            );
            response
        }
        Target::CoreVersions => json(
            200,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
        ),
        Target::Groups => {
            let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (group, version, ..) in rows(inner).into_iter().filter(|r| !r.0.is_empty()) {
                groups.entry(group).or_default().insert(version);
            }
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(group, versions)| {
                    let versions: Vec<Value> = versions
                        .iter()
                        .map(|v| json!({"groupVersion": api_version(&group, v), "version": v}))
                        .collect();
                    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
                })
                .collect();
            json(
                200,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        Target::GroupVersion(group, version) => {
            let mut resources = Vec::new();
            for (_, _, plural, kind, namespaced) in rows(inner)
                .into_iter()
                .filter(|r| r.0 == *group && r.1 == *version)
            {
                let verbs = [
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ];
                resources.push(json!({"name": plural, "singularName": kind.to_lowercase(),
                    "namespaced": namespaced, "kind": kind, "verbs": verbs}));
                if has_status_subresource(&plural) {
                    resources.push(json!({"name": format!("{plural}/status"), "singularName": "",
                        "namespaced": namespaced, "kind": kind, "verbs": ["get", "patch", "update"]}));
                }
            }
            if resources.is_empty() {
                return error_response(&ApiError::no_route());
            }
            let body = json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": api_version(group, version), "resources": resources});
            json(200, &body)
        }
        Target::Resource(_) | Target::Unknown => error_response(&ApiError::no_route()),
    }
}
