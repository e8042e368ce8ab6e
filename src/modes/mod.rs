//! The modes. Each builds a [`Session`](crate::pipeline::Session), takes
//! a [`Feed`](crate::pipeline::Feed) of it and sinks it somewhere: the
//! screen, a check report, a recording, screenshots.

mod check;
mod dashboard;
mod demo;
mod record;
mod replay;
mod screen;
mod screenshots;

pub use check::{check, summary};
pub use dashboard::dashboard;
pub use demo::demo;
pub use record::{import_lab, record};
pub use replay::replay;
pub use screenshots::screenshots;

use crate::cli::{Inputs, UiArgs};
use crate::config::{FileConfig, Settings};
use crate::error::{Result, UsageContext};
use crate::theme::{self, Theme};

/// CLI > config file > defaults.
fn settings(inputs: &Inputs, ui: &UiArgs) -> Result<Settings> {
    let file = FileConfig::load(inputs.config.as_deref()).usage()?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    Settings::resolve(inputs, ui, &file, no_color).usage()
}

fn theme(settings: &Settings) -> Result<Theme> {
    Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).usage()
}
