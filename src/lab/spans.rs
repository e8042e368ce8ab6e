//! A capture's `otlp.bin`: every OTLP/HTTP export body vLLM sent, framed
//! as `<f64 unix time><u32 length><ExportTraceServiceRequest>` (little
//! endian), read into the request spans pdtop's receiver would make.

use prost::Message;

use crate::feed::RequestSpan;
use crate::sources::otlp::ExportTraceServiceRequest;
use crate::sources::otlp::convert::request_spans;

/// The frames of an `otlp.bin`: (unix time, export body), as vLLM sent them.
pub fn otlp_frames(raw: &[u8]) -> Result<Vec<(f64, &[u8])>, String> {
    let mut out = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let cut = || format!("otlp.bin: a frame cut short at byte {}", raw.len() - rest.len());
        let head = rest.get(..12).ok_or_else(cut)?;
        let t = f64::from_le_bytes(head[..8].try_into().map_err(|_| cut())?);
        let n = u32::from_le_bytes(head[8..12].try_into().map_err(|_| cut())?) as usize;
        let body = rest.get(12..12 + n).ok_or_else(cut)?;
        out.push((t, body));
        rest = &rest[12 + n..];
    }
    Ok(out)
}

pub fn read_otlp_bin(raw: &[u8]) -> Result<Vec<(f64, Vec<RequestSpan>)>, String> {
    let mut out = Vec::new();
    for (t, body) in otlp_frames(raw)? {
        let req = ExportTraceServiceRequest::decode(body).map_err(|e| format!("otlp.bin at {t}: {e}"))?;
        let (spans, _other) = request_spans(&req);
        if !spans.is_empty() {
            out.push((t, spans));
        }
    }
    Ok(out)
}
