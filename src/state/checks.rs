//! The state's side of two checks across instances: do the roles run the
//! same thing ([`super::mismatch`]), and did an instance come back clean
//! after a restart, an outage or a cancelled request ([`super::recovery`]).
//! Both turn what they find into events.

use crate::feed::{LogOrigin, Role};

use super::instance::Interval;
use super::recovery::{Finding, Trigger};
use super::{AppState, EventKind, mismatch};
use crate::logs::startup::normalize_version;
use crate::traces::InstanceNote;

/// vLLM's stamps are whole seconds: a line printed up to a second after
/// what settled a finding may carry an earlier time.
const STAMP_S: f64 = 1.0;
/// How far past a finding's evidence the logs must be read before it is
/// said: a line stamped within `STAMP_S` of it, written a second late by
/// a buffered writer (as `traces::sweep` allows).
const LOG_CATCH_UP_S: f64 = STAMP_S + 1.0;
/// Logs that stop being read (a source failing) hold no finding longer.
const FINDING_HOLD_MAX_S: f64 = 30.0;

impl AppState {
    /// The instance a log belongs to: the n-th of its role, as on the
    /// command line.
    pub(super) fn instance_of(&self, origin: LogOrigin) -> Option<usize> {
        let (role, n) = match origin {
            LogOrigin::Prefill(n) => (Role::Prefill, n),
            LogOrigin::Decode(n) => (Role::Decode, n),
            LogOrigin::Proxy => return None,
        };
        self.instances.iter().enumerate().filter(|(_, i)| i.endpoint.role == role).nth(n).map(|(k, _)| k)
    }

    /// Whether the instance's own log is tailed.
    pub(super) fn has_log(&self, idx: usize) -> bool {
        self.logs.as_ref().is_some_and(|l| l.sources.iter().any(|s| self.instance_of(s.source) == Some(idx)))
    }

    /// What the instances' logs said of themselves since the last lines
    /// (read once, by the correlator): start-up config and cancellations,
    /// each judged from the time its line was printed.
    pub(super) fn on_instance_notes(&mut self) {
        let Some(logs) = &mut self.logs else {
            return;
        };
        let notes = logs.correlator.drain_instance_notes();
        let mut changed = false;
        for (origin, at, note) in notes {
            let Some(idx) = self.instance_of(origin) else {
                continue;
            };
            match note {
                InstanceNote::Config(msg) => changed |= self.instances[idx].startup.on_line(&msg),
                InstanceNote::Cancelled(n) => {
                    // A line with no usable time is taken as read now.
                    let at = if at.is_finite() { at } else { self.now };
                    let names = self.names();
                    let display = |k: usize| names.get(k).cloned().unwrap_or_default();
                    // Held until the logs are read past it (`judge_recovery`).
                    let found = self.recovery.start_logged(idx, Trigger::Cancelled(n), at, STAMP_S, &display);
                    self.recovery.hold(found);
                }
            }
        }
        if changed {
            self.refresh_mismatches();
        }
    }

    pub(super) fn on_version(&mut self, idx: usize, version: &str) {
        if let Some(inst) = self.instances.get_mut(idx) {
            inst.version = Some(normalize_version(version));
            self.refresh_mismatches();
        }
    }

    /// Recomputes the disagreements; a new one is an event.
    pub(super) fn refresh_mismatches(&mut self) {
        let found = mismatch::find(&self.instances);
        for m in &found {
            if !self.mismatches.iter().any(|old| old.key() == m.key()) {
                self.push_event(self.now, EventKind::Mismatch, m.why.clone());
            }
        }
        self.mismatches = found;
    }

    /// The mismatch that most likely explains silent misses, if any.
    pub fn miss_cause(&self) -> Option<String> {
        mismatch::likely_miss_cause(&self.mismatches)
    }

    /// After a good scrape: restarts and cancellations start a watch, and
    /// the interval may answer an open one.
    pub(super) fn check_recovery(&mut self, idx: usize, iv: &Interval, has_log: bool) {
        use crate::metrics::model::Counter;
        let Some(inst) = self.instances.get(idx) else {
            return;
        };
        let (role, display) = (inst.endpoint.role, inst.endpoint.display.clone());
        if iv.after_restart {
            self.recovery.start(idx, Trigger::Restart, iv.t - iv.dt);
            if role == Role::Decode {
                self.watch_producers(&display, iv.t);
            }
        }
        // Where the instance's log is tailed, its `Aborted` lines say it.
        let aborted = iv.counter(Counter::RequestsAborted).round() as u64;
        if aborted > 0 && !has_log {
            self.recovery.start(idx, Trigger::Cancelled(aborted), iv.t);
        }
        self.recovery.on_interval(idx, iv);
        self.judge_recovery();
    }

    /// An instance just went down.
    pub(super) fn recovery_on_down(&mut self, idx: usize, at: f64) {
        let Some(inst) = self.instances.get(idx) else {
            return;
        };
        let (role, display) = (inst.endpoint.role, inst.endpoint.display.clone());
        self.recovery.on_down(idx, at);
        if role == Role::Decode {
            self.watch_producers(&display, at);
        }
        self.judge_recovery();
    }

    /// A producer may keep KV for a consumer that left.
    fn watch_producers(&mut self, decode: &str, at: f64) {
        let prefills: Vec<usize> =
            (0..self.instances.len()).filter(|&k| self.instances[k].endpoint.role == Role::Prefill).collect();
        for k in prefills {
            self.recovery.start(k, Trigger::PeerLeft(decode.to_string()), at);
        }
    }

    fn names(&self) -> Vec<String> {
        self.instances.iter().map(|i| i.endpoint.display.clone()).collect()
    }

    /// The end of a `check`: everything seen is judged, open watches say
    /// what they know, and every finding is said.
    pub(super) fn finish_recovery(&mut self) {
        self.on_instance_notes();
        let up: Vec<bool> = self.instances.iter().map(|i| i.health.up).collect();
        let names = self.names();
        let found = self.recovery.finish(self.now, |k| up.get(k).copied().unwrap_or(false), &|k| {
            names.get(k).cloned().unwrap_or_default()
        });
        self.recovery.hold(found);
        self.say_findings(f64::INFINITY);
    }

    /// A failed next request whose failure the instance's own log named
    /// since the watch began, up to a second after what settled it (the
    /// stamps are whole seconds): the finding says that failure, so that
    /// the trigger (a cancel, a restart) does not read as its cause.
    fn with_named_failure(&self, text: String, idx: usize, since: f64, at: f64) -> String {
        let Some(logs) = &self.logs else {
            return text;
        };
        let origins: Vec<String> = logs
            .sources
            .iter()
            .filter(|s| self.instance_of(s.source) == Some(idx))
            .map(|s| format!("{}: ", s.source))
            .collect();
        let named = self.events.iter().rev().find(|e| {
            matches!(e.kind, EventKind::Log(k) if k.is_failure())
                && e.t >= since - 1.0
                && e.t <= at + STAMP_S
                && origins.iter().any(|o| e.text.starts_with(o.as_str()))
        });
        match named {
            Some(e) => format!("{text}; its log names the failure: {}", e.text),
            None => text,
        }
    }

    /// Judges what the scrapes showed as far as the logs have been read
    /// `LOG_CATCH_UP_S` past it (all of it without logs; logs that stall
    /// hold it `FINDING_HOLD_MAX_S` at most), so that a cancel the logs
    /// name comes in its place and a finding names the failure the log
    /// printed with it, however far behind the logs were read. Called
    /// after the log's events are in.
    pub(super) fn judge_recovery(&mut self) {
        let upto = match &self.logs {
            None => f64::INFINITY,
            Some(logs) => (logs.read_up_to(self.now) - LOG_CATCH_UP_S).max(self.now - FINDING_HOLD_MAX_S),
        };
        if self.recovery.due(upto) {
            let names = self.names();
            let found = self.recovery.advance(upto, &|k| names.get(k).cloned().unwrap_or_default());
            self.recovery.hold(found);
        }
        self.say_findings(upto);
    }

    /// Says the findings held whose evidence is at or before `upto`.
    fn say_findings(&mut self, upto: f64) {
        for f in self.recovery.release(upto) {
            let at = f.at();
            let (kind, text) = match f {
                Finding::Next { ok: true, text, .. } | Finding::KvReleased { text, .. } => {
                    (EventKind::Recovered, text)
                }
                Finding::Next { ok: false, text, instance, since, at } => {
                    (EventKind::NotRecovered, self.with_named_failure(text, instance, since, at))
                }
                Finding::KvNotReleased { text, .. } => (EventKind::KvNotReleased, text),
                Finding::Unknown { text, .. } => (EventKind::RecoveryUnknown, text),
            };
            self.push_event(at, kind, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::feed::{Endpoint, LogOrigin, Msg, Role, TailCounts, TailState};
    use crate::state::recovery::Trigger;
    use crate::state::{AppState, EventKind};

    fn real(file: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lab-captures/qwen3-shape-restart");
        std::fs::read_to_string(format!("{dir}/{file}")).unwrap()
    }

    fn state(decodes: usize) -> AppState {
        let mut eps = vec![Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap()];
        for k in 0..decodes {
            eps.push(Endpoint::parse(Role::Decode, &format!("127.0.0.1:82{k:02}")).unwrap());
        }
        AppState::new(eps, 60.0)
    }

    fn mismatch_events(st: &AppState) -> Vec<String> {
        st.events.iter().filter(|e| e.kind == EventKind::Mismatch).map(|e| e.text.clone()).collect()
    }

    #[test]
    fn one_event_per_disagreement_not_per_instance() {
        let mut st = state(2);
        let body = real("decode-metrics-idle.txt");
        // The real scrape with only its block size changed.
        let odd = body.replace("block_size=\"16\"", "block_size=\"32\"");
        st.apply(Msg::Scrape { instance: 0, at: 1.0, body: real("prefill-metrics-idle.txt") });
        st.apply(Msg::Scrape { instance: 1, at: 1.0, body: odd.clone() });
        st.apply(Msg::Scrape { instance: 2, at: 1.0, body: odd });
        assert_eq!(
            mismatch_events(&st),
            ["prefill block 16, decode block 32: decode looks for blocks the prefill never stores"]
        );
        assert_eq!(st.mismatches[0].values.len(), 3);
        st.apply(Msg::Version { instance: 0, at: 2.0, version: "0.26.0".into() });
        st.apply(Msg::Version { instance: 1, at: 2.0, version: "v0.26.0".into() });
        assert_eq!(mismatch_events(&st).len(), 1);
        st.apply(Msg::Version { instance: 2, at: 2.0, version: "0.18.1".into() });
        assert_eq!(mismatch_events(&st).len(), 2);
        assert!(st.miss_cause().unwrap().starts_with("likely cause: prefill block 16"));
    }

    #[test]
    fn an_instance_log_gives_its_config_and_its_cancels() {
        // The lines reach the instance through the correlator's one read.
        let mut st = state(1).with_logs(&[(LogOrigin::Decode(0), "decode.log".into())]);
        let lines: Vec<String> = real("vllm-decode.log").lines().map(str::to_owned).collect();
        let msg = |lines| Msg::LogLines {
            source: LogOrigin::Decode(0),
            at: 5.0,
            lines,
            state: TailState::Following,
            counts: TailCounts::default(),
        };
        st.apply(msg(lines));
        // Given on once the polling round that read them is over.
        st.apply(Msg::LogsPolled { at: 5.0 });
        assert_eq!(st.instances[1].startup.kv_role.as_deref(), Some("kv_consumer"));
        assert_eq!(st.instances[0].startup.kv_role, None);
        // A real line of the demo-proxy recording's decode log.
        let aborted = "(APIServer pid=1010) INFO 12-01 07:29:34 [async_llm.py:721] Aborted request(s) cmpl-93f35520d13dc515-0-8d66b835.";
        st.apply(msg(vec![aborted.to_string()]));
        st.apply(Msg::LogsPolled { at: 5.0 });
        assert_eq!(st.recovery.watching(1).map(|w| &w.trigger), Some(&Trigger::Cancelled(1)));
        // The proxy's log belongs to no instance.
        assert_eq!(st.instance_of(LogOrigin::Proxy), None);
        assert_eq!(st.instance_of(LogOrigin::Decode(1)), None);
    }

    /// A connector failure the decode's log named is what its failed next
    /// request is said to have met, not the cancel that began the watch.
    #[test]
    fn a_failure_the_log_names_is_said_not_only_the_cancel_before_it() {
        let mut st = state(1).with_logs(&[(LogOrigin::Decode(0), "decode.log".to_string())]);
        let msg = |at, line: &str| Msg::LogLines {
            source: LogOrigin::Decode(0),
            at,
            lines: vec![line.to_string()],
            state: TailState::Following,
            counts: TailCounts::default(),
        };
        let body = real("decode-metrics-idle.txt");
        let err = "vllm:request_success_total{engine=\"0\",finished_reason=\"error\",model_name=\"lab-8b\"}";
        assert!(body.contains(&format!("{err} 0.0")));
        st.apply(Msg::Scrape { instance: 1, at: 1.0, body: body.clone() });
        // A real cancel (demo-proxy-qwen3's decode log), then a real KV load
        // failure (vLLM's scheduler.py, the corpus's src-vllm-kv-load-failure-policy.log).
        st.apply(msg(5.0, "(APIServer pid=1010) INFO 12-01 07:29:34 [async_llm.py:721] Aborted request(s) cmpl-93f35520d13dc515-0-8d66b835."));
        st.apply(Msg::LogsPolled { at: 5.0 });
        st.apply(Msg::Scrape { instance: 1, at: 6.0, body: body.clone() });
        st.apply(msg(7.0, "(EngineCore_DP0 pid=2871) ERROR 09-14 08:32:11 [scheduler.py:2192] Failing 1 request(s) due to KV load failure (failure_policy=fail, 21376 tokens affected). Request IDs: {'chatcmpl-5b0e1c7d2f8a4a43b9f0c2d4e6a8b1c3'}"));
        st.apply(Msg::LogsPolled { at: 7.0 });
        st.apply(Msg::Tick { at: 8.0 });
        // The real scrape with the one request that errored counted.
        st.apply(Msg::Scrape {
            instance: 1,
            at: 10.0,
            body: body.replace(&format!("{err} 0.0"), &format!("{err} 1.0")),
        });
        // Said once the log has been read 2 s past the scrape, where nothing
        // more came.
        assert!(!st.events.iter().any(|e| e.kind == EventKind::NotRecovered));
        st.apply(Msg::LogsPolled { at: 12.0 });
        st.apply(Msg::Tick { at: 12.0 });
        let failed: Vec<&str> =
            st.events.iter().filter(|e| e.kind == EventKind::NotRecovered).map(|e| e.text.as_str()).collect();
        let all: Vec<String> = st.events.iter().map(|e| format!("{} {:?} {}", e.t, e.kind, e.text)).collect();
        assert_eq!(failed.len(), 1, "{all:#?}");
        assert!(failed[0].contains("after a cancelled request, the next request failed"), "{}", failed[0]);
        assert!(failed[0].contains("its log names the failure: decode#0: "), "{all:#?}");
        assert!(
            failed[0].contains("kv_load_failed chatcmpl-5b0e1c7d2f8a4a43b9f0c2d4e6a8b1c3"),
            "{}",
            failed[0]
        );
    }
}
