//! What every mode sets up the same way: its settings, theme, stuck
//! threshold, and a recording or capture folder to play.

use std::path::Path;

use crate::cli::{Inputs, UiArgs};
use crate::config::{FileConfig, Settings};
use crate::error::{Error, Result, UsageContext};
use crate::lab::Capture;
use crate::record::Recording;
use crate::theme::{self, Theme};

/// CLI > config file > defaults.
pub(super) fn settings(inputs: &Inputs, ui: &UiArgs) -> Result<Settings> {
    let file = FileConfig::load(inputs.config.as_deref()).usage()?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    Settings::resolve(inputs, ui, &file, no_color).usage()
}

/// The stuck threshold of the settings, on the state's correlator.
pub(super) fn stuck_after(state: &mut crate::state::AppState, settings: &Settings) {
    if let Some(l) = state.logs.as_mut() {
        l.correlator.set_stuck_after(settings.stuck_after_secs);
    }
}

pub(super) fn theme(settings: &Settings) -> Result<Theme> {
    Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).usage()
}

/// A recording file, or a capture folder (`lab-captures` layout) played as
/// one, so a capture needs no `import-lab` first.
pub(super) fn open_recording(path: &Path) -> Result<Recording> {
    if path.is_dir() {
        let capture =
            Capture::from_dir(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        return Ok(crate::lab::replay::recording(&capture));
    }
    // A file that cannot be opened is bad input (exit 2); one that opens
    // and then reads as damaged is a runtime failure (exit 3), as the README says.
    std::fs::File::open(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let mut rec = Recording::open(path).map_err(|e| Error::Runtime(format!("{}: {e}", path.display())))?;
    if let Some(b) = &rec.broken {
        // Said where it is read (stderr) and where it is watched: a source
        // failure at the last whole entry's time.
        let error = format!("{}: {b}", path.display());
        eprintln!("pdtop: recording damaged: {error}");
        let at = rec.messages.last().map_or(rec.session.started, |m| m.at());
        rec.messages.push(crate::feed::Msg::SourceFailed { source: "recording".into(), at, error });
    }
    Ok(rec)
}
