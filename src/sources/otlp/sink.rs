//! What both listeners hand spans to, and the limits they keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc::{Sender, error::TrySendError};

use super::convert::request_spans;
use super::proto::ExportTraceServiceRequest;
use crate::clock::Clock;
use crate::feed::{Msg, SpanCounts};

/// The largest export body taken (decompressed too): vLLM's batches are a
/// few kB; the OTLP exporters' own limit is 4 MiB on gRPC.
pub const MAX_BODY: usize = 4 << 20;
/// Connections served at once on the HTTP listener.
pub const MAX_CONNECTIONS: usize = 64;

/// What both listeners hand spans to.
pub(crate) struct Sink {
    tx: Sender<Msg>,
    clock: Arc<dyn Clock>,
    /// Request spans dropped since the last batch that got through.
    dropped: AtomicU64,
}

impl Sink {
    pub(crate) fn new(tx: Sender<Msg>, clock: Arc<dyn Clock>) -> Sink {
        Sink { tx, clock, dropped: AtomicU64::new(0) }
    }

    /// Never waits: a full channel drops the batch and counts it, so a
    /// burst of spans cannot grow memory or stall the exporter.
    pub(crate) fn deliver(&self, req: &ExportTraceServiceRequest) {
        let (spans, other) = request_spans(req);
        let n = spans.len() as u64;
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if spans.is_empty() && other == 0 && dropped == 0 {
            return;
        }
        let msg = Msg::Spans { at: self.clock.now(), spans, counts: SpanCounts { other, dropped } };
        if let Err(TrySendError::Full(_)) = self.tx.try_send(msg) {
            self.dropped.fetch_add(dropped + n, Ordering::Relaxed);
        }
    }

    pub(crate) fn reject(&self, error: String) {
        let _ = self.tx.try_send(Msg::SpansRejected { at: self.clock.now(), error });
    }
}
