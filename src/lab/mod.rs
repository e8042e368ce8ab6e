//! The embedded demo lab: a real recording of a vLLM pair, served as real
//! HTTP endpoints and real log files on loopback. `pdtop demo` shows it;
//! the end-to-end tests drive `pdtop check` against it.

pub mod capture;
mod clock;
pub mod instances;
mod kvdir;
mod log_times;
pub mod replay;
mod sender;
pub mod server;
mod spans;
pub use spans::otlp_frames;

pub use capture::Capture;
pub use clock::LabClock;
pub use server::{LabHandle, LabInstance, LabOptions, start, start_at};
