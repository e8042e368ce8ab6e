//! Settings, layered: command line > config file > built-in default.
//!
//! The file is `$XDG_CONFIG_HOME/pdtop/config.toml` (or `--config FILE`):
//! ```toml
//! interval = 1.0   # seconds between scrapes
//! timeout = 2.0    # seconds before a scrape is given up
//! window = 60.0    # seconds of the histograms' sliding window
//! stuck_after = 480.0  # seconds a decode request may wait for remote KV
//! theme = "dark"   # or light, mono, a user theme name, a path
//! router = "127.0.0.1:29000"  # a vllm-router's Prometheus address
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{Inputs, UiArgs};

#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub interval: Option<f64>,
    pub timeout: Option<f64>,
    pub window: Option<f64>,
    pub stuck_after: Option<f64>,
    pub theme: Option<String>,
    pub router: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub interval: Duration,
    pub timeout: Duration,
    pub window_secs: f64,
    /// A decode request still waiting for remote KV this long is stuck.
    pub stuck_after_secs: f64,
    pub theme: String,
    /// `--router`, else the file's `router`.
    pub router: Option<String>,
}

pub const DEFAULT_INTERVAL: f64 = 1.0;
pub const DEFAULT_TIMEOUT: f64 = 2.0;
pub const DEFAULT_WINDOW: f64 = 60.0;

impl FileConfig {
    /// Reads the file; a missing default file is no error, a broken one is.
    pub fn load(explicit: Option<&Path>) -> Result<FileConfig, String> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => match default_path() {
                Some(p) if p.exists() => p,
                _ => return Ok(FileConfig::default()),
            },
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("pdtop").join("config.toml"))
}

impl Settings {
    /// CLI > file > default, and `NO_COLOR` picks the mono theme unless a
    /// theme was asked for by name.
    pub fn resolve(cli: &Inputs, ui: &UiArgs, file: &FileConfig, no_color: bool) -> Result<Settings, String> {
        let secs = |name: &str, cli: Option<f64>, file: Option<f64>, default: f64| {
            let v = cli.or(file).unwrap_or(default);
            if v.is_finite() && v > 0.0 && v < 86400.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(format!("--{name} must be a positive number of seconds, got {v}"))
            }
        };
        let theme = ui
            .theme
            .clone()
            .or_else(|| file.theme.clone())
            .unwrap_or_else(|| if no_color { "mono".into() } else { "dark".into() });
        Ok(Settings {
            interval: secs("interval", cli.interval, file.interval, DEFAULT_INTERVAL)?,
            timeout: secs("timeout", cli.timeout, file.timeout, DEFAULT_TIMEOUT)?,
            window_secs: secs("window", cli.window, file.window, DEFAULT_WINDOW)?.as_secs_f64(),
            stuck_after_secs: secs(
                "stuck-after",
                cli.stuck_after,
                file.stuck_after,
                crate::traces::DEFAULT_STUCK_AFTER_S,
            )?
            .as_secs_f64(),
            theme,
            router: cli.router.clone().or_else(|| file.router.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_beats_file_beats_default() {
        let file = FileConfig {
            interval: Some(5.0),
            window: Some(30.0),
            theme: Some("light".into()),
            ..Default::default()
        };
        let cli = Inputs { interval: Some(0.5), ..Default::default() };
        let s = Settings::resolve(&cli, &UiArgs::default(), &file, false).unwrap();
        assert_eq!(s.interval, Duration::from_millis(500));
        assert_eq!(s.window_secs, 30.0);
        assert_eq!(s.timeout, Duration::from_secs(2));
        assert_eq!(s.theme, "light");
        assert_eq!(s.router, None);
        let file = FileConfig { router: Some("127.0.0.1:29000".into()), ..file };
        let s = Settings::resolve(&cli, &UiArgs::default(), &file, false).unwrap();
        assert_eq!(s.router.as_deref(), Some("127.0.0.1:29000"));
        let cli = Inputs { router: Some("10.0.0.9:29000".into()), ..cli };
        let s = Settings::resolve(&cli, &UiArgs::default(), &file, false).unwrap();
        assert_eq!(s.router.as_deref(), Some("10.0.0.9:29000"));
        let ui = UiArgs { theme: Some("dark".into()) };
        assert_eq!(Settings::resolve(&cli, &ui, &file, true).unwrap().theme, "dark");
    }

    #[test]
    fn no_color_means_mono_unless_asked() {
        let s =
            Settings::resolve(&Inputs::default(), &UiArgs::default(), &FileConfig::default(), true).unwrap();
        assert_eq!(s.theme, "mono");
    }

    #[test]
    fn bad_values_and_files_are_errors() {
        let cli = Inputs { interval: Some(-1.0), ..Default::default() };
        let e = Settings::resolve(&cli, &UiArgs::default(), &FileConfig::default(), false).unwrap_err();
        assert!(e.contains("--interval"), "{e}");
        let dir = std::env::temp_dir().join(format!("pdtop-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(&path, "intervl = 2\n").unwrap();
        let e = FileConfig::load(Some(&path)).unwrap_err();
        assert!(e.contains("intervl"), "{e}");
        std::fs::write(&path, "interval = 2\ntheme = \"mono\"\n").unwrap();
        assert_eq!(FileConfig::load(Some(&path)).unwrap().interval, Some(2.0));
        std::fs::remove_dir_all(&dir).ok();
    }
}
