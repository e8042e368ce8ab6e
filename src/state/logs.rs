//! What the tailed logs add to the state: the per-request correlator, and
//! each log's own health (following, missing, rotated, bad lines).

use crate::feed::LogOrigin;
use crate::feed::{TailCounts, TailState};
use crate::traces::{Correlator, CorrelatorOptions};

/// One tailed log.
#[derive(Debug, Clone)]
pub struct LogSource {
    pub source: LogOrigin,
    pub path: String,
    pub state: Option<TailState>,
    /// Run-long totals of truncations, rotations, skipped lines.
    pub counts: TailCounts,
    pub lines: u64,
    pub last_line_at: Option<f64>,
}

#[derive(Clone)]
pub struct LogState {
    pub correlator: Correlator,
    pub sources: Vec<LogSource>,
    /// Every tailed file was read up to here (None: no such report, as
    /// in a replay, where lines arrive in order and the clock is theirs).
    pub polled_at: Option<f64>,
    /// Dates the lines read and gives them to the correlator in the order
    /// they happened.
    timeline: super::timeline::Timeline,
    /// The correlator's clock: the time of the last line given or tick.
    moved_to: f64,
    /// The latest read time of lines: a polling round's reads end then.
    read_at: f64,
    /// The files are read in polling rounds, each closed by `LogsPolled`:
    /// a round's batches come as separate messages, and another source's
    /// message may come between them, so nothing read is given on before
    /// its round is over (else one log's first read would be placed
    /// before another's of the same round had come).
    rounds: bool,
    /// Spans' prompt lengths for requests no log line named yet: vLLM
    /// exports a span within a fraction of a second, before the tailer may
    /// have read the request's lines. Given once the request is known.
    unplaced: std::collections::VecDeque<Unplaced>,
}

/// A span waiting for its request's log lines: vLLM exports it when the
/// request is over (on that instance it is in flight no more: a death
/// after it cut nothing of it), with the prompt's length.
#[derive(Debug, Clone)]
struct Unplaced {
    at: f64,
    role: Option<crate::feed::Role>,
    request_id: String,
    tokens: Option<u32>,
}

/// Spans kept waiting for their request, and for how long (read time).
const UNPLACED_CAP: usize = 4096;
const UNPLACED_S: f64 = 60.0;

impl std::fmt::Debug for LogState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogState").field("sources", &self.sources).finish_non_exhaustive()
    }
}

impl LogState {
    pub fn new(logs: &[(LogOrigin, String)]) -> LogState {
        LogState {
            correlator: Correlator::new(CorrelatorOptions::default()),
            sources: logs
                .iter()
                .map(|(source, path)| LogSource {
                    source: *source,
                    path: path.clone(),
                    state: None,
                    counts: TailCounts::default(),
                    lines: 0,
                    last_line_at: None,
                })
                .collect(),
            polled_at: None,
            timeline: Default::default(),
            moved_to: f64::NEG_INFINITY,
            read_at: f64::NEG_INFINITY,
            rounds: false,
            unplaced: Default::default(),
        }
    }

    /// Tells the correlator where each instance serves (`host:port`), so a
    /// proxy line naming one names its hop. `LogOrigin` indexes count
    /// within a role, in command-line order.
    pub fn set_addrs<'a>(&mut self, endpoints: impl Iterator<Item = &'a crate::feed::Endpoint>) {
        let (mut p, mut d) = (0, 0);
        for e in endpoints {
            let origin = match e.role {
                crate::feed::Role::Prefill => {
                    p += 1;
                    LogOrigin::Prefill(p - 1)
                }
                crate::feed::Role::Decode => {
                    d += 1;
                    LogOrigin::Decode(d - 1)
                }
            };
            let hostport = e.base_url.split("://").last().unwrap_or("").split('/').next().unwrap_or("");
            self.correlator.set_instance_addr(origin, hostport);
        }
    }

    /// A request's prompt length reported outside the logs (a span's
    /// `gen_ai.usage.prompt_tokens` for `gen_ai.request.id` on that
    /// instance): it settles which request of a shared scheduling step
    /// loaded its KV, so the miss gets a name.
    pub fn on_prompt_tokens(&mut self, origin: LogOrigin, request_id: &str, tokens: u32, at: f64) {
        self.correlator.on_prompt_tokens(origin, request_id, tokens, at);
    }

    /// The spans' prompt lengths, given to the traces they name (the
    /// instance told apart by the trace's own hop); a span whose request no
    /// line named yet waits for it (`unplaced`).
    pub fn on_spans(&mut self, spans: &[crate::feed::RequestSpan], at: f64) {
        for s in spans {
            // The prefill copy's length too: it pairs the copy with its
            // decode request when no id is shared (`traces/length_join.rs`).
            let role = crate::state::spans::service_role(&s.service);
            let u = Unplaced { at, role, request_id: s.request_id.clone(), tokens: s.prompt_tokens };
            if !self.place(&u, at) {
                self.unplaced.push_back(u);
                while self.unplaced.len() > UNPLACED_CAP {
                    self.unplaced.pop_front();
                }
            }
        }
    }

    /// Gives a span's length to its trace; `false` when no trace names it yet.
    fn place(&mut self, u: &Unplaced, at: f64) -> bool {
        use crate::feed::Role;
        // A service name that says no role: the side that logged the id.
        let role = u.role.or_else(|| match self.correlator.side_of(&u.request_id)? {
            LogOrigin::Prefill(_) => Some(Role::Prefill),
            LogOrigin::Decode(_) => Some(Role::Decode),
            LogOrigin::Proxy => None,
        });
        let origin = match role {
            Some(Role::Prefill) => self.correlator.prefill_of(&u.request_id).map(LogOrigin::Prefill),
            _ => self.correlator.decode_of(&u.request_id).map(LogOrigin::Decode),
        };
        let Some(o) = origin else { return false };
        if let LogOrigin::Decode(_) = o {
            self.correlator.on_finished(o, &u.request_id);
        }
        if let Some(n) = u.tokens {
            self.on_prompt_tokens(o, &u.request_id, n, at);
        }
        true
    }

    /// Spans that came before their request's lines, tried again.
    fn place_waiting(&mut self, at: f64) {
        if self.unplaced.is_empty() {
            return;
        }
        let waiting: Vec<Unplaced> = self.unplaced.drain(..).collect();
        for u in waiting {
            if !self.place(&u, at) && at - u.at <= UNPLACED_S {
                self.unplaced.push_back(u);
            }
        }
    }

    /// Gives the correlator every line that all logs have been read past,
    /// in the order they happened, its clock moved on to each line's time
    /// before it (what that time allows is decided first, as it would
    /// have been had the line been read as it was printed); then its clock
    /// moves on to `upto`.
    pub fn advance(&mut self, upto: f64) {
        let undated = self.timeline.undated_waiting();
        let lines = self.timeline.release(upto);
        let any = !lines.is_empty();
        if undated {
            self.correlator.set_backlog_unread(true);
        }
        for d in lines {
            if d.at > self.moved_to {
                self.moved_to = d.at;
                self.correlator.on_tick(d.at);
            }
            if d.old {
                self.correlator.on_setup_line(d.source, &d.line, d.at);
            } else {
                self.correlator.on_line_between(d.source, &d.line, d.from, d.at);
            }
        }
        if undated && !self.timeline.undated_waiting() {
            self.correlator.set_backlog_unread(false);
        }
        if any {
            self.place_waiting(self.moved_to);
        }
        if upto > self.moved_to && upto.is_finite() {
            self.moved_to = upto;
            self.correlator.on_tick(upto);
        }
    }

    /// On start, only the logs' last `secs` are read for requests.
    pub fn set_since(&mut self, secs: f64) {
        self.timeline.since = Some(secs);
    }

    /// A polling round that began at `at` is over: every file was read up
    /// to it, and its lines, read a moment after, are all in.
    pub fn round_over(&mut self, at: f64) {
        // A log that had more to read was read only up to its last line.
        let upto = at.max(self.read_at).min(self.timeline.held_to());
        self.polled_at = Some(self.polled_at.map_or(upto, |p| p.max(upto)));
    }

    /// Tailed files are read in polling rounds (`LogsPolled`); stdin is not.
    pub fn set_rounds(&mut self, rounds: bool) {
        self.rounds = rounds;
    }

    /// How far every log has been read by `now`: the last polling round
    /// (a feed without rounds: its last read); before any read, or any
    /// round over, nothing (the correlator's clock must not run ahead of
    /// lines still unread).
    pub fn read_up_to(&self, now: f64) -> f64 {
        match self.polled_at {
            Some(p) => p.min(now),
            None if self.rounds => f64::NEG_INFINITY,
            None => self.read_at.min(now),
        }
    }

    /// When a later read may settle a verdict: a line read but dated
    /// after the last read (its log's stamps run ahead of pdtop's clock)
    /// is given on by a read past it, and the correlator's own waits
    /// (`Correlator::reads_due`).
    pub fn reads_due(&self, now: f64) -> Option<f64> {
        let held = self.timeline.next_at().unwrap_or(f64::INFINITY);
        let due = self.correlator.reads_due(self.read_up_to(now)).unwrap_or(f64::INFINITY);
        Some(held.min(due)).filter(|d| d.is_finite())
    }

    /// Lines read and not yet given to the correlator.
    pub fn waiting(&self) -> usize {
        self.timeline.waiting()
    }

    /// The end of a check: every line read is given on, whatever its time.
    pub fn finish(&mut self, at: f64) {
        self.advance(at);
        for d in self.timeline.release_all() {
            if d.old {
                self.correlator.on_setup_line(d.source, &d.line, d.at);
            } else {
                self.correlator.on_line_between(d.source, &d.line, d.from, d.at);
            }
        }
        self.correlator.finish(at.max(self.moved_to));
    }

    /// Per-request verdicts need a decode instance's log: proxy lines alone
    /// never decide a request.
    pub fn has_decode_log(&self) -> bool {
        self.sources.iter().any(|s| matches!(s.source, LogOrigin::Decode(_)))
    }

    pub fn has_prefill_log(&self) -> bool {
        self.sources.iter().any(|s| matches!(s.source, LogOrigin::Prefill(_)))
    }

    pub fn on_lines(
        &mut self,
        source: LogOrigin,
        at: f64,
        lines: &[String],
        state: TailState,
        counts: TailCounts,
    ) {
        // A truncated or rotated file: what was in flight is no longer
        // followed, and a process starting in the new file is no sign that
        // the old one was killed.
        if counts.truncations + counts.rotations > 0 {
            self.correlator.on_log_reset(source);
            self.timeline.reset(source);
        }
        // Given on at the next tick, when the other logs of the same read
        // have been read too. What the first read finds happened before.
        self.correlator.set_started(at);
        self.timeline.read(source, lines, at, state == TailState::CatchingUp);
        self.read_at = self.read_at.max(at);
        if let Some(t) = self.timeline.read_to(source) {
            self.correlator.set_read_to(source, t);
        }
        if let Some(s) = self.sources.iter_mut().find(|s| s.source == source) {
            s.state = Some(state);
            s.lines += lines.len() as u64;
            if !lines.is_empty() {
                s.last_line_at = Some(at);
            }
            let c = &mut s.counts;
            c.truncations += counts.truncations;
            c.rotations += counts.rotations;
            c.long_lines_skipped += counts.long_lines_skipped;
            c.invalid_utf8_lines += counts.invalid_utf8_lines;
        }
    }
}
