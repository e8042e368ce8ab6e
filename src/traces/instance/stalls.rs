//! An engine that holds running requests and makes no progress: vLLM's
//! periodic stats line (every 10 s while busy) says `Running: N reqs` with
//! no prompt and no generation throughput over its interval. A running
//! request produces a token every step (milliseconds), so a whole interval
//! without one means a hang — a KV load that never finished, a stuck
//! collective, a dead worker — and nothing else reports it. One line is
//! all there is to see: after a line of zeros vLLM logs the next ones at
//! DEBUG ("avoid log noise on an idle production system"). One event per
//! stall; a line with progress (or nothing running) ends it.

use crate::feed::LogOrigin;
use crate::logs::signal::SignalKind;
use crate::logs::vllm::EngineStats;
use crate::traces::correlator::Correlator;

impl Correlator {
    pub(crate) fn on_engine_progress(&mut self, src: LogOrigin, s: &EngineStats, t: f64) {
        // Per engine: a data-parallel API server interleaves `Engine 000`/`001` lines.
        let stall = self.logs.stalls.entry((src, s.engine)).or_default();
        let interval = stall.last_stats_at.map(|p| t - p).filter(|d| *d > 0.0);
        stall.last_stats_at = Some(t);
        let idle_but_running = s.running > 0 && s.prompt_tps == 0.0 && s.gen_tps == 0.0;
        if !idle_but_running {
            stall.reported = false;
            return;
        }
        if stall.reported {
            return;
        }
        stall.reported = true;
        let over = interval.map_or_else(|| "its interval".to_string(), |d| format!("the {d:.0} s before"));
        let text = format!(
            "Running {} reqs and not one prompt or generated token over {over} (a hang; vLLM logs the next such lines at DEBUG)",
            s.running
        );
        let start = interval.map_or(t, |d| t - d);
        self.push_log_event(src, SignalKind::EngineStalled, text, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::CorrelatorOptions;

    fn stats(running: u32, gen_tps: f64) -> EngineStats {
        EngineStats { engine: Some(0), gen_tps, running, ..EngineStats::default() }
    }

    #[test]
    fn a_line_without_progress_is_one_stall_and_progress_ends_it() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let d = LogOrigin::Decode(0);
        c.on_engine_progress(d, &stats(1, 7.0), 0.0);
        assert!(c.drain_log_events().is_empty());
        c.on_engine_progress(d, &stats(1, 0.0), 10.0);
        c.on_engine_progress(d, &stats(1, 0.0), 20.0);
        let ev = c.drain_log_events();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!((ev[0].kind, ev[0].t), (SignalKind::EngineStalled, 0.0));
        assert!(ev[0].text.contains("the 10 s before"), "{}", ev[0].text);
        // Progress, then a new stall: a second event.
        c.on_engine_progress(d, &stats(1, 7.0), 30.0);
        c.on_engine_progress(d, &stats(2, 0.0), 40.0);
        assert_eq!(c.drain_log_events().len(), 1);
        // Idle with nothing running is not a stall.
        c.on_engine_progress(d, &stats(0, 0.0), 50.0);
        c.on_engine_progress(d, &stats(0, 0.0), 60.0);
        assert!(c.drain_log_events().is_empty());
    }

    /// Data parallel: one log interleaves `Engine 000` and `Engine 001`; a
    /// hang of one is one event, whatever the other does.
    #[test]
    fn engines_of_one_log_are_judged_apart() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let d = LogOrigin::Decode(0);
        for k in 0..4 {
            let t = f64::from(k) * 10.0;
            c.on_engine_progress(
                d,
                &EngineStats { engine: Some(0), running: 3, ..EngineStats::default() },
                t,
            );
            c.on_engine_progress(
                d,
                &EngineStats { engine: Some(1), running: 1, gen_tps: 9.0, ..EngineStats::default() },
                t + 1.0,
            );
        }
        assert_eq!(c.drain_log_events().len(), 1);
    }
}
