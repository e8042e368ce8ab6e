//! Instances that appear while pdtop runs (a Prometheus server's fleet):
//! the list only grows, so the indices collectors use stay valid, and an
//! instance that leaves is shown down rather than silently dropped.

use super::instance::InstanceState;
use super::{AppState, EventKind};
use crate::feed::Endpoint;

impl AppState {
    /// Adds an instance at `index`, the next free one. The same endpoint
    /// again is a no-op; any other index means the collector and the state
    /// disagree, which is reported rather than guessed at.
    pub fn add_instance(&mut self, index: usize, endpoint: Endpoint) {
        match self.instances.get(index) {
            Some(known) if known.endpoint == endpoint => {}
            None if index == self.instances.len() => self.instances.push(InstanceState::new(endpoint)),
            _ => {
                let text = format!(
                    "instance {} announced at index {index}, but the state has {} instance(s); ignored",
                    endpoint.display,
                    self.instances.len()
                );
                self.push_event(self.now, EventKind::SourceError, text.clone());
                self.source_errors.push(("discovery".into(), text));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Msg;
    use crate::feed::Role;

    fn ep(s: &str) -> Endpoint {
        Endpoint::parse(Role::Decode, s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn instances_are_added_in_order_and_only_once() {
        let mut st = AppState::new(vec![], 60.0);
        st.apply(Msg::Discovered { instance: 0, at: 1.0, endpoint: ep("a:1") });
        st.apply(Msg::Discovered { instance: 1, at: 1.0, endpoint: ep("b:1") });
        st.apply(Msg::Discovered { instance: 1, at: 2.0, endpoint: ep("b:1") });
        assert_eq!(st.instances.len(), 2);
        assert!(st.source_errors.is_empty());
        // A gap or a clash is reported, never a panic or a wrong instance.
        st.apply(Msg::Discovered { instance: 5, at: 3.0, endpoint: ep("c:1") });
        st.apply(Msg::Discovered { instance: 0, at: 3.0, endpoint: ep("c:1") });
        assert_eq!(st.instances.len(), 2);
        assert_eq!(st.source_errors.len(), 2);
        // Scrapes of an added instance are taken as any other.
        st.apply(Msg::Scrape { instance: 1, at: 4.0, body: "vllm:num_requests_running 3\n".into() });
        assert_eq!(st.instances[1].health.scrapes_ok, 1);
    }
}
