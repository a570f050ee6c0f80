//! The table of deliberate differences from upstream Kubernetes' CronJob controller tests
//! (`docs/upstream-differences.md`), read by the ported tests: a case ported with a
//! difference must be in the table, linking to the reason the test gives, and a case in the
//! table must be ported with a difference.

const DIFFERENCES: &str = include_str!("../../docs/upstream-differences.md");

/// The rows of the table for upstream test `test`: (case, the whole row).
pub fn documented(test: &str) -> Vec<(String, &'static str)> {
    DIFFERENCES
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix('|')?.split('|').map(str::trim);
            let listed = cells.next()?.trim_matches('`');
            let case = cells.next()?.trim_matches('`');
            (listed == test).then(|| (case.to_string(), line))
        })
        .collect()
}

/// Disagreements between the ported `cases` of upstream test `test` (name, and the reason's
/// anchor when kronjob differs on it) and the table: a differing case it lacks or gives
/// another reason, a passing case it lists, or a case it lists that was not ported.
pub fn undocumented(test: &str, cases: &[(&str, Option<&str>)]) -> Vec<String> {
    let listed = documented(test);
    let mut problems = Vec::new();
    for (name, why) in cases {
        let row = listed
            .iter()
            .find(|(case, _)| case == name)
            .map(|(_, r)| *r);
        match (why, row) {
            (Some(why), None) => problems.push(format!(
                "{test} / {name}: differs from upstream ({why}) but is not in docs/upstream-differences.md"
            )),
            (Some(why), Some(row)) if !row.contains(&format!("(#{why})")) => problems.push(
                format!("{test} / {name}: the table does not link the reason #{why}"),
            ),
            (None, Some(_)) => problems.push(format!(
                "{test} / {name}: listed in docs/upstream-differences.md but passes as upstream"
            )),
            _ => {}
        }
    }
    problems
}
