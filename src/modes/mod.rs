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
mod setup;

pub use check::{check, summary};
pub use dashboard::dashboard;
pub use demo::{demo, lab_session};
pub use doctor::doctor;
pub use record::{import_lab, record};
pub use replay::{replay, replay_app};
pub use screenshots::screenshots;
