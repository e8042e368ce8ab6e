//! Lines pdtop knows that carry nothing to act on ("noise"), told apart
//! from lines it does not know by rules taken from how vLLM prints, not
//! from a list of messages:
//! - **start-up**: from a process's start (vLLM's logo banner, `vLLM API
//!   server version`, `non-default args:`, `Initializing a V1 LLM engine`)
//!   to uvicorn's `Application startup complete.`, vLLM logs configuration,
//!   model loading, compilation and KV-cache sizing (torch, FlashInfer and
//!   NCCL add their own lines). Below ERROR these are noise; a start-up that
//!   fails raises, and that is kept.
//! - **uvicorn**: its INFO lines that are not access lines are its
//!   lifecycle (started, waiting for start-up/shutdown, shutting down).
//! - **traceback**: after `Traceback (most recent call last):` Python prints
//!   indented frames, code and carets, each line under vLLM's header when
//!   logged; the header and the exception line carry what matters.
//! - **crash dump**: `dump_input.py`'s `Dumping input data ...` /
//!   `scheduler output` / `scheduler stats` after a fatal engine error,
//!   whose death is already read.
//! - **idle step**: connectors' `In connector.start_load_kv, but the
//!   attn_metadata is None` (and `connector metadata is None`): a forward
//!   step without attention (warm-up, dummy batches), no request in it.
//! - **transport**: UCX's own INFO/DEBUG lines (`[unix.us] [host:pid:tid]
//!   file.c:N UCX  INFO ...`, its configuration at connection set-up) and
//!   NIXL's handshake report (`NIXL compatibility check passed`, `Transfer
//!   plan: TransferTopology(...)`); UCX's WARN and ERROR stay unknown.
//! - **blank**: a header with an empty message (the banner's frame).
//!
//! Everything else without a signal stays unknown.

use super::line::{Level, strip_ansi};
use super::vllm::{VllmEvent, VllmLine};

/// Why a line is known noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    Startup,
    Uvicorn,
    Traceback,
    CrashDump,
    IdleStep,
    Transport,
    Blank,
}

/// Where one log is: starting, inside a traceback.
#[derive(Debug, Clone, Default)]
pub struct NoiseState {
    starting: bool,
    in_traceback: bool,
}

impl NoiseState {
    /// Reads every line of one log in order (start-up and tracebacks span
    /// lines); for a line with no event and no signal, says whether it is
    /// known noise.
    pub fn classify(&mut self, raw: &str, line: &VllmLine) -> Option<Noise> {
        let raw = strip_ansi(raw);
        let (uvicorn, msg) = (line.uvicorn, raw.get(line.message_at..).unwrap_or(""));
        let was_in_traceback = self.in_traceback;
        match &line.event {
            VllmEvent::Traceback => {
                self.in_traceback = true;
                return None;
            }
            VllmEvent::Exception { .. } => self.in_traceback = false,
            // Serving has begun even where uvicorn's ready line is not
            // printed (`--uvicorn-log-level warning`, a headless engine).
            VllmEvent::EngineDead { .. }
            | VllmEvent::EngineStats(_)
            | VllmEvent::Received { .. }
            | VllmEvent::Added { .. } => self.starting = false,
            _ => {}
        }
        // A block character elsewhere (a progress bar in a later line) is not a banner.
        let banner = line.signal.is_none() && line.event == VllmEvent::Other && is_banner(msg);
        if is_start(msg) || banner {
            self.starting = true;
        }
        if was_in_traceback && is_frame(msg) {
            return Some(Noise::Traceback);
        }
        self.in_traceback = false;
        if uvicorn {
            if msg.trim_end() == "Application startup complete." {
                self.starting = false;
            }
            return (line.level == Some(Level::Info)).then_some(Noise::Uvicorn);
        }
        if msg.starts_with("Dumping ")
            && ["input data for", "scheduler output", "scheduler stats"].iter().any(|k| msg.contains(k))
        {
            return Some(Noise::CrashDump);
        }
        if msg.starts_with("In connector.start_load_kv, but the ") && msg.trim_end().ends_with("is None") {
            return Some(Noise::IdleStep);
        }
        if msg.starts_with("NIXL compatibility check passed")
            || msg.starts_with("Transfer plan: TransferTopology(")
        {
            return Some(Noise::Transport);
        }
        if raw.starts_with('[')
            && let Some(i) = raw.find(" UCX  ")
        {
            let level = raw[i + 6..].trim_start();
            if level.starts_with("INFO") || level.starts_with("DEBUG") {
                return Some(Noise::Transport);
            }
        }
        if msg.trim().is_empty() {
            return Some(Noise::Blank);
        }
        let serious = matches!(line.level, Some(Level::Error | Level::Critical));
        (self.starting && !serious).then_some(Noise::Startup)
    }
}

/// A process begins: what vLLM prints first, across versions.
fn is_start(msg: &str) -> bool {
    msg.starts_with("vLLM API server version ")
        || msg.starts_with("non-default args: ")
        || msg.starts_with("Initializing a V1 LLM engine")
        || msg.starts_with("Initializing an LLM engine")
}

/// The logo banner (≥ 0.11): block elements, U+2580–U+259F.
fn is_banner(msg: &str) -> bool {
    !msg.is_ascii() && msg.chars().any(|c| ('\u{2580}'..='\u{259f}').contains(&c))
}

/// A line of a Python traceback's body: indented frames and code, carets,
/// blank lines and the chaining sentences between two tracebacks.
fn is_frame(msg: &str) -> bool {
    msg.starts_with(' ')
        || msg.trim().is_empty()
        || msg.trim().chars().all(|c| c == '^' || c == '~')
        || msg.starts_with("The above exception was the direct cause")
        || msg.starts_with("During handling of the above exception")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::vllm::parse_vllm_line;

    fn run(lines: &[&str]) -> Vec<Option<Noise>> {
        let mut st = NoiseState::default();
        lines.iter().map(|l| st.classify(l, &parse_vllm_line(l).unwrap())).collect()
    }

    #[test]
    fn start_up_lasts_until_uvicorn_is_ready() {
        let got = run(&[
            "(APIServer pid=1) WARNING 12-01 07:28:32 [system_utils.py:299] Found ulimit of 20000",
            "(APIServer pid=1) INFO 12-01 07:28:32 [api_utils.py:273] non-default args: {'model': 'x'}",
            "(APIServer pid=1) WARNING 12-01 07:28:32 [system_utils.py:299] Found ulimit of 20000",
            "(APIServer pid=1) ERROR 12-01 07:28:33 [x.py:1] something broke",
            "(APIServer pid=1) INFO:     Application startup complete.",
            "(APIServer pid=1) WARNING 12-01 07:28:40 [system_utils.py:299] Found ulimit of 20000",
        ]);
        // Before any start, after ready, and an ERROR: not noise.
        assert_eq!(got, [None, Some(Noise::Startup), Some(Noise::Startup), None, Some(Noise::Uvicorn), None]);
    }

    /// `--uvicorn-log-level warning`: no ready line. Serving (a stats line)
    /// ends start-up, so later lines are unknown again, not noise.
    #[test]
    fn serving_ends_start_up_without_uvicorns_ready_line() {
        let got = run(&[
            "(APIServer pid=1) INFO 12-01 07:28:32 [api_utils.py:273] non-default args: {'model': 'x'}",
            "(APIServer pid=1) WARNING 12-01 07:28:32 [system_utils.py:299] Found ulimit of 20000",
            "(APIServer pid=1) INFO 12-01 07:28:42 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
            "(APIServer pid=1) WARNING 12-01 07:28:50 [system_utils.py:299] Found ulimit of 20000",
        ]);
        assert_eq!(got, [Some(Noise::Startup), Some(Noise::Startup), None, None]);
    }

    #[test]
    fn a_traceback_body_is_noise_until_its_exception_line() {
        let got = run(&[
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332] Traceback (most recent call last):",
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332]   File \"/x/core.py\", line 1, in f",
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332]     return g()",
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332]            ^^^^^",
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332] something else entirely",
            "(EngineCore pid=2) ERROR 12-01 07:29:35 [core.py:1332]     indented, but no traceback",
        ]);
        let tb = Some(Noise::Traceback);
        assert_eq!(got, [None, tb, tb, tb, None, None]);
    }

    #[test]
    fn ucx_info_is_transport_noise_but_its_errors_are_not() {
        let got = run(&[
            "[1796020761.768965] [vm:1176 :1]      ucp_worker.c:1997 UCX  INFO    86303de7 intra-node cfg#2",
            "[1796020761.768965] [vm:1176 :1]      ucp_worker.c:1997 UCX  ERROR   connection refused",
        ]);
        assert_eq!(got, [Some(Noise::Transport), None]);
    }

    #[test]
    fn the_abort_echo_names_its_request() {
        use crate::logs::vllm::aborted_echo;
        let s = aborted_echo("Request cmpl-93f35520d13dc515-0 aborted.").unwrap();
        assert_eq!(s.ids, ["cmpl-93f35520d13dc515-0"]);
        assert!(aborted_echo("Request cmpl-1 was aborted by x.").is_none());
    }
}
