//! Lines from a blocking reader: stdin, for a log given as `-`.

use std::io::{self, Read};

use tokio::sync::mpsc::Sender;

use super::batch::{ChangeFilter, TailBatch, TailOptions};
use super::lines::LineSplitter;
use crate::feed::TailState;

/// Reads lines from a blocking reader (stdin for `-`) with the same
/// splitting rules as the file tailer, on tokio's blocking pool (the tokio
/// build here has no async stdin, and a blocking read must not sit on the UI
/// task). Sends a final batch in state `Ended` at EOF; a read error is sent
/// as `TailState::Error` and ends the reader. Returns when done or when the
/// receiver is dropped.
pub async fn run_reader<R: Read + Send + 'static>(reader: R, opts: TailOptions, tx: Sender<TailBatch>) {
    let _ = tokio::task::spawn_blocking(move || read_blocking(reader, opts, tx)).await;
}

fn read_blocking<R: Read>(mut reader: R, opts: TailOptions, tx: Sender<TailBatch>) {
    let mut splitter = LineSplitter::new(opts.max_line_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    // A stream is followed from the start: only lines and counters are news.
    let mut filter = ChangeFilter::after(TailState::Following);
    loop {
        let mut batch = TailBatch::new(TailState::Following);
        match reader.read(&mut buf) {
            Ok(0) => {
                splitter.flush(&mut batch.lines, &mut batch.counts);
                batch.state = TailState::Ended;
                let _ = tx.blocking_send(batch);
                return;
            }
            Ok(n) => splitter.feed(&buf[..n], &mut batch.lines, &mut batch.counts),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(TailBatch::new(TailState::Error(e.to_string())));
                return;
            }
        }
        if filter.admit(&batch) && tx.blocking_send(batch).is_err() {
            return;
        }
    }
}
