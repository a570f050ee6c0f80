//! An API time as the caches keep it: whole seconds in 8 bytes, and `Option<Second>` in the
//! same 8 (an `Option<Timestamp>` takes 24). API times carry whole seconds, so nothing read is
//! lost.

use std::num::NonZeroI64;

use jiff::Timestamp;

/// An instant, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Second(NonZeroI64);

impl Second {
    /// `at`, less any fraction of a second.
    pub fn new(at: Timestamp) -> Self {
        // With the sign bit flipped, zero stands for i64::MIN seconds, far outside a Timestamp's
        // range: every instant has a non-zero value and `None` takes no room of its own.
        Second(NonZeroI64::new(at.as_second() ^ i64::MIN).unwrap_or(NonZeroI64::MIN))
    }

    /// The instant.
    pub fn at(self) -> Timestamp {
        Timestamp::from_second(self.0.get() ^ i64::MIN).unwrap_or(Timestamp::MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_come_back_to_the_second_in_eight_bytes() {
        for text in [
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-11-27T20:08:01Z",
            "-009999-01-02T01:59:59Z",
            "9999-12-30T22:00:00Z",
        ] {
            let at: Timestamp = text.parse().expect("a timestamp");
            assert_eq!(Second::new(at).at(), at, "{text}");
        }
        let fraction: Timestamp = "2026-11-27T20:08:01.75Z".parse().expect("a timestamp");
        assert_eq!(
            Second::new(fraction).at().to_string(),
            "2026-11-27T20:08:01Z"
        );
        assert_eq!(std::mem::size_of::<Option<Second>>(), 8);
    }
}
