//! Label and field selectors in the API server's string syntax.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector: every requirement must hold (comma = AND).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn key(k: &str) -> Result<String, String> {
    let k = k.trim();
    if k.is_empty() || k.contains(char::is_whitespace) {
        return Err(format!("invalid label key {k:?}"));
    }
    Ok(k.to_string())
}

impl LabelSelector {
    /// Parses `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, joined by commas.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_top_level(s)
            .into_iter()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let req = if let Some(open) = term.find('(') {
                let values = term[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| format!("unterminated set in {term:?}"))?;
                let values: Vec<String> = values
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                let head = term[..open].trim_end();
                if let Some(k) = head.strip_suffix(" notin") {
                    Requirement::NotIn(key(k)?, values)
                } else if let Some(k) = head.strip_suffix(" in") {
                    Requirement::In(key(k)?, values)
                } else {
                    return Err(format!("expected `in` or `notin` in {term:?}"));
                }
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(key(k)?)
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(key(k)?, v.trim().to_string())
            } else {
                Requirement::Exists(key(term)?)
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
        })
    }
}

/// A parsed field selector: `path=v`, `path==v`, `path!=v` on dotted paths, joined by commas.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, String, bool)>);

impl FieldSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
                (p, v, false)
            } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (p, v, true)
            } else {
                return Err(format!("invalid field selector term {term:?}"));
            };
            let path = path.trim().split('.').map(str::to_string).collect();
            terms.push((path, value.trim().to_string(), equal));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether every term holds; a missing field compares as the empty string.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, want, equal)| {
            let found = path.iter().try_fold(object, |v, seg| v.get(seg.as_str()));
            let actual = match found {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (actual == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labeled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "ns", "labels": labels}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selector_syntax() {
        let o = labeled(json!({"app": "web", "tier": "front"}));
        let yes = [
            "",
            "app",
            "!db",
            "app=web",
            "app==web",
            "app!=db",
            "db!=x",
            "app in (web, api)",
            "app notin (db)",
            "db notin (x)",
            "app=web,tier in (front),!db",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).expect(s).matches(&o), "{s}");
        }
        let no = [
            "db",
            "!app",
            "app=api",
            "app!=web",
            "app in (api)",
            "db in (x)",
            "app notin (web,db)",
            "app=web,tier=back",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).expect(s).matches(&o), "{s}");
        }
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("app within (a)").is_err());
    }

    #[test]
    fn field_selector_syntax() {
        let o = labeled(json!({}));
        for s in [
            "metadata.name=x",
            "metadata.namespace==ns",
            "status.phase!=Failed",
            "spec.x=",
        ] {
            assert!(FieldSelector::parse(s).expect(s).matches(&o), "{s}");
        }
        for s in [
            "metadata.name=y",
            "metadata.name=x,status.phase=Failed",
            "metadata.name!=x",
        ] {
            assert!(!FieldSelector::parse(s).expect(s).matches(&o), "{s}");
        }
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
