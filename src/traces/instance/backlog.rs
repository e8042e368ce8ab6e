//! What a log printed before pdtop started: lines older than `--since`
//! (set-up only), and the undated lines of a log that prints no time,
//! which come after everything the first read found.

use crate::feed::LogOrigin;
use crate::traces::correlator::Correlator;

impl Correlator {
    /// A line printed long before pdtop started (before `--since`): only
    /// what it says of the instance's set-up (its connector, role, block
    /// size, a start or a shutdown) is taken, no request.
    pub fn on_setup_line(&mut self, src: LogOrigin, line: &str, at: f64) {
        if matches!(src, LogOrigin::Proxy) {
            return;
        }
        self.setup_only_until = Some(self.setup_only_until.map_or(at, |u| u.max(at)));
        let Some(l) = crate::logs::vllm::parse_vllm_line(line) else { return };
        // A log that prints arrivals: what it names later without one began here.
        if matches!(
            l.event,
            crate::logs::vllm::VllmEvent::Received { .. } | crate::logs::vllm::VllmEvent::Added { .. }
        ) && !self.arrivals_logged.contains(&src)
        {
            self.arrivals_logged.push(src);
        }
        let setup = matches!(
            l.event,
            crate::logs::vllm::VllmEvent::KvConnectorConfig { .. }
                | crate::logs::vllm::VllmEvent::ServerStarted { .. }
                | crate::logs::vllm::VllmEvent::Shutdown
        );
        if setup {
            self.on_line(src, line, at);
            // A start read for set-up only: the loads after it were not.
            if let LogOrigin::Decode(i) = src {
                self.decodes.entry(i).or_default().transfers.read_from_the_middle();
            }
        } else if !matches!(l.event, crate::logs::vllm::VllmEvent::Aborted { .. })
            && let Some(n) = self.notes.read(src, line, &l, at)
        {
            // A cancel this old says nothing of how the instance is now.
            self.logs.max_log_len.insert(src, n);
        }
    }

    /// Whether lines a log printed before pdtop started, which carry no
    /// time (a uvicorn proxy's), are still to come. Until they are, that
    /// log is not read past any time: nothing is concluded from its
    /// silence. Once they have come, every request is decided again with
    /// them.
    pub fn set_backlog_unread(&mut self, unread: bool) {
        let was = std::mem::replace(&mut self.backlog_unread, unread);
        if was && !unread {
            let now = self.last_at;
            self.echoes_of_earlier_kills(now);
            self.sweep(now, false);
            // Decided again: what the proxy's flow vouches for (joins by
            // arrival order, requests the flow would say bypassed it).
            let flow: Vec<u64> = self
                .store
                .serials()
                .filter(|&s| {
                    self.store.get(s).is_some_and(|e| {
                        e.trace.join == crate::traces::model::Join::ByOrder
                            || matches!(
                                e.trace.reasons.first(),
                                Some(
                                    crate::traces::reason::Reason::OrderOnly(_)
                                        | crate::traces::reason::Reason::NoSharedIds { .. }
                                        | crate::traces::reason::Reason::NoPrefillByFlow { .. }
                                )
                            )
                    })
                })
                .collect();
            for s in flow {
                self.settle(s, now);
            }
        }
    }
}
