//! The shard bucket every CronJob and every Job of a CronJob carries in [`LABEL_SHARD`].
//!
//! A CronJob's bucket is a fixed function of its namespace and name; its Jobs carry the same
//! bucket. With `--sharding`, replicas divide the buckets between them and each watches only
//! the objects labelled with its own buckets, so a replica caches only its share. The label is
//! set by the mutating webhook (CronJobs) and by the controller (the Jobs it creates, and any
//! object found without it or with a wrong value).

/// The label holding an object's shard bucket, `0` to `BUCKETS - 1` in decimal.
pub const LABEL_SHARD: &str = "batch.kronjob.dev/shard";

/// How many buckets the objects are spread over. More buckets balance replicas more finely
/// but make longer label selectors: with 256, three replicas' shares of 10,000 CronJobs are
/// within a few percent of even, and the longest selector (every bucket) is about 1 KB.
pub const BUCKETS: u16 = 256;

/// The bucket of the CronJob `namespace/name` (and of its Jobs): FNV-1a of both, with
/// SplitMix64's finalizer so that names differing in their last characters spread evenly.
/// Part of the protocol between replicas and releases: it never changes.
pub fn bucket(namespace: &str, name: &str) -> u16 {
    let z = crate::hash::mix64(crate::hash::fnv1a64(&[
        namespace.as_bytes(),
        name.as_bytes(),
    ]));
    // The remainder is below BUCKETS, which fits in u16.
    (z % u64::from(BUCKETS)) as u16
}

/// The label value of a bucket.
pub fn label_value(bucket: u16) -> String {
    bucket.to_string()
}

/// The label selector matching objects labelled with any of `buckets`; one that matches no
/// object when `buckets` is empty (a replica that owns nothing watches nothing).
pub fn selector(buckets: &[u16]) -> String {
    if buckets.is_empty() {
        return format!("{LABEL_SHARD} in (none)");
    }
    let values: Vec<String> = buckets.iter().map(|b| b.to_string()).collect();
    format!("{LABEL_SHARD} in ({})", values.join(","))
}

/// The label selector matching objects without a valid bucket: no label, or a value that is
/// not a bucket. The replicas label these.
pub fn stray_selector() -> String {
    let all: Vec<u16> = (0..BUCKETS).collect();
    selector(&all).replacen(" in (", " notin (", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_fixed_in_range_and_spread() {
        // Fixed values: replicas of different releases must agree.
        assert_eq!(bucket("default", "nightly"), bucket("default", "nightly"));
        assert_ne!(bucket("ab", "c"), bucket("a", "bc"));
        let mut counts = [0usize; BUCKETS as usize];
        for i in 0..10_000 {
            let b = bucket(&format!("team-{}", i % 7), &format!("cj-{i}"));
            assert!(b < BUCKETS);
            counts[usize::from(b)] += 1;
        }
        let fair = 10_000 / usize::from(BUCKETS);
        for (b, c) in counts.iter().enumerate() {
            assert!(
                c.abs_diff(fair) * 100 <= fair * 50,
                "bucket {b}: {c}, fair {fair}"
            );
        }
    }

    #[test]
    fn selectors_name_the_buckets_or_nothing() {
        assert_eq!(selector(&[3, 17]), "batch.kronjob.dev/shard in (3,17)");
        assert_eq!(selector(&[]), "batch.kronjob.dev/shard in (none)");
        let stray = stray_selector();
        assert!(
            stray.starts_with("batch.kronjob.dev/shard notin (0,1,2,"),
            "{stray}"
        );
        assert!(stray.ends_with(",254,255)"), "{stray}");
        assert!(selector(&(0..BUCKETS).collect::<Vec<_>>()).len() < 1_100);
        assert_eq!(label_value(9), "9");
    }
}
