//! Text that many cached objects hold alike (Job templates, condition words and messages,
//! schedules), kept once: [`text`] hands out one `Arc<str>` per distinct text, held weakly here,
//! so a text lives as long as an object holds it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Texts by hash, each held weakly.
#[derive(Default)]
struct Interner {
    by_hash: HashMap<u64, Vec<Weak<str>>>,
    /// Entries at the last sweep of dead ones.
    swept_at: usize,
}

static TEXTS: LazyLock<Mutex<Interner>> = LazyLock::new(Mutex::default);

/// The one copy of `text`, shared with every other holder of the same text.
pub fn text(text: &str) -> Arc<str> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let hash = hasher.finish();
    let mut interner = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    let bucket = interner.by_hash.entry(hash).or_default();
    bucket.retain(|w| w.strong_count() > 0);
    if let Some(found) = bucket
        .iter()
        .filter_map(Weak::upgrade)
        .find(|t| **t == *text)
    {
        return found;
    }
    let fresh: Arc<str> = Arc::from(text);
    bucket.push(Arc::downgrade(&fresh));
    let len = interner.by_hash.len();
    if len > 64 && len > interner.swept_at * 2 {
        interner.by_hash.retain(|_, b| {
            b.retain(|w| w.strong_count() > 0);
            !b.is_empty()
        });
        interner.swept_at = interner.by_hash.len();
    }
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_copy_per_text_while_held() {
        let a = text("shared text 1");
        let b = text("shared text 1");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &text("shared text 2")));
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert_eq!(weak.strong_count(), 0, "not kept alive by the interner");
        assert_eq!(&*text("shared text 1"), "shared text 1");
    }
}
