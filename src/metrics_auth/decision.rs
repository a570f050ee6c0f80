//! The pure side of the metrics authorization: the bearer token of a request, and the bounded
//! cache of decisions by token (a SHA-256 digest of it; tokens themselves are not kept).

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use lru::LruCache;

/// How long an allowed token stays allowed without asking again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token (unauthenticated or forbidden) stays refused: short, so a
/// binding just created takes effect soon.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Most decisions remembered (the least recently used are forgotten first).
pub const CAPACITY: usize = 1024;
/// Longest token considered; a longer header is refused without asking the API server.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// What a request to `/metrics` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and allowed `get` on `/metrics` (200).
    Allowed,
    /// No token, or one the API server does not authenticate (401).
    Unauthenticated,
    /// Authenticated but not allowed (403).
    Forbidden,
    /// The reviews could not be made (503); never remembered.
    Unavailable,
}

impl Decision {
    /// How long the decision is remembered.
    pub fn ttl(self) -> Duration {
        match self {
            Decision::Allowed => ALLOWED_TTL,
            Decision::Unauthenticated | Decision::Forbidden => REFUSED_TTL,
            Decision::Unavailable => Duration::ZERO,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header value (the scheme in any case);
/// `None` for no header, another scheme, an empty or an oversized token.
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    let token = token.trim();
    let usable = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= MAX_TOKEN_BYTES;
    usable.then_some(token)
}

/// The cache key of `token`.
pub fn token_key(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// Remembered decisions, each until its [`Decision::ttl`] runs out.
#[derive(Debug)]
pub struct Decisions {
    entries: LruCache<[u8; 32], (Decision, Instant)>,
}

impl Default for Decisions {
    fn default() -> Self {
        Decisions::with_capacity(CAPACITY)
    }
}

impl Decisions {
    /// A cache of at most `capacity` decisions.
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Decisions {
            entries: LruCache::new(capacity),
        }
    }

    /// The decision for `key` still in force at `now`.
    pub fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<Decision> {
        let (decision, until) = *self.entries.get(key)?;
        if now < until {
            return Some(decision);
        }
        self.entries.pop(key);
        None
    }

    /// Remember `decision` for `key` from `now` (an [`Decision::Unavailable`] is not).
    pub fn put(&mut self, key: [u8; 32], decision: Decision, now: Instant) {
        let ttl = decision.ttl();
        if !ttl.is_zero() {
            self.entries.put(key, (decision, now + ttl));
        }
    }

    /// Decisions held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        let cases = [
            (None, None),
            (Some("Bearer abc.def"), Some("abc.def")),
            (Some("bearer  abc "), Some("abc")),
            (Some("Basic dXNlcjpwYXNz"), None),
            (Some("Bearer "), None),
            (Some("Bearer"), None),
            (Some(long.as_str()), None),
        ];
        for (header, want) in cases {
            assert_eq!(bearer_token(header), want, "{header:?}");
        }
    }

    #[test]
    fn decisions_expire_by_kind_and_the_cache_is_bounded() {
        let now = Instant::now();
        let mut cache = Decisions::with_capacity(2);
        let (a, b, c) = (token_key("a"), token_key("b"), token_key("c"));
        assert_ne!(a, b);
        cache.put(a, Decision::Allowed, now);
        cache.put(b, Decision::Forbidden, now);
        cache.put(c, Decision::Unavailable, now);
        assert_eq!(cache.len(), 2, "unavailable is not remembered");
        let later = now + REFUSED_TTL;
        assert_eq!(cache.get(&b, later), None, "a refusal expires first");
        assert_eq!(cache.get(&a, later), Some(Decision::Allowed));
        assert_eq!(cache.get(&a, now + ALLOWED_TTL), None);
        assert!(cache.is_empty());
        for i in 0..10 {
            cache.put(token_key(&i.to_string()), Decision::Allowed, now);
        }
        assert_eq!(cache.len(), 2, "bounded");
    }
}
