//! Request paths and query strings, and the small table of well-known resources.

/// Which collection an object lives in: (API group, plural). The version is not part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ResKey {
    pub(crate) group: String,
    pub(crate) plural: String,
}

impl ResKey {
    pub(crate) fn new(group: &str, plural: &str) -> Self {
        ResKey {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }

    /// `jobs.batch`, or `pods` for the core group, as the API server's messages name resources.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// A request on a resource path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Route {
    pub(crate) res: ResKey,
    pub(crate) version: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) sub: Option<String>,
}

impl Route {
    pub(crate) fn api_version(&self) -> String {
        api_version(&self.res.group, &self.version)
    }

    pub(crate) fn is_status(&self) -> bool {
        self.sub.as_deref() == Some("status")
    }
}

pub(crate) fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion(String, String),
    Resource(Route),
    Unknown,
}

/// Parses a request path.
pub(crate) fn parse_path(path: &str) -> Target {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["version"] => Target::Version,
        ["healthz" | "readyz" | "livez"] => Target::Health,
        ["api"] => Target::CoreVersions,
        ["apis"] => Target::Groups,
        ["api", v] => Target::GroupVersion(String::new(), v.to_string()),
        ["apis", g, v] => Target::GroupVersion(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        _ => Target::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Target {
    let route = |ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        if [Some(plural), ns, name, sub]
            .into_iter()
            .flatten()
            .any(str::is_empty)
        {
            return Target::Unknown;
        }
        Target::Resource(Route {
            res: ResKey::new(group, plural),
            version: version.to_string(),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            sub: sub.map(str::to_string),
        })
    };
    match rest {
        // `namespaces/{name}/status` is the namespace's own subresource, not a collection.
        ["namespaces", ns, p] if !matches!(*p, "status" | "finalize") => {
            route(Some(ns), p, None, None)
        }
        ["namespaces", ns, p, name] => route(Some(ns), p, Some(name), None),
        ["namespaces", ns, p, name, sub] => route(Some(ns), p, Some(name), Some(sub)),
        [p] => route(None, p, None, None),
        [p, name] => route(None, p, Some(name), None),
        [p, name, sub] => route(None, p, Some(name), Some(sub)),
        _ => Target::Unknown,
    }
}

/// A decoded query string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(query: &str) -> Self {
        let pairs = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect();
        Query(pairs)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `true` or `1`.
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// Percent-decoding of `application/x-www-form-urlencoded` (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A resource the simulator knows by kind: (group, version, kind, plural, namespaced).
pub(crate) const WELL_KNOWN: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Pod", "pods", true),
    ("", "v1", "Namespace", "namespaces", false),
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "Secret", "secrets", true),
    ("", "v1", "Service", "services", true),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("", "v1", "Event", "events", true),
    ("events.k8s.io", "v1", "Event", "events", true),
    ("apps", "v1", "Deployment", "deployments", true),
    ("batch", "v1", "Job", "jobs", true),
    ("batch", "v1", "CronJob", "cronjobs", true),
    ("coordination.k8s.io", "v1", "Lease", "leases", true),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
];

/// Plurals that are cluster-scoped in any group.
const CLUSTER_SCOPED: &[&str] = &[
    "customresourcedefinitions",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "namespaces",
    "clusterroles",
    "clusterrolebindings",
];

pub(crate) fn is_cluster_scoped(plural: &str) -> bool {
    CLUSTER_SCOPED.contains(&plural)
}

/// Plurals with a status subresource in any group.
pub(crate) fn has_status_subresource(plural: &str) -> bool {
    matches!(
        plural,
        "jobs" | "cronjobs" | "pods" | "customresourcedefinitions" | "namespaces"
    )
}

/// The plural of a kind: the table, else English rules on the lowercased kind.
pub(crate) fn plural_of(group: &str, kind: &str) -> String {
    if let Some(row) = WELL_KNOWN.iter().find(|r| r.0 == group && r.2 == kind) {
        return row.3.to_string();
    }
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower
        .strip_suffix('y')
        .filter(|s| !s.ends_with(['a', 'e', 'o', 'u']))
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The kind of a plural, when the table knows it.
pub(crate) fn kind_of(group: &str, plural: &str) -> Option<&'static str> {
    WELL_KNOWN
        .iter()
        .find(|r| r.0 == group && r.3 == plural)
        .map(|r| r.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Route {
        match parse_path(path) {
            Target::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths() {
        let r = route("/apis/batch/v1/namespaces/ns/jobs/j/status");
        assert_eq!(
            (r.res.qualified(), r.namespace.as_deref(), r.name.as_deref()),
            ("jobs.batch".into(), Some("ns"), Some("j"))
        );
        assert!(r.is_status());
        let r = route("/api/v1/namespaces/ns1");
        assert_eq!(
            (r.res.plural.as_str(), r.namespace, r.name.as_deref()),
            ("namespaces", None, Some("ns1"))
        );
        let r = route("/api/v1/namespaces/ns1/status");
        assert_eq!(
            (r.name.as_deref(), r.sub.as_deref()),
            (Some("ns1"), Some("status"))
        );
        let r = route("/api/v1/namespaces/ns1/pods");
        assert_eq!((r.namespace.as_deref(), r.name), (Some("ns1"), None));
        let r = route("/apis/batch/v1/jobs");
        assert_eq!((r.namespace, r.name), (None, None));
        assert_eq!(
            parse_path("/apis/batch/v1"),
            Target::GroupVersion("batch".into(), "v1".into())
        );
        assert_eq!(parse_path("/version"), Target::Version);
        assert_eq!(
            parse_path("/apis/batch/v1/namespaces/ns/jobs/a/b/c"),
            Target::Unknown
        );
    }

    #[test]
    fn queries_decode() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=1&x");
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(decode("100%"), "100%");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural_of("batch.kronjob.dev", "CronJob"), "cronjobs");
        assert_eq!(plural_of("x", "Policy"), "policies");
        assert_eq!(plural_of("x", "Ingress"), "ingresses");
        assert_eq!(plural_of("x", "Gateway"), "gateways");
    }
}
