//! What the router's own ids stand for: vllm-router forwards another id to
//! the instances than the one it logs, and prints the pair once.

use std::collections::{HashMap, VecDeque};

/// Router ids remembered with their forwarded id.
const ALIASES_CAP: usize = 4096;

#[derive(Debug, Clone, Default)]
pub(crate) struct RouterJoin {
    forwarded: HashMap<String, String>,
    order: VecDeque<String>,
    /// The last backend error that named no request: leg, status, time.
    pub(crate) last_leg: Option<(String, Option<u16>, f64)>,
}

impl RouterJoin {
    pub(crate) fn alias(&mut self, router_id: &str, forwarded: &str) {
        if self.forwarded.insert(router_id.to_string(), forwarded.to_string()).is_none() {
            self.order.push_back(router_id.to_string());
        }
        while self.order.len() > ALIASES_CAP {
            if let Some(old) = self.order.pop_front() {
                self.forwarded.remove(&old);
            }
        }
    }

    /// The name the instances know the request by.
    pub(crate) fn key(&self, router_id: &str) -> String {
        self.forwarded.get(router_id).cloned().unwrap_or_else(|| router_id.to_string())
    }
}
