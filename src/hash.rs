//! The one stable hash of the project: FNV-1a, 64 bit.
//!
//! Fixed, documented and the same on every
//! machine, every run and every release, so what it picks (an `H` minute, the replica that
//! schedules a CronJob) never moves by itself.

/// FNV-1a 64 over `parts`, with a separator byte between them so `("ab", "c")` and
/// `("a", "bc")` differ.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(PRIME);
        }
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

/// SplitMix64's finalizer: spreads an FNV-1a hash so that inputs differing in their last
/// bytes land far apart (taken modulo a small number, or compared as scores).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors_and_separated_parts() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x8594_4171_f739_67e8);
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
        assert_ne!(fnv1a64(&[b"abc"]), fnv1a64(&[b"ab", b"c"]));
    }
}
