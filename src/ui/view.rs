//! What the screen keeps of itself: the view shown, the selection, the
//! search, the sort orders (the state only says what is true).

use super::waterfall;
use crate::state::AppState;

/// The views Tab cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Overview,
    Instances,
    Requests,
    Link,
    Events,
}

impl View {
    pub const ALL: [View; 5] = [View::Overview, View::Instances, View::Requests, View::Link, View::Events];

    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "Overview",
            View::Instances => "Instances",
            View::Requests => "Requests",
            View::Link => "Link",
            View::Events => "Events",
        }
    }
}

/// Which span of time the histograms cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistWindow {
    Sliding,
    SinceStart,
}

/// What the demo shows in the title bar.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoInfo {
    pub capture: String,
    pub speed: f64,
    pub loop_no: u64,
    pub progress: f64,
}

/// Everything about the screen that is not data: selection, overlays,
/// the frozen snapshot.
#[derive(Debug, Clone)]
pub struct ViewState {
    pub view: View,
    pub help: bool,
    /// While frozen, this snapshot is drawn and collection goes on.
    pub frozen: Option<Box<AppState>>,
    pub window: HistWindow,
    pub scroll: usize,
    pub demo: Option<DemoInfo>,
    /// Requests view: the selected row, the id filter, whether the filter
    /// is being typed, whether the trace pane is open, and a pinned id.
    pub selected: usize,
    pub search: String,
    pub searching: bool,
    pub detail: bool,
    /// The followed trace's identity ([`crate::traces::Trace::serial`]).
    pub followed: Option<u64>,
    /// Title-bar text of a replay (position, speed).
    pub badge: Option<crate::pipeline::ReplayBadge>,
    /// Instances view: selected row, sort column; the instance drilled into.
    pub inst_selected: usize,
    pub inst_sort: SortKey,
    /// Requests view: sorted by a span figure (`s`), or newest first.
    pub req_sort: waterfall::RequestSort,
    pub focus: Option<usize>,
    /// Fed by log files alone (`replay --from-logs`): panels that need
    /// metrics say so instead of drawing zeros.
    pub logs_only: bool,
    /// What reading the logs after the fact could not know (an assumed
    /// year, a file left out): said on screen as `check` says it.
    pub notes: Vec<String>,
    /// Rows the list of the view last drew (a page for PgUp / PgDn, the
    /// last page for `G`); the renderer writes it, the keys read it.
    pub page: std::cell::Cell<usize>,
    /// What the last key changed that the screen would not show itself
    /// (`theme: light`): on the footer until the next key.
    pub said: Option<String>,
    /// Lines the trace pane is scrolled down (`J` / `K`).
    pub trace_scroll: usize,
    /// The wrong-wire warning and the state time it was built at
    /// ([`ViewState::wire_warning`]).
    pub wire: std::cell::RefCell<Option<(f64, Option<String>)>>,
    /// The latency charts' sums of bins, kept from frame to frame.
    pub folds: crate::state::latency::Folds,
}

/// How often (state seconds) the banner's wrong-wire warning is built
/// again: it reads the whole link ledger (every request's bytes and
/// folders), a sixth of a frame where speeds are known, and the wire that
/// carried the KV is a judgement over a window, not a second.
const WIRE_EVERY_S: f64 = 5.0;

impl ViewState {
    /// The wrong-wire warning for the banner, built again when
    /// `WIRE_EVERY_S` of the state's time has passed or time went back
    /// (a replay sought back).
    pub fn wire_warning(&self, state: &AppState) -> Option<String> {
        let mut memo = self.wire.borrow_mut();
        match &*memo {
            Some((at, w)) if state.now >= *at && state.now - *at < WIRE_EVERY_S => w.clone(),
            _ => {
                let w = crate::report::kv::wire_warning_of(state);
                *memo = Some((state.now, w.clone()));
                w
            }
        }
    }
}

/// What a panel that needs metrics says when there are none.
pub const NO_METRICS: &str = "no metrics — logs only";

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            view: View::Overview,
            help: false,
            frozen: None,
            window: HistWindow::Sliding,
            scroll: 0,
            demo: None,
            selected: 0,
            search: String::new(),
            searching: false,
            detail: false,
            followed: None,
            badge: None,
            inst_selected: 0,
            inst_sort: SortKey::Role,
            req_sort: waterfall::RequestSort::Newest,
            focus: None,
            logs_only: false,
            notes: Vec::new(),
            page: std::cell::Cell::new(10),
            said: None,
            trace_scroll: 0,
            wire: Default::default(),
            folds: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Role,
    Health,
    KvUsage,
    TtftP90,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Role => SortKey::Health,
            SortKey::Health => SortKey::KvUsage,
            SortKey::KvUsage => SortKey::TtftP90,
            SortKey::TtftP90 => SortKey::Role,
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            SortKey::Role => "endpoint",
            SortKey::Health => "health",
            SortKey::KvUsage => "KV usage",
            SortKey::TtftP90 => "TTFT p90",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_warning_is_built_again_after_its_interval_or_a_seek_back() {
        let mut state = AppState::new(Vec::new(), 60.0);
        state.now = 1000.0;
        let view = ViewState::default();
        // What an earlier build said is kept within the interval...
        *view.wire.borrow_mut() = Some((1000.0, Some("earlier".into())));
        state.now = 1000.0 + WIRE_EVERY_S - 0.5;
        assert_eq!(view.wire_warning(&state).as_deref(), Some("earlier"));
        // ...and built again from the state after it (no link read: none).
        state.now = 1000.0 + WIRE_EVERY_S;
        assert_eq!(view.wire_warning(&state), None);
        assert_eq!(*view.wire.borrow(), Some((1000.0 + WIRE_EVERY_S, None)));
        // A replay sought back builds it again at once.
        *view.wire.borrow_mut() = Some((1000.0, Some("later".into())));
        state.now = 990.0;
        assert_eq!(view.wire_warning(&state), None);
    }
}
