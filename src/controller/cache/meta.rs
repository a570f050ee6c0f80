//! Object metadata as the caches keep it: what the controllers read (identity, version,
//! generation, creation and deletion time, the controller owner, kronjob's own annotations),
//! decoded straight from the API server's JSON. managedFields, labels, finalizers and every
//! other annotation are skipped while decoding, never allocated.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Annotations kept: kronjob's own (the trigger of a manual run, a Job's scheduled time or
/// manual mark, a Pod's TTL). Any other annotation (`last-applied-configuration`, a user's) is
/// never read by a controller; nor is any label (a label map costs ~0.6 KB per object).
pub const KEPT_ANNOTATIONS: &str = "batch.kronjob.dev/";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    annotations: Option<Ours>,
    #[serde(default)]
    owner_references: Option<Controller>,
}

/// The annotations under [`KEPT_ANNOTATIONS`]; the others are skipped unread.
struct Ours(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Ours {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kept;
        impl<'de> Visitor<'de> for Kept {
            type Value = Ours;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ours, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<KeyIfKept>()? {
                    match key.0 {
                        Some(key) => {
                            kept.insert(key, map.next_value::<String>()?);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Ours(kept))
            }
        }
        d.deserialize_map(Kept)
    }
}

/// An annotation's key, allocated only when it is kept.
struct KeyIfKept(Option<String>);

impl<'de> Deserialize<'de> for KeyIfKept {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = KeyIfKept;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an annotation key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyIfKept, E> {
                Ok(KeyIfKept(
                    v.starts_with(KEPT_ANNOTATIONS).then(|| v.to_string()),
                ))
            }
        }
        d.deserialize_str(Key)
    }
}

/// The owner references, of which only the controller's is kept.
struct Controller(Option<OwnerReference>);

impl<'de> Deserialize<'de> for Controller {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let all = Vec::<OwnerReference>::deserialize(d)?;
        Ok(Controller(
            all.into_iter().find(|r| r.controller == Some(true)),
        ))
    }
}

impl From<Wire> for ObjectMeta {
    fn from(w: Wire) -> Self {
        ObjectMeta {
            name: w.name,
            namespace: w.namespace,
            uid: w.uid,
            resource_version: w.resource_version,
            generation: w.generation,
            creation_timestamp: w.creation_timestamp,
            deletion_timestamp: w.deletion_timestamp,
            annotations: w.annotations.map(|a| a.0).filter(|a| !a.is_empty()),
            owner_references: w.owner_references.and_then(|c| c.0).map(|r| vec![r]),
            ..ObjectMeta::default()
        }
    }
}

/// Decode `metadata` keeping only what the controllers read (for `deserialize_with`).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    Wire::deserialize(d).map(ObjectMeta::from)
}

/// Encode `metadata` as usual (for `serialize_with`, next to [`deserialize`]).
pub fn serialize<S: serde::Serializer>(meta: &ObjectMeta, s: S) -> Result<S::Ok, S::Error> {
    meta.serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Holder {
        #[serde(deserialize_with = "deserialize")]
        metadata: ObjectMeta,
    }

    #[test]
    fn keeps_what_is_read_and_skips_the_rest() {
        let json = json!({"metadata": {
            "name": "cj", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z",
            "labels": {"a": "b", "batch.kronjob.dev/shard": "7"},
            "finalizers": ["f"],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}",
                "batch.kronjob.dev/trigger": "2026-01-01T00:00:00Z",
                "team": "x"
            },
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "ux"},
                {"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob", "name": "cj",
                 "uid": "uc", "controller": true}
            ],
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                               "fieldsV1": {"f:spec": {}}}]
        }});
        let meta = serde_json::from_value::<Holder>(json)
            .expect("decodes")
            .metadata;
        assert_eq!(meta.name.as_deref(), Some("cj"));
        assert_eq!(meta.namespace.as_deref(), Some("ns"));
        assert_eq!(meta.uid.as_deref(), Some("u"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.generation, Some(3));
        assert!(meta.creation_timestamp.is_some() && meta.deletion_timestamp.is_some());
        let annotations = meta.annotations.expect("kronjob's annotation");
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["batch.kronjob.dev/trigger"]
        );
        let owners = meta.owner_references.expect("the controller");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, "uc");
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.labels, None);
        assert_eq!(meta.finalizers, None);
    }

    #[test]
    fn absent_or_null_fields_are_none() {
        let json = json!({"metadata": {"name": "a", "annotations": null,
                                        "ownerReferences": [{"apiVersion": "v1", "kind": "X",
                                                             "name": "x", "uid": "ux"}]}});
        let meta = serde_json::from_value::<Holder>(json)
            .expect("decodes")
            .metadata;
        assert_eq!(meta.annotations, None);
        assert_eq!(meta.owner_references, None);
        let only_others = json!({"metadata": {"annotations": {"team": "x"}}});
        let meta = serde_json::from_value::<Holder>(only_others)
            .expect("decodes")
            .metadata;
        assert_eq!(meta.annotations, None);
    }
}
