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
        if a.reason.trim().is_empty() {
            return Err(format!(
                "--ack {}: entry {i} (`{}`): reason is empty. Fix: say why the regression is accepted",
                path.display(),
                a.series
            ));
        }
        if let Some(e) = &a.expires {
            if !super::store::is_date(e) {
                return Err(format!(
                    "--ack {}: entry {i} (`{}`): expires `{e}` is not YYYY-MM-DD",
                    path.display(),
                    a.series
                ));
            }
        }
    }
    Ok(acks)
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
        std::fs::write(&p, "- {series: x, reason: ''}\n").unwrap();
        assert!(load_acks(&p).unwrap_err().contains("reason is empty"));
    }
}
