//! The backfill request a CronJob carries in its `batch.kronjob.dev/backfill` annotation
//! (`kubectl kronjob backfill`), read and checked the same way by the webhook, the controller
//! and the plugin. Pure.

use jiff::Timestamp;

/// Most Jobs of one backfill running at once (`--parallel`).
pub const MAX_PARALLEL: u32 = 10;
/// A backfill request: the slots of `[from, to]`, at most `parallel` Jobs at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The first instant of the range (inclusive).
    pub from: Timestamp,
    /// The last instant of the range (inclusive).
    pub to: Timestamp,
    /// Most Jobs of the backfill unfinished at once, 1 to [`MAX_PARALLEL`].
    pub parallel: u32,
}

impl Request {
    /// Read the annotation's value: `{"from": T1, "to": T2, "parallel": N}`; `parallel`
    /// defaults to 1.
    pub fn parse(value: &str) -> Result<Request, String> {
        let v: serde_json::Value =
            serde_json::from_str(value).map_err(|e| format!("not a JSON object: {e}"))?;
        let time = |field: &str| -> Result<Timestamp, String> {
            let text = v
                .get(field)
                .and_then(|t| t.as_str())
                .ok_or_else(|| format!("{field:?} (an RFC 3339 time) is required"))?;
            text.parse()
                .map_err(|e| format!("{field:?} is not an RFC 3339 time: {e}"))
        };
        let from = time("from")?;
        let to = time("to")?;
        let parallel = match v.get("parallel") {
            None => 1,
            Some(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("\"parallel\" must be a number, not {n}"))?,
        };
        Request::new(from, to, parallel)
    }

    /// A request, checked: `from` not after `to`, `parallel` within 1 to [`MAX_PARALLEL`].
    pub fn new(from: Timestamp, to: Timestamp, parallel: u32) -> Result<Request, String> {
        if to < from {
            return Err(format!("\"to\" {to} is before \"from\" {from}"));
        }
        if !(1..=MAX_PARALLEL).contains(&parallel) {
            return Err(format!(
                "\"parallel\" must be 1 to {MAX_PARALLEL}, not {parallel}"
            ));
        }
        Ok(Request { from, to, parallel })
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        serde_json::json!({
            "from": self.from.to_string(),
            "to": self.to.to_string(),
            "parallel": self.parallel,
        })
        .to_string()
    }
}
