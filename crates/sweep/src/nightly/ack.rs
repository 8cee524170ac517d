//! Acknowledged regressions (`--ack FILE`): a known regression stops alerting, and the
//! report shows it with the reason. The file is YAML:
//!
//! ```yaml
//! - series: "minilm/stsb-test"   # entry/benchmark, `*` allowed
//!   reason: "tokenizer fix trades 0.6 STS points for +2 on XNLI (PR 123)"
//!   expires: 2026-12-31          # optional: alerts again after this date
//! ```

use super::config::glob;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One acknowledgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// `entry/benchmark` (or `entry/speed:tokens_per_s`), `*` matching any run of characters.
    pub series: String,
    pub reason: String,
    /// `YYYY-MM-DD`: the acknowledgement holds up to and including that date.
    #[serde(default)]
    pub expires: Option<String>,
}

/// Reads an acknowledgement file; errors name the file and the fix.
pub fn load_acks(path: &Path) -> Result<Vec<Ack>, String> {
    let text = harness_core::fsutil::read_text_capped(path, harness_core::fsutil::MAX_CONFIG_BYTES)
        .map_err(|e| format!("--ack {}: cannot read ({e})", path.display()))?;
    let acks: Vec<Ack> = serde_yaml::from_str(&text).map_err(|e| {
        format!(
            "--ack {}: {e}. Fix: a YAML list of {{series: ENTRY/BENCH, reason: TEXT, expires: YYYY-MM-DD}}",
            path.display()
        )
    })?;
    for (i, a) in acks.iter().enumerate() {
        if a.series.trim().is_empty() {
            return Err(format!(
                "--ack {}: entry {i}: series is empty. Fix: ENTRY/BENCH, `*` allowed",
                path.display()
            ));
        }
        if a.reason.trim().is_empty() {
            return Err(format!(
                "--ack {}: entry {i} (`{}`): reason is empty. Fix: say why the regression is accepted",
                path.display(),
                a.series
            ));
        }
        if let Some(e) = &a.expires {
            super::store::check_date("expires", e).map_err(|why| {
                format!(
                    "--ack {}: entry {i} (`{}`): {why}",
                    path.display(),
                    a.series
                )
            })?;
        }
    }
    Ok(acks)
}

/// The acknowledgements that expired before `date` (they alert again): every report names
/// them.
pub fn expired<'a>(acks: &'a [Ack], date: &str) -> Vec<&'a Ack> {
    acks.iter()
        .filter(|a| a.expires.as_deref().is_some_and(|e| e < date))
        .collect()
}

/// The reason `series` is acknowledged on `date`, if it is.
pub fn acknowledged<'a>(acks: &'a [Ack], series: &str, date: &str) -> Option<&'a str> {
    acks.iter()
        .find(|a| glob(&a.series, series) && a.expires.as_deref().is_none_or(|e| date <= e))
        .map(|a| a.reason.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_match_by_pattern_until_they_expire() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("acks.yaml");
        std::fs::write(
            &p,
            "- {series: 'minilm/*', reason: known, expires: 2026-12-01}\n",
        )
        .unwrap();
        let acks = load_acks(&p).unwrap();
        assert_eq!(
            acknowledged(&acks, "minilm/mr", "2026-11-30"),
            Some("known")
        );
        assert_eq!(acknowledged(&acks, "minilm/mr", "2026-12-02"), None);
        assert_eq!(acknowledged(&acks, "laser/mr", "2026-11-30"), None);
        assert!(expired(&acks, "2026-12-01").is_empty());
        assert_eq!(expired(&acks, "2026-12-02").len(), 1);
        std::fs::write(&p, "- {series: x, reason: ''}\n").unwrap();
        assert!(load_acks(&p).unwrap_err().contains("reason is empty"));
        // Not a day of the calendar: refused before it could silence anything (as a string,
        // `2026-13-45` would sort after every real date of 2026).
        for bad in ["2026-13-45", "2026-02-30", "2026-02-29"] {
            std::fs::write(&p, format!("- {{series: x, reason: r, expires: {bad}}}\n")).unwrap();
            let e = load_acks(&p).unwrap_err();
            assert!(
                e.contains("acks.yaml") && e.contains(bad) && e.contains("not a day"),
                "{e}"
            );
        }
        std::fs::write(&p, "- {series: x, reason: r, expires: 2028-02-29}\n").unwrap();
        assert!(load_acks(&p).is_ok());
    }
}
