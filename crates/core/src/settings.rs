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

    /// Resolves the settings; errors name the file or variable and the key. An empty
    /// variable, a `HARNESS_CONFIG` naming no file, and a directory setting that is empty or
    /// names something other than a directory are errors, not the current directory.
    pub fn load(flags: &FlagOverrides) -> Result<Settings, Box<figment::Error>> {
        let fail = |m: String| Box::new(figment::Error::from(m));
        for var in std::iter::once("HARNESS_HOME".to_string())
            .chain(KEYS.iter().map(|k| format!("HARNESS_{}", k.to_uppercase())))
            .chain(std::iter::once("HARNESS_CONFIG".to_string()))
        {
            if std::env::var_os(&var).is_some_and(|v| v.is_empty()) {
                return Err(fail(format!(
                    "{var} is set but empty. Fix: unset it (`unset {var}`) or give it a value"
                )));
            }
        }
        if let Some(file) = std::env::var_os("HARNESS_CONFIG") {
            if !std::path::Path::new(&file).is_file() {
                return Err(fail(format!(
                    "HARNESS_CONFIG names {}, which is not a file. Fix: give the path of a settings file, or unset HARNESS_CONFIG",
                    std::path::Path::new(&file).display()
                )));
            }
        }
        let settings: Settings = Self::figment(flags).extract().map_err(Box::new)?;
        for (key, dir) in [
            ("data_dir", &settings.data_dir),
            ("cache_dir", &settings.cache_dir),
            ("models_dir", &settings.models_dir),
            ("runs_dir", &settings.runs_dir),
            ("sweeps_dir", &settings.sweeps_dir),
        ] {
            if dir.as_os_str().is_empty() {
                return Err(fail(format!(
                    "`{key}` is empty. Fix: name a directory (HARNESS_{} or the settings file)",
                    key.to_uppercase()
                )));
            }
            // The nearest part of the path that exists must be a directory (a
            // HARNESS_HOME that is a file blocks `<home>/datasets` without existing itself).
            if let Some(file) = dir
                .ancestors()
                .filter(|a| !a.as_os_str().is_empty())
                .find(|a| a.exists())
                .filter(|a| !a.is_dir())
            {
                return Err(fail(format!(
                    "`{key}` is {}, but {} is not a directory. Fix: name a directory (HARNESS_HOME, HARNESS_{} or the settings file)",
                    dir.display(),
                    file.display(),
                    key.to_uppercase()
                )));
            }
        }
        Ok(settings)
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

    /// An empty variable is refused (not taken as the current directory), as are a
    /// `HARNESS_HOME` that is a file and a `HARNESS_CONFIG` naming nothing.
    #[test]
    fn empty_and_misdirected_settings_are_refused() {
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            jail.set_env("HARNESS_HOME", "");
            let err = Settings::load(&FlagOverrides::default()).unwrap_err();
            assert!(
                err.to_string().contains("HARNESS_HOME is set but empty"),
                "{err}"
            );
            jail.set_env("HARNESS_HOME", "/h");
            jail.set_env("HARNESS_DATA_DIR", "");
            let err = Settings::load(&FlagOverrides::default()).unwrap_err();
            assert!(err.to_string().contains("HARNESS_DATA_DIR"), "{err}");
            jail.clear_env();
            jail.create_file("home-file", "not a directory")?;
            let home = jail.directory().join("home-file");
            jail.set_env("HARNESS_HOME", home.display());
            let err = Settings::load(&FlagOverrides::default()).unwrap_err();
            assert!(err.to_string().contains("not a directory"), "{err}");
            jail.clear_env();
            jail.set_env("HARNESS_CONFIG", "/no/such/harness.toml");
            let err = Settings::load(&FlagOverrides::default()).unwrap_err();
            assert!(err.to_string().contains("HARNESS_CONFIG"), "{err}");
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
