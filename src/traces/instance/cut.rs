//! What an instance's death cuts off: each request it had in flight.

use super::events::hop_of;
use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;
use crate::traces::evidence::{FactKind, Failure};
use crate::traces::model::{Confidence, Hop, Outcome};

use super::kill::Kill;

/// How far back (in traces) a death looks for the proxy's echoes of it.
const ECHO_SCAN: usize = 512;
/// Whole-second stamps and read delays around the death's span.
const ECHO_SLACK_S: f64 = 2.0;
/// The proxy prints a dead decode's broken streams together.
const ECHO_BURST_S: f64 = 1.0;

impl Correlator {
    /// Every request the instance had in flight when it stopped at `t` is
    /// an error there, whatever was loaded before. A stream that had started
    /// is cut only with `streams`, and only `Likely` (its end is never
    /// logged). `kill`: the restart and the last stats line of a killed
    /// process; a stream no stats line showed running (it began after the
    /// last, or there is none) may have ended anywhere before the restart,
    /// so it is unknown.
    pub(super) fn cut_off(
        &mut self,
        src: LogOrigin,
        cause: &str,
        streams: bool,
        kill: Option<(f64, Option<f64>)>,
        t: f64,
        at: f64,
    ) {
        let cascade = self.stat(src).last_death.as_ref().and_then(|d| d.cascade.clone());
        let taken = self.inflight.take(src, t);
        let ended = |c: &Self, s: u64| {
            c.store.get(s).is_none_or(|e| matches!(e.trace.outcome, Outcome::Error | Outcome::Cancelled))
        };
        // What it still had open: what its death could break.
        let open = taken.iter().filter(|o| !ended(self, o.serial)).count();
        let mut undated_streams = Vec::new();
        for o in taken {
            let prefill = matches!(src, LogOrigin::Prefill(_));
            if prefill && !ended(self, o.serial) && !self.kv_read(o.serial) && self.answered(o.serial) {
                // Its part was over, but its KV died with it unread.
                self.said(o.serial, t, src, FactKind::KvLost, at);
                continue;
            }
            let done = ended(self, o.serial) || (prefill && self.kv_read(o.serial));
            if done || (o.streaming && !streams) {
                continue;
            }
            let undated = kill.filter(|(_, stats)| stats.is_none_or(|st| o.since > st));
            if o.streaming
                && let Some((restart, stats)) = undated
            {
                let kind = FactKind::CutUndated {
                    instance: src,
                    gap_s: (restart - t).max(0.0),
                    stats_seen: stats.is_some(),
                };
                self.said(o.serial, t, src, kind, at);
                undated_streams.push(o.serial);
                continue;
            }
            let mut text = if o.streaming {
                format!(
                    "{cause}, with its stream open (HTTP 200 had started it and no end was logged; a stream that ended just before would read the same)"
                )
            } else {
                format!("{cause}, before it answered")
            };
            if let Some(c) = &cascade {
                text.push_str(&format!("; {c}"));
            }
            // A stream's end is never logged: that the death cut it is likely.
            let confidence = if o.streaming { Confidence::Likely } else { Confidence::Sure };
            let x =
                Failure { hop: hop_of(src), what: text, confidence, generate_failed: false, by_proxy: false };
            self.fail_with(o.serial, src, x, t, at);
        }
        if let (LogOrigin::Decode(_), Some((restart, _))) = (src, kill) {
            let kill = Kill { open, undated: undated_streams, cause: cause.to_string(), span: (t, restart) };
            self.proxy_echoes(&kill, at);
            if self.backlog_unread {
                // The proxy's lines of before pdtop started come later.
                self.kills.push(kill);
            }
        }
    }

    /// The decode read this request's KV (its hit, its tensor): the
    /// prefill's part was over, whatever its stream's end looked like.
    fn kv_read(&self, s: u64) -> bool {
        self.store.get(s).is_some_and(|e| e.facts.has(FactKind::is_read))
    }

    /// The prefill answered: the decode got the `kv_transfer_params` that
    /// only the prefill's answer carries.
    fn answered(&self, s: u64) -> bool {
        self.store.get(s).is_some_and(|e| e.facts.has(|k| matches!(k, FactKind::Params { .. })))
    }

    /// Kills read before the proxy's undated lines: their echoes are
    /// looked for again once those have come.
    pub(in crate::traces) fn echoes_of_earlier_kills(&mut self, at: f64) {
        for kill in std::mem::take(&mut self.kills) {
            self.proxy_echoes(&kill, at);
        }
    }

    /// A decode killed with streams open breaks them at the proxy too:
    /// uvicorn prints `Exception in ASGI application` for each, at once,
    /// with no answer after (it had begun one). The first such burst read
    /// between the decode's last line and its restart is its streams'
    /// echoes, not requests of their own: their traces go (a later burst,
    /// requests sent while it was down, stays). As many as it had open
    /// means every one was cut, so a stream whose end was in doubt failed.
    fn proxy_echoes(&mut self, kill: &Kill, at: f64) {
        let (open, undated, cause, (from, to)) = (kill.open, &kill.undated, &kill.cause, kill.span);
        let serials = self.store.serials();
        let mut bare: Vec<(f64, u64)> = (serials.start..serials.end)
            .rev()
            .take(ECHO_SCAN)
            .filter_map(|s| {
                let e = self.store.get(s)?;
                let t = e.trace.first_seen;
                // An undated one (read before pdtop started) may be of any time.
                let within = e.track.undated || (t >= from - ECHO_SLACK_S && t <= to + ECHO_SLACK_S);
                (e.track.proxy_exception
                    && !e.facts.has(|k| matches!(k, FactKind::ProxyAnswered { .. }))
                    && within)
                    .then_some((t, s))
            })
            .collect();
        bare.sort_by(|a, b| a.0.total_cmp(&b.0));
        let burst =
            bare.windows(2).position(|w| w[1].0 - w[0].0 > ECHO_BURST_S).map_or(bare.len(), |i| i + 1);
        let echoes: Vec<u64> = bare[..burst].iter().map(|(_, s)| *s).collect();
        // More breaks than it had open: some have another cause, and which is unknown.
        if echoes.is_empty() || echoes.len() > open {
            return;
        }
        for s in &echoes {
            self.store.retire(*s);
        }
        if echoes.len() < open {
            return;
        }
        let what = format!(
            "{cause}; the proxy logged {n} broken streams (`Exception in ASGI application` with no answer after) for the {n} requests it had open: this stream was cut",
            n = open
        );
        for &s in undated.iter() {
            if self.store.outcome(s) == Some(Outcome::Error) {
                continue;
            }
            let x = Failure {
                hop: Hop::Consumer,
                what: what.clone(),
                confidence: Confidence::Likely,
                generate_failed: false,
                by_proxy: true,
            };
            self.fail_with(s, LogOrigin::Proxy, x, from, at);
        }
    }
}
