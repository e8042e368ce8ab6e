//! The modes. Each builds a [`Session`](crate::pipeline::Session), takes
//! a [`Feed`](crate::pipeline::Feed) of it and sinks it somewhere: the
//! screen, a check report, a recording, screenshots.

mod check;
mod dashboard;
pub mod demo;
mod doctor;
mod record;
mod replay;
mod screen;
mod screenshots;

pub use check::{check, summary};
pub use dashboard::dashboard;
pub use demo::{demo, lab_session};
pub use doctor::doctor;
pub use record::{import_lab, record};
pub use replay::{replay, replay_app};
pub use screenshots::screenshots;

use std::path::Path;

use crate::cli::{Inputs, UiArgs};
use crate::config::{FileConfig, Settings};
use crate::error::{Error, Result, UsageContext};
use crate::lab::Capture;
use crate::record::Recording;
use crate::theme::{self, Theme};

/// CLI > config file > defaults.
fn settings(inputs: &Inputs, ui: &UiArgs) -> Result<Settings> {
    let file = FileConfig::load(inputs.config.as_deref()).usage()?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    Settings::resolve(inputs, ui, &file, no_color).usage()
}

/// The stuck threshold of the settings, on the state's correlator.
fn stuck_after(state: &mut crate::state::AppState, settings: &Settings) {
    if let Some(l) = state.logs.as_mut() {
        l.correlator.set_stuck_after(settings.stuck_after_secs);
    }
}

fn theme(settings: &Settings) -> Result<Theme> {
    Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).usage()
}

/// A recording file, or a capture folder (`lab-captures` layout) played as
/// one, so a capture needs no `import-lab` first.
fn open_recording(path: &Path) -> Result<Recording> {
    if path.is_dir() {
        let capture =
            Capture::from_dir(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        return Ok(crate::lab::replay::recording(&capture));
    }
    // A file that cannot be opened is bad input (exit 2); one that opens
    // and then reads as damaged is a runtime failure (exit 3), as the README says.
    let file = std::fs::File::open(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    Recording::read(file).map_err(|e| Error::Runtime(format!("{}: {e}", path.display())))
}
