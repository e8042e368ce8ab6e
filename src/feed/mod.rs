//! The app's vocabulary: what collectors, the state, recordings and the UI
//! all speak. Nothing here does I/O; every type derives serde so a
//! recording is these messages, written as they came.

mod endpoint;
mod link;
mod msg;
mod origin;
mod span;
mod tail;

pub use endpoint::{Endpoint, ModelInfo, Role, RouterEndpoint};
pub use link::{FolderStat, IfaceBytes, KvDirSnapshot, LinkInfo, NetDevSnapshot};
pub use msg::Msg;
pub use origin::LogOrigin;
pub use span::{RequestSpan, SpanCounts};
pub use tail::{TailCounts, TailState};
