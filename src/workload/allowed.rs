//! Which workload kinds the manager may create: `--workload-kinds`, resources named
//! `RESOURCE.GROUP` (`jobsets.jobset.x-k8s.io`), batch/v1 Jobs (`jobs.batch`) by default. The
//! install grants the matching RBAC; a kind outside the list is never created, whatever a
//! CronJob names (the webhook refuses such a CronJob, the reconciler reports it). Pure.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The kinds the manager may create, as `(resource, group)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedKinds(BTreeSet<(String, String)>);

/// What `--workload-kinds` is when not given.
pub const DEFAULT: &str = "jobs.batch";

impl Default for AllowedKinds {
    fn default() -> Self {
        DEFAULT.parse().unwrap_or(AllowedKinds(BTreeSet::new()))
    }
}

impl AllowedKinds {
    /// Whether the resource `plural` of `group` may be created.
    pub fn allows(&self, plural: &str, group: &str) -> bool {
        self.0.contains(&(plural.to_string(), group.to_string()))
    }

    /// Whether any resource of `group` may be created.
    pub fn allows_group(&self, group: &str) -> bool {
        self.0.iter().any(|(_, g)| g == group)
    }

    /// Why a CronJob naming `name` (`RESOURCE.GROUP`) runs nothing: `this install of kronjob
    /// does not create rayjobs.ray.io (--workload-kinds is jobs.batch)`.
    pub fn refusal(&self, name: &str) -> String {
        format!("this install of kronjob does not create {name} (--workload-kinds is {self})")
    }

    /// The kinds, as `RESOURCE.GROUP`.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.0
            .iter()
            .map(|(plural, group)| format!("{plural}.{group}"))
    }
}

impl fmt::Display for AllowedKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.names().collect();
        f.write_str(&names.join(","))
    }
}

/// Whether `s` is a DNS label (what a resource name and each part of a group are).
fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

impl FromStr for AllowedKinds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut kinds = BTreeSet::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let (plural, group) = name.split_once('.').ok_or_else(|| {
                format!(
                    "{name:?} is not RESOURCE.GROUP (e.g. jobsets.jobset.x-k8s.io; core kinds cannot be scheduled)"
                )
            })?;
            if !dns_label(plural) || group.len() > 253 || !group.split('.').all(dns_label) {
                return Err(format!(
                    "{name:?} is not RESOURCE.GROUP: lower-case names, e.g. rayjobs.ray.io"
                ));
            }
            kinds.insert((plural.to_string(), group.to_string()));
        }
        if kinds.is_empty() {
            return Err("no kind given: name at least one, e.g. jobs.batch".into());
        }
        Ok(AllowedKinds(kinds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_resource_dot_group() {
        let allowed: AllowedKinds = "jobs.batch, jobsets.jobset.x-k8s.io,rayjobs.ray.io"
            .parse()
            .expect("valid");
        assert!(allowed.allows("jobs", "batch"));
        assert!(allowed.allows("jobsets", "jobset.x-k8s.io"));
        assert!(!allowed.allows("jobs", "batch.volcano.sh"));
        assert!(allowed.allows_group("ray.io"));
        assert!(!allowed.allows_group("batch.volcano.sh"));
        assert!(!allowed.allows_group("io"), "a whole group, not a suffix");
        assert_eq!(
            allowed.to_string(),
            "jobs.batch,jobsets.jobset.x-k8s.io,rayjobs.ray.io"
        );
        assert_eq!(AllowedKinds::default().to_string(), "jobs.batch");
        assert_eq!(
            AllowedKinds::default().refusal("rayjobs.ray.io"),
            "this install of kronjob does not create rayjobs.ray.io (--workload-kinds is jobs.batch)"
        );
        for bad in [
            "",
            "pods",
            "JobSets.jobset.x-k8s.io",
            "jobs.",
            ".batch",
            "a.b..c",
            " , ",
        ] {
            assert!(bad.parse::<AllowedKinds>().is_err(), "{bad:?}");
        }
    }
}
