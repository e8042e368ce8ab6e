//! A killed decode's open streams, kept until the proxy's echoes of it
//! are read (`cut.rs`).

/// A decode killed with streams open: what its echoes at the proxy settle.
#[derive(Debug, Clone)]
pub(crate) struct Kill {
    /// Requests it still had open.
    pub(crate) open: usize,
    /// Its streams whose end is in doubt.
    pub(crate) undated: Vec<u64>,
    pub(crate) cause: String,
    /// Its last line and its restart.
    pub(crate) span: (f64, f64),
}
