//! Tool settings (not recipes): where data, caches and runs live, and which mirrors datasets
//! come from. Layered with figment: built-in defaults < `harness.toml` (or the file named by
//! `HARNESS_CONFIG`) < `HARNESS_*` environment variables < command-line flags.

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Every setting, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Where datasets are installed (`datasets fetch` writes here, loaders read here).
    pub data_dir: PathBuf,
    /// Ordered list of mirrors: local directories or http(s) URLs laid out like
    /// `../shared/datasets` (one folder per dataset). The first that has a file wins.
    pub mirrors: Vec<String>,
    /// Embedding cache and other derived data shared by all runs.
    pub cache_dir: PathBuf,
    /// Where pretrained model files are unpacked.
    pub models_dir: PathBuf,
    /// Where `harness run` creates run directories.
    pub runs_dir: PathBuf,
    /// Where `harness sweep` creates sweep directories (ledger, links, logs, report).
    #[serde(default = "default_sweeps_dir")]
    pub sweeps_dir: PathBuf,
}

fn default_sweeps_dir() -> PathBuf {
    PathBuf::from("sweeps")
}

/// The names of the settings keys, which are also the `HARNESS_<KEY>` variables read.
const KEYS: [&str; 6] = [
    "data_dir",
    "mirrors",
    "cache_dir",
    "models_dir",
    "runs_dir",
    "sweeps_dir",
];

impl Default for Settings {
    fn default() -> Self {
        let home = harness_home();
        Settings {
            data_dir: home.join("datasets"),
            mirrors: default_mirrors(),
            cache_dir: home.join("cache"),
            models_dir: home.join("models"),
            runs_dir: PathBuf::from("runs"),
            sweeps_dir: default_sweeps_dir(),
        }
    }
}

/// `$HARNESS_HOME`, else `$XDG_CACHE_HOME/harness`, else `~/.cache/harness`, else
/// `.harness` in the current directory.
fn harness_home() -> PathBuf {
    if let Some(h) = std::env::var_os("HARNESS_HOME") {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("harness");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("harness");
    }
    PathBuf::from(".harness")
}

/// `../shared/datasets` beside the current directory and beside this checkout, so a fresh
/// clone with `../shared` next to it needs no flags.
fn default_mirrors() -> Vec<String> {
    let mut mirrors = vec!["../shared/datasets".to_string()];
    let beside_checkout = crate::shared_datasets_dir();
    let s = beside_checkout.to_string_lossy().into_owned();
    if !mirrors.contains(&s) {
        mirrors.push(s);
    }
    mirrors
}

/// Command-line overrides, applied last.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlagOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<Vec<String>>,
}

impl Settings {
    /// The layered figment, before extraction (exposed for tests and `--show-settings`).
    pub fn figment(flags: &FlagOverrides) -> Figment {
        let file = std::env::var("HARNESS_CONFIG").unwrap_or_else(|_| "harness.toml".into());
        Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(file))
            .merge(Env::prefixed("HARNESS_").only(&KEYS))
            .merge(Serialized::defaults(flags))
    }

    /// Resolves the settings; errors name the file or variable and the key.
    pub fn load(flags: &FlagOverrides) -> Result<Settings, Box<figment::Error>> {
        Self::figment(flags).extract().map_err(Box::new)
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closure signature is fixed
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order_defaults_file_env_flags() {
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            jail.set_env("HARNESS_HOME", "/h");
            jail.create_file(
                "harness.toml",
                "data_dir = \"/from-file\"\nruns_dir = \"/runs-file\"",
            )?;
            let s = Settings::load(&FlagOverrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(s.data_dir, PathBuf::from("/from-file"));
            assert_eq!(s.cache_dir, PathBuf::from("/h/cache"));
            jail.set_env("HARNESS_DATA_DIR", "/from-env");
            let s = Settings::load(&FlagOverrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(s.data_dir, PathBuf::from("/from-env"));
            assert_eq!(s.runs_dir, PathBuf::from("/runs-file"));
            let flags = FlagOverrides {
                data_dir: Some("/from-flag".into()),
                mirrors: None,
            };
            let s = Settings::load(&flags).map_err(|e| e.to_string())?;
            assert_eq!(s.data_dir, PathBuf::from("/from-flag"));
            Ok(())
        });
    }

    #[test]
    fn unknown_key_in_settings_file_is_rejected() {
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            jail.create_file("harness.toml", "data_dri = \"/x\"")?;
            let err = Settings::load(&FlagOverrides::default()).unwrap_err();
            assert!(err.to_string().contains("data_dri"), "{err}");
            Ok(())
        });
    }
}
