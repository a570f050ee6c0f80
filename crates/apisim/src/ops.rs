//! The API operations on the store, with the API server's semantics.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::fault::{ApiError, MODIFIED};
use crate::route::{Route, has_status_subresource};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{meta_mut, meta_str, str_of};
use crate::{Inner, lock};

/// Metadata the server owns: a write never changes these.
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The kind of a PATCH body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Json,
    Apply,
}

pub(crate) fn into_map(value: Value) -> Result<Map<String, Value>, ApiError> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        )),
    }
}

pub(crate) fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request was in an unknown format: {e}"
        ))
    })
}

/// Sets a CustomResourceDefinition's status as the apiextensions controller does at once.
pub(crate) fn crd_status(crd: &mut Map<String, Value>, now: &str) {
    let names = crd
        .get("spec")
        .and_then(|s| s.get("names"))
        .cloned()
        .unwrap_or(json!({}));
    let stored: Vec<Value> = crd
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let condition = |ty: &str, reason: &str, message: &str| json!({"type": ty, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now});
    crd.insert(
        "status".into(),
        json!({
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
            "acceptedNames": names,
            "storedVersions": stored,
        }),
    );
}

/// Whether anything outside metadata and status differs (a generation bump).
fn spec_changed(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let counted = |(k, _): &(&String, &Value)| {
        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
    };
    a.iter().filter(counted).count() != b.iter().filter(counted).count()
        || a.iter().filter(counted).any(|(k, v)| b.get(k) != Some(v))
}

impl Inner {
    fn name_of(route: &Route) -> &str {
        route.name.as_deref().unwrap_or("")
    }

    /// The stored object a route names, or 404.
    pub(crate) fn read(&self, route: &Route) -> Result<Arc<Value>, ApiError> {
        let name = Self::name_of(route);
        lock(&self.store)
            .get(&route.res, route.namespace.as_deref().unwrap_or(""), name)
            .ok_or_else(|| ApiError::not_found(&route.res, name))
    }

    pub(crate) fn list(
        &self,
        route: &Route,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (u64, Vec<Arc<Value>>) {
        let store = lock(&self.store);
        let items = store.list(&route.res, route.namespace.as_deref());
        (
            store.rv(),
            items
                .into_iter()
                .filter(|o| labels.matches(o) && fields.matches(o))
                .collect(),
        )
    }

    fn validate(&self, route: &Route, object: &Value) -> Result<(), ApiError> {
        let validator = lock(&self.validators).get(&route.res).cloned();
        let Some(validator) = validator else {
            return Ok(());
        };
        validator(object).map_err(|invalid| {
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .map_or_else(|| self.kind_name(&route.res), str::to_string);
            ApiError::invalid(&kind, &route.res.group, meta_str(object, "name"), &invalid)
        })
    }

    /// POST: a new object with server-set metadata; status dropped where it is a subresource.
    pub(crate) fn create(
        &self,
        route: &Route,
        body: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut object = into_map(body)?;
        let now = self.now_seconds();
        object
            .entry("apiVersion")
            .or_insert_with(|| json!(route.api_version()));
        if !object.contains_key("kind") {
            object.insert("kind".into(), json!(self.kind_name(&route.res)));
        }
        if has_status_subresource(&route.res.plural) {
            object.remove("status");
        }
        if route.res.plural == "customresourcedefinitions" {
            crd_status(&mut object, &now);
        }
        let meta = meta_mut(&mut object);
        match &route.namespace {
            Some(ns) => {
                let given = str_of(meta, "namespace");
                if !given.is_empty() && given != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                meta.insert("namespace".into(), json!(ns));
            }
            None => {
                meta.remove("namespace");
            }
        }
        if !str_of(meta, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if str_of(meta, "name").is_empty() {
            let prefix = str_of(meta, "generateName").to_string();
            if prefix.is_empty() {
                let invalid = crate::Invalid::field(
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                );
                let kind = self.kind_name(&route.res);
                return Err(ApiError::invalid(&kind, &route.res.group, "", &invalid));
            }
            let ns = route.namespace.as_deref().unwrap_or("");
            let name = loop {
                let candidate = format!("{prefix}{}", self.name_suffix());
                if lock(&self.store).get(&route.res, ns, &candidate).is_none() {
                    break candidate;
                }
            };
            meta.insert("name".into(), json!(name));
        }
        meta.insert("uid".into(), json!(self.uid()));
        meta.insert("creationTimestamp".into(), json!(now));
        meta.insert("generation".into(), json!(1));
        let name = str_of(meta, "name").to_string();
        let object = Value::Object(object);
        self.validate(route, &object)?;
        let object = into_map(object)?;
        let ns = route.namespace.as_deref().unwrap_or("");
        let stored = self.with_store(|s| {
            if s.get(&route.res, ns, &name).is_some() {
                return Err(ApiError::already_exists(&route.res, &name));
            }
            if dry_run {
                return Ok(Arc::new(Value::Object(object)));
            }
            Ok(s.put(&route.res, object))
        })?;
        if !dry_run {
            self.learn(route, &stored);
        }
        Ok(stored)
    }

    /// The object a write leaves: a status write changes only status; a main write keeps the
    /// server's metadata and (with a status subresource) the stored status, and bumps the
    /// generation when anything outside metadata and status changed.
    fn combine(
        route: &Route,
        stored: &Value,
        mut candidate: Map<String, Value>,
    ) -> Map<String, Value> {
        let old = stored.as_object().cloned().unwrap_or_default();
        if route.is_status() {
            let mut new = old;
            match candidate.remove("status") {
                Some(status) => new.insert("status".into(), status),
                None => new.remove("status"),
            };
            return new;
        }
        let old_meta = old
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let meta = meta_mut(&mut candidate);
        for key in SERVER_META {
            match old_meta.get(*key) {
                Some(v) => meta.insert((*key).into(), v.clone()),
                None => meta.remove(*key),
            };
        }
        for key in ["apiVersion", "kind"] {
            if let (false, Some(v)) = (candidate.contains_key(key), old.get(key)) {
                candidate.insert(key.into(), v.clone());
            }
        }
        if has_status_subresource(&route.res.plural) {
            match old.get("status") {
                Some(status) => candidate.insert("status".into(), status.clone()),
                None => candidate.remove("status"),
            };
        }
        if spec_changed(&old, &candidate) {
            let generation = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            meta_mut(&mut candidate).insert("generation".into(), json!(generation));
        }
        candidate
    }

    /// Read, build, validate and commit if nobody wrote in between (else retry). `build` sees
    /// the stored object and checks preconditions. A write that changes nothing is not stored:
    /// no new resourceVersion, no event.
    fn modify(
        &self,
        route: &Route,
        dry_run: bool,
        mut build: impl FnMut(&Value) -> Result<Map<String, Value>, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let ns = route.namespace.as_deref().unwrap_or("");
        let name = Self::name_of(route);
        loop {
            let stored = self.read(route)?;
            let new = Value::Object(Self::combine(route, &stored, build(&stored)?));
            if !route.is_status() {
                self.validate(route, &new)?;
            }
            if new == *stored {
                return Ok(stored);
            }
            if dry_run {
                return Ok(Arc::new(new));
            }
            let new = into_map(new)?;
            let committed = self.with_store(|s| match s.get(&route.res, ns, name) {
                Some(current) if Arc::ptr_eq(&current, &stored) => Some(s.put(&route.res, new)),
                _ => None,
            });
            if let Some(committed) = committed {
                self.learn(route, &committed);
                return Ok(committed);
            }
        }
    }

    /// A resourceVersion or uid in the written object must match the stored one.
    fn check_preconditions(route: &Route, stored: &Value, written: &Value) -> Result<(), ApiError> {
        let name = Self::name_of(route);
        let wanted = meta_str(written, "resourceVersion");
        if !wanted.is_empty() && wanted != meta_str(stored, "resourceVersion") {
            return Err(ApiError::conflict(&route.res, name, MODIFIED));
        }
        let (wanted, actual) = (meta_str(written, "uid"), meta_str(stored, "uid"));
        if !wanted.is_empty() && wanted != actual {
            let why = format!(
                "Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"
            );
            return Err(ApiError::conflict(&route.res, name, &why));
        }
        Ok(())
    }

    /// PUT: a metadata.resourceVersion or uid in the body must match the stored one.
    pub(crate) fn update(
        &self,
        route: &Route,
        body: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut object = into_map(body)?;
        let meta = meta_mut(&mut object);
        let (given, name) = (str_of(meta, "name"), Self::name_of(route));
        if !given.is_empty() && given != name {
            let message = format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            );
            return Err(ApiError::bad_request(message));
        }
        let written = Value::Object(object);
        self.modify(route, dry_run, |stored| {
            Self::check_preconditions(route, stored, &written)?;
            into_map(written.clone())
        })
    }

    /// PATCH: merge (and strategic merge, treated as merge), JSON patch, or server-side apply
    /// (merge, creating when absent). A resourceVersion or uid in the patched object is a
    /// precondition. Answers whether it created the object.
    pub(crate) fn patch(
        &self,
        route: &Route,
        content_type: &str,
        body: &[u8],
        dry_run: bool,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let kind = match content_type.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                PatchKind::Merge
            }
            "application/json-patch+json" => PatchKind::Json,
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchKind::Apply,
            other => {
                let message = format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {other:?}"
                );
                return Err(ApiError::new(415, "UnsupportedMediaType", message));
            }
        };
        let patch = parse_body(body)?;
        if kind == PatchKind::Apply && !route.is_status() && self.read(route).is_err() {
            let mut object = into_map(patch.clone())?;
            meta_mut(&mut object)
                .entry("name")
                .or_insert_with(|| json!(Self::name_of(route)));
            match self.create(route, Value::Object(object), dry_run) {
                // Raced with another create: apply onto that object.
                Err(e) if e.reason == "AlreadyExists" => {}
                other => return other.map(|o| (o, true)),
            }
        }
        let ops: Option<json_patch::Patch> = match kind {
            PatchKind::Json => Some(
                serde_json::from_value(patch.clone())
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?,
            ),
            _ => None,
        };
        let patched = self.modify(route, dry_run, |stored| {
            let mut doc = stored.clone();
            match &ops {
                Some(ops) => json_patch::patch(&mut doc, ops).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!("the JSON patch could not be applied: {e}"),
                    )
                })?,
                None => json_patch::merge(&mut doc, &patch),
            }
            Self::check_preconditions(route, stored, &doc)?;
            into_map(doc)
        })?;
        Ok((patched, false))
    }

    /// DELETE: checks the DeleteOptions preconditions, then removes the object at once.
    pub(crate) fn delete(
        &self,
        route: &Route,
        options: &Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let ns = route.namespace.as_deref().unwrap_or("");
        let name = Self::name_of(route);
        let precondition = |key: &str| {
            options
                .get("preconditions")
                .and_then(|p| p.get(key))
                .and_then(Value::as_str)
        };
        loop {
            let stored = self.read(route)?;
            for (key, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
                let actual = meta_str(&stored, key);
                if let Some(wanted) = precondition(key).filter(|w| *w != actual) {
                    let why = format!(
                        "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
                    );
                    return Err(ApiError::conflict(&route.res, name, &why));
                }
            }
            if dry_run {
                return Ok(stored);
            }
            let removed = self.with_store(|s| match s.get(&route.res, ns, name) {
                Some(current) if Arc::ptr_eq(&current, &stored) => s.remove(&route.res, ns, name),
                _ => None,
            });
            if let Some(removed) = removed {
                return Ok(removed);
            }
        }
    }

    /// DELETE on a collection: deletes every matching object; answers them.
    pub(crate) fn delete_collection(
        &self,
        route: &Route,
        labels: &LabelSelector,
        fields: &FieldSelector,
        options: &Value,
        dry_run: bool,
    ) -> (u64, Vec<Arc<Value>>) {
        let (_, items) = self.list(route, labels, fields);
        let deleted = items
            .iter()
            .filter_map(|o| {
                let ns = meta_str(o, "namespace");
                let one = Route {
                    namespace: (!ns.is_empty()).then(|| ns.to_string()),
                    name: Some(meta_str(o, "name").to_string()),
                    ..route.clone()
                };
                self.delete(&one, options, dry_run).ok()
            })
            .collect();
        (lock(&self.store).rv(), deleted)
    }
}
