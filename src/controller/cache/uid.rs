//! A UID as the caches keep it: the 16 bytes of a canonical UUID (what the API server
//! assigns), else the text; [`Uid::text`] gives back exactly what was read.

/// A UID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A canonical (lowercase, hyphenated) UUID.
    Uuid([u8; 16]),
    /// Anything else.
    Text(Box<str>),
}

impl Uid {
    /// `uid`, compacted if it is a canonical UUID.
    pub fn new(uid: &str) -> Self {
        match uuid_bytes(uid) {
            Some(bytes) => Uid::Uuid(bytes),
            None => Uid::Text(uid.into()),
        }
    }

    /// The UID as read.
    pub fn text(&self) -> String {
        match self {
            Uid::Uuid(bytes) => {
                let mut out = String::with_capacity(36);
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        out.push('-');
                    }
                    out.push(hex_digit(b >> 4));
                    out.push(hex_digit(b & 0xf));
                }
                out
            }
            Uid::Text(t) => t.to_string(),
        }
    }
}

/// Byte offsets of the hyphens in a canonical UUID.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

fn hex_digit(v: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(v & 0xf)])
}

/// The bytes of `s` if it is a canonical UUID, else `None`.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || HYPHENS.iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let mut digits = b
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, &c)| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        });
    let mut out = [0u8; 16];
    for byte in &mut out {
        let hi = digits.next()??;
        let lo = digits.next()??;
        *byte = (hi << 4) | lo;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0f8e2a3c-1b4d-4e5f-a6b7-c8d9e0f1a2b3";

    #[test]
    fn uuids_round_trip_through_their_bytes() {
        let bytes = uuid_bytes(UUID).expect("canonical");
        assert_eq!(bytes[0], 0x0f);
        assert_eq!(bytes[15], 0xb3);
        assert_eq!(Uid::new(UUID), Uid::Uuid(bytes));
        assert_eq!(Uid::new(UUID).text(), UUID);
    }

    #[test]
    fn anything_else_is_kept_as_text() {
        for odd in [
            "",
            "not-a-uuid",
            "0F8E2A3C-1B4D-4E5F-A6B7-C8D9E0F1A2B3",
            "0f8e2a3c-1b4d-4e5f-a6b7-c8d9e0f1a2bg",
            "0f8e2a3c1b4d-4e5f-a6b7-c8d9e0f1a2b3-",
            "0f8e2a3c_1b4d_4e5f_a6b7_c8d9e0f1a2b3",
        ] {
            let uid = Uid::new(odd);
            assert!(matches!(uid, Uid::Text(_)), "{odd:?}");
            assert_eq!(uid.text(), odd);
        }
    }
}
