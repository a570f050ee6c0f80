//! Label selectors in the API server's string syntax, checked before they are used.
//!
//! The manager's `--selector` and the plugin's `-l` are checked here, so a bad value is
//! refused at start with a message instead of failing every watch or list.

/// Check a label selector such as `team=a,tier!=web,env in (prod, staging),!legacy`.
/// Returns the selector unchanged when it is valid.
pub fn parse_selector(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty label selector".into());
    }
    for requirement in split_top_level(trimmed)? {
        check_requirement(requirement.trim())
            .map_err(|e| format!("invalid label selector {text:?}: {e}"))?;
    }
    Ok(trimmed.to_string())
}

/// Split on commas that are not inside a `( ... )` value set.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in {text:?}"))?;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in {text:?}"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn check_requirement(req: &str) -> Result<(), String> {
    if req.is_empty() {
        return Err("empty requirement".into());
    }
    if let Some(key) = req.strip_prefix('!') {
        return check_key(key.trim());
    }
    for op in ["!=", "==", "="] {
        if let Some((key, value)) = req.split_once(op) {
            check_key(key.trim())?;
            return check_value(value.trim());
        }
    }
    for op in [" notin ", " in "] {
        if let Some((key, set)) = req.split_once(op) {
            check_key(key.trim())?;
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("{op:?} needs a value set in parentheses"))?;
            return inner.split(',').try_for_each(|v| check_value(v.trim()));
        }
    }
    check_key(req)
}

fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if !ok {
            return Err(format!("invalid key prefix {prefix:?}"));
        }
    }
    if name.is_empty() || !is_label_word(name) {
        return Err(format!("invalid key {key:?}"));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_word(value) {
        Ok(())
    } else {
        Err(format!("invalid value {value:?}"))
    }
}

/// At most 63 characters of `[A-Za-z0-9_.-]`, starting and ending alphanumeric.
fn is_label_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_api_server_syntax() {
        for ok in [
            "team=a",
            "team==a",
            "tier!=web",
            "env in (prod, staging)",
            "env notin (dev)",
            "!legacy",
            "shard",
            "kronjob.dev/shard=1,team=a",
            "team=",
            " team = a , env in (a,b) ",
        ] {
            assert!(parse_selector(ok).is_ok(), "{ok}: {:?}", parse_selector(ok));
        }
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in [
            "",
            "team=a,",
            "=a",
            "team=a b",
            "env in prod",
            "env in (prod",
            "env)",
            "-team=a",
            "Bad_Prefix/x=1",
            "team=-a",
            &"x".repeat(64),
        ] {
            assert!(parse_selector(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
