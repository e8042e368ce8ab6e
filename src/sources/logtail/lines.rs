//! Bytes to lines: the length cap, lossy decoding and `\r\n` endings,
//! shared by the file tailer and the stdin reader.

use crate::feed::TailCounts;

/// Splits a byte stream into lines, with the length cap and lossy decoding.
#[derive(Debug)]
pub(super) struct LineSplitter {
    max: usize,
    partial: Vec<u8>,
    /// Inside a line that is being discarded, until its newline.
    skipping: bool,
}

impl LineSplitter {
    pub(super) fn new(max: usize) -> Self {
        LineSplitter { max, partial: Vec::new(), skipping: false }
    }

    pub(super) fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<String>, counts: &mut TailCounts) {
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            let seg = &bytes[..nl];
            bytes = &bytes[nl + 1..];
            if self.skipping {
                self.skipping = false;
            } else if self.partial.len() + seg.len() > self.max {
                counts.long_lines_skipped += 1;
                self.partial.clear();
            } else if self.partial.is_empty() {
                // Common case: the whole line is in this chunk, no copy into `partial`.
                out.push(decode(seg, counts));
            } else {
                self.partial.extend_from_slice(seg);
                let line = std::mem::take(&mut self.partial);
                out.push(decode(&line, counts));
            }
        }
        if self.skipping || bytes.is_empty() {
            return;
        }
        if self.partial.len() + bytes.len() > self.max {
            // Stop buffering now: the rest of this line is dropped as it arrives.
            counts.long_lines_skipped += 1;
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// The source ended: an unterminated last line will never get its
    /// newline, so it is a line as it stands.
    pub(super) fn flush(&mut self, out: &mut Vec<String>, counts: &mut TailCounts) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            out.push(decode(&line, counts));
        }
        self.skipping = false;
    }

    /// Discard until the next newline without counting: used when starting
    /// at the end of a file, in the middle of a line.
    pub(super) fn resync(&mut self) {
        self.partial.clear();
        self.skipping = true;
    }

    /// Bytes held for an unfinished line.
    pub(super) fn pending(&self) -> usize {
        self.partial.len()
    }
}

fn decode(line: &[u8], counts: &mut TailCounts) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match std::str::from_utf8(line) {
        Ok(s) => s.to_owned(),
        Err(_) => {
            counts.invalid_utf8_lines += 1;
            String::from_utf8_lossy(line).into_owned()
        }
    }
}
