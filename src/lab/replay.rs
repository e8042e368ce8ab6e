//! Builds the state a live pdtop would have reached at some point of a
//! recording, without any network or file: scrapes once a second and log
//! lines read every half second, in the order a live polling round reads
//! them. Screenshots and tests use it; it is also the headless replay.

use super::capture::Capture;
use crate::sources::logtail::{TailCounts, TailState};
use crate::sources::{Endpoint, Msg};
use crate::state::{AppState, Role};
use crate::traces::Source;

/// Where each of a capture's logs belongs.
pub fn source_of(file: &str) -> Source {
    match file {
        "prefill.log" => Source::Prefill(0),
        "proxy.log" => Source::Proxy,
        _ => Source::Decode(0),
    }
}

/// The endpoints the recorded pair had.
pub fn endpoints() -> Vec<Endpoint> {
    [(Role::Prefill, "127.0.0.1:8100"), (Role::Decode, "127.0.0.1:8200")]
        .into_iter()
        .filter_map(|(role, s)| Endpoint::parse(role, s).ok())
        .collect()
}

/// The state `secs` seconds into the recording. `with_logs` false gives a
/// metrics-only pdtop.
pub fn state_at(capture: &Capture, secs: f64, with_logs: bool) -> AppState {
    let logs: Vec<(Source, String)> = if with_logs {
        capture.logs.iter().map(|l| (source_of(l.file_name), l.file_name.to_string())).collect()
    } else {
        Vec::new()
    };
    let mut st = AppState::new(endpoints(), 60.0).with_logs(&logs);
    let mut order: Vec<usize> = (0..capture.logs.len()).collect();
    order.sort_by_key(|i| match source_of(capture.logs[*i].file_name) {
        Source::Prefill(_) => 0,
        Source::Proxy => 1,
        Source::Decode(_) => 2,
    });
    let mut next_line = vec![0usize; capture.logs.len()];
    let mut row = 0;
    let mut last_scrape = [f64::MIN; 2];
    let end = capture.t0 + secs;
    let mut t = capture.t0;
    while t <= end {
        if with_logs {
            for &i in &order {
                let lines = &capture.logs[i].lines;
                let start = next_line[i];
                let stop = start + lines[start..].partition_point(|(lt, _)| *lt <= t);
                if stop > start {
                    st.apply(Msg::LogLines {
                        source: source_of(capture.logs[i].file_name),
                        at: t,
                        lines: lines[start..stop].iter().map(|(_, l)| l.clone()).collect(),
                        state: TailState::Following,
                        counts: TailCounts::default(),
                    });
                    next_line[i] = stop;
                }
            }
        }
        while row < capture.scrapes.len() && capture.scrapes[row].t <= t {
            let r = &capture.scrapes[row];
            let instance = usize::from(r.role == Role::Decode);
            // One scrape a second per instance, like the default interval.
            if r.t - last_scrape[instance] >= 0.99 {
                last_scrape[instance] = r.t;
                st.apply(match &r.body {
                    Some(body) => Msg::Scrape { instance, at: r.t, body: body.clone() },
                    None => {
                        Msg::ScrapeFailed { instance, at: r.t, error: r.error.clone().unwrap_or_default() }
                    }
                });
            }
            row += 1;
        }
        st.apply(Msg::Tick { at: t });
        t += 0.5;
    }
    st
}
