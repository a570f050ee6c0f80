//! kubectl-style output: aligned tables, ages, and `-o json|yaml`. Pure: the current time is
//! passed in.

use std::io::Write;

use jiff::Timestamp;
use serde::Serialize;

/// What kubectl prints for a missing value.
pub const NONE: &str = "<none>";

/// Spaces between columns (kubectl's tabwriter padding).
const GAP: usize = 3;

/// A table with an upper-case header; every column is as wide as its widest cell, columns are
/// separated by three spaces and no line ends in spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles (printed upper case).
    pub fn new<S: AsRef<str>>(header: &[S]) -> Self {
        Table {
            header: header.iter().map(|h| h.as_ref().to_uppercase()).collect(),
            rows: Vec::new(),
        }
    }

    /// A table whose column titles print as given (e.g. time zone names).
    pub fn verbatim<S: AsRef<str>>(header: &[S]) -> Self {
        Table {
            header: header.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; missing cells print empty, extra cells are ignored.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row after the header, each ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                line.push_str(cell);
                if i + 1 < columns {
                    let pad = width - cell.chars().count() + GAP;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

/// A duration as kubectl prints ages (apimachinery's `HumanDuration`): about two significant
/// figures, `45s`, `3m`, `5m30s`, `2h10m`, `26h`, `4d`, `3d4h`, `400d`, `2y30d`, `9y`.
/// Negative durations of up to a second print `0s` (clock skew), larger ones `<invalid>`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_rest(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return with_rest(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

fn with_rest(whole: i64, unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{whole}{unit}")
    } else {
        format!("{whole}{unit}{rest}{rest_unit}")
    }
}

/// Time since `then`, as kubectl's AGE column prints it.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    human_duration(now.as_second() - then.as_second())
}

/// `3m ago`.
pub fn ago(then: Timestamp, now: Timestamp) -> String {
    format!("{} ago", age(then, now))
}

/// `in 47s`.
pub fn from_now(then: Timestamp, now: Timestamp) -> String {
    format!("in {}", human_duration(then.as_second() - now.as_second()))
}

/// `-o` for commands printing objects: a table, a wider table, or the data.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The table with more columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

impl Format {
    /// The data format, when `-o` asks for data rather than a table.
    pub fn data(self) -> Option<DataFormat> {
        match self {
            Format::Wide => None,
            Format::Json => Some(DataFormat::Json),
            Format::Yaml => Some(DataFormat::Yaml),
        }
    }
}

/// `-o` for commands printing results: the data instead of text.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Write `data` as pretty JSON or YAML.
pub fn write_data<T: Serialize>(
    data: &T,
    format: DataFormat,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        DataFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, data).map_err(std::io::Error::other)?;
            writeln!(out)
        }
        DataFormat::Yaml => {
            let text = serde_saphyr::to_string(data).map_err(std::io::Error::other)?;
            out.write_all(text.as_bytes())
        }
    }
}

/// kubectl's `-o json|yaml` for several objects: a `v1` `List` of them.
pub fn list_of<T: Serialize>(items: &[T]) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::fixtures::t;

    #[test]
    fn human_duration_table() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60 + 30, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (2 * 3600 + 10 * 60, "130m"),
            (3 * 3600 + 10 * 60, "3h10m"),
            (7 * 3600 + 59 * 60 + 59, "7h59m"),
            (8 * 3600 + 30 * 60, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (4 * 86400, "4d"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (2 * 365 * 86400 + 30 * 86400, "2y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(*seconds), *want, "{seconds}s");
        }
    }

    #[test]
    fn ages_relative_to_now() {
        let now = t("2024-01-15T10:00:00Z");
        assert_eq!(age(t("2024-01-15T09:57:00Z"), now), "3m");
        assert_eq!(ago(t("2024-01-15T09:59:15Z"), now), "45s ago");
        assert_eq!(from_now(t("2024-01-15T10:00:47Z"), now), "in 47s");
        assert_eq!(from_now(t("2024-01-19T10:00:00Z"), now), "in 4d");
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_plus_three() {
        let mut table = Table::new(&["name", "schedule", "suspend"]);
        table.push(vec!["a".into(), "*/5 * * * *".into(), "false".into()]);
        table.push(vec!["long-name".into(), "@daily".into(), "true".into()]);
        assert_eq!(
            table.render(),
            "NAME        SCHEDULE      SUSPEND\n\
             a           */5 * * * *   false\n\
             long-name   @daily        true\n"
        );
    }

    #[test]
    fn no_trailing_spaces_and_missing_cells_print_empty() {
        let mut table = Table::new(&["a", "b", "c"]);
        table.push(vec!["x".into(), "y".into(), String::new()]);
        table.push(vec!["x".into()]);
        assert_eq!(table.render(), "A   B   C\nx   y\nx\n");
        assert!(!table.is_empty());
        assert!(Table::new(&["a"]).is_empty());
        assert_eq!(Table::new(&["only"]).render(), "ONLY\n");
    }

    #[test]
    fn width_counts_characters_not_bytes() {
        let mut table = Table::new(&["a", "b"]);
        table.push(vec!["é".into(), "x".into()]);
        assert_eq!(table.render(), "A   B\né   x\n");
    }

    #[test]
    fn data_as_json_and_yaml() {
        let data = list_of(&[serde_json::json!({"a": 1})]);
        let mut json = Vec::new();
        write_data(&data, DataFormat::Json, &mut json).expect("json");
        let back: serde_json::Value = serde_json::from_slice(&json).expect("parses");
        assert_eq!(back, data);
        assert!(json.ends_with(b"}\n"));
        let mut yaml = Vec::new();
        write_data(&data, DataFormat::Yaml, &mut yaml).expect("yaml");
        let text = String::from_utf8(yaml).expect("utf-8");
        assert!(text.contains("kind: List"), "{text}");
        let back: serde_json::Value = serde_yaml_ng::from_str(&text).expect("parses");
        assert_eq!(back, data);
    }
}
