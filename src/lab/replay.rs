//! Builds the state a live pdtop would have reached at some point of a
//! recording, without any network or file: scrapes once a second and log
//! lines read every half second, in the order a live polling round reads
//! them. Screenshots and tests use it; it is also the headless replay.

use super::capture::Capture;
use crate::feed::LogOrigin;
use crate::feed::{Endpoint, Msg};
use crate::feed::{FolderStat, KvDirSnapshot};
use crate::feed::{TailCounts, TailState};
use crate::pipeline::Session;
use crate::record::Recording;
use crate::sources::netdev::parse_net_dev;
use crate::state::AppState;
use crate::state::link::KvModel;

/// The endpoints the recorded instances had, prefills first.
pub fn endpoints(capture: &Capture) -> Vec<Endpoint> {
    capture.instances.iter().filter_map(|i| Endpoint::parse(i.role, &i.addr).ok()).collect()
}

/// The state `secs` seconds into the recording. `with_logs` false gives a
/// metrics-only pdtop.
pub fn state_at(capture: &Capture, secs: f64, with_logs: bool) -> AppState {
    let mut st = initial_state(capture, with_logs);
    for m in messages(capture, secs, with_logs) {
        st.apply(m);
    }
    st
}

/// A fresh state watching what the recorded lab had.
pub fn initial_state(capture: &Capture, with_logs: bool) -> AppState {
    Session::from_capture(capture, with_logs).state()
}

impl Session {
    /// What the recorded lab had: its endpoints, its logs (unless
    /// `with_logs` is false: a metrics-only pdtop), the loopback interface
    /// and the model's KV size.
    pub fn from_capture(capture: &Capture, with_logs: bool) -> Session {
        let logs: Vec<(LogOrigin, String)> = if with_logs {
            capture.logs.iter().map(|l| (l.source, l.file_name.clone())).collect()
        } else {
            Vec::new()
        };
        let kv_model = capture.model_config.as_deref().and_then(|text| {
            KvModel::from_config(text, "the recording's model-config.json".into(), Default::default()).ok()
        });
        Session {
            started: capture.t0,
            endpoints: endpoints(capture),
            router: None,
            logs,
            iface: (!capture.netdev.is_empty()).then(|| "lo".to_string()),
            kv_model,
            kv_cache_dtype: None,
            window_secs: 60.0,
            clock_speed: 1.0,
            clock_origin: None,
            show_prompts: false,
            collect: None,
        }
    }
}

/// The whole capture as a recording (what `import-lab` writes): the
/// session it had and every observation, clock ticks left out.
pub fn recording(capture: &Capture) -> Recording {
    let span = capture.t_end - capture.t0 + 1.0;
    let messages = messages(capture, span, true).into_iter().filter(Msg::is_observation).collect();
    Recording {
        session: Session::from_capture(capture, true),
        version: crate::record::VERSION,
        messages,
        broken: None,
    }
}

/// Every message a live pdtop would have received in the first `secs` of
/// the recording, in order, with clock ticks between.
pub fn messages(capture: &Capture, secs: f64, with_logs: bool) -> Vec<Msg> {
    read_as(capture, &Reading::from_start(secs, with_logs))
}

/// How a live pdtop read the recording: when it started, how often it
/// read the logs. What it was given is the same whatever the reading;
/// only the moments it read it differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Seconds of the recording to read.
    pub secs: f64,
    /// Whether the logs are tailed (false: a metrics-only pdtop).
    pub with_logs: bool,
    /// Recording seconds between two reads of the logs: a live tail reads
    /// four times a second, so a lab played at x1 is read every 0.25 s of
    /// it, at x4 every second, at x20 every 5 s.
    pub every: f64,
    /// Seconds into the recording at which pdtop started: the logs'
    /// lines printed before it are read in one gulp then, and the proxy's
    /// (which print no time) are undated.
    pub start: f64,
    /// Scrapes and span exports before this many seconds into the
    /// recording never reached pdtop (it was not running): a mid-run
    /// start, and the full reading it is held against, lose the same ones.
    pub lost_before: f64,
}

impl Reading {
    /// Read from the recording's start, every half second.
    pub fn from_start(secs: f64, with_logs: bool) -> Reading {
        Reading { secs, with_logs, every: 0.5, start: 0.0, lost_before: 0.0 }
    }
}

/// Every message a live pdtop reading as `r` says would have received, in
/// order, with clock ticks between and `LogsPolled` after each read of the
/// logs (as the live collector sends).
pub fn read_as(capture: &Capture, r: &Reading) -> Vec<Msg> {
    let with_logs = r.with_logs;
    let every = if r.every.is_finite() && r.every > 0.0 { r.every } else { 0.5 };
    let mut out = Vec::new();
    let mut order: Vec<usize> = (0..capture.logs.len()).collect();
    order.sort_by_key(|i| match capture.logs[*i].source {
        LogOrigin::Prefill(_) => 0,
        LogOrigin::Proxy => 1,
        LogOrigin::Decode(_) => 2,
    });
    let mut next_line = vec![0usize; capture.logs.len()];
    let mut row = 0;
    let mut last_scrape = vec![f64::MIN; capture.instances.len().max(2)];
    let mut last_link = f64::MIN;
    let mut next_spans = 0;
    let mut next_scan = 0;
    let end = capture.t0 + r.secs;
    let lost = capture.t0 + r.lost_before.max(r.start);
    let mut t = capture.t0 + r.start.max(0.0);
    let mut next_read = t;
    let step = every.min(0.5);
    // A log nothing dates says so as its state, once.
    for l in capture.logs.iter().filter(|_| with_logs) {
        if let Some(why) = &l.undated {
            let state = TailState::Error(why.clone());
            out.push(Msg::LogLines {
                source: l.source,
                at: t,
                lines: Vec::new(),
                state,
                counts: TailCounts::default(),
            });
        }
    }
    while t <= end {
        if with_logs && t >= next_read {
            for &i in &order {
                let lines = &capture.logs[i].lines;
                let start = next_line[i];
                let stop = start + lines[start..].partition_point(|(lt, _)| *lt <= t);
                if stop > start {
                    out.push(Msg::LogLines {
                        source: capture.logs[i].source,
                        at: t,
                        lines: lines[start..stop].iter().map(|(_, l)| l.clone()).collect(),
                        state: TailState::Following,
                        counts: TailCounts::default(),
                    });
                    next_line[i] = stop;
                }
            }
            out.push(Msg::LogsPolled { at: t });
            next_read += every;
        }
        while row < capture.scrapes.len() && capture.scrapes[row].t <= t {
            let sr = &capture.scrapes[row];
            let instance = sr.instance.min(last_scrape.len() - 1);
            // One scrape a second per instance, like the default interval.
            if sr.t >= lost && sr.t - last_scrape[instance] >= 0.99 {
                last_scrape[instance] = sr.t;
                out.push(match &sr.body {
                    Some(body) => Msg::Scrape { instance, at: sr.t, body: body.clone() },
                    None => {
                        Msg::ScrapeFailed { instance, at: sr.t, error: sr.error.clone().unwrap_or_default() }
                    }
                });
            }
            row += 1;
        }
        while let Some((st, spans)) = capture.spans.get(next_spans).filter(|(st, _)| *st <= t) {
            if *st >= lost {
                let counts = crate::feed::SpanCounts::default();
                out.push(Msg::Spans { at: *st, spans: spans.clone(), counts });
            }
            next_spans += 1;
        }
        // Each recorded listing of the connector directory at its own time:
        // when a folder first appeared bounds when its writer ran. Started
        // late, the first read finds the folder as the last listing left it.
        while let Some((st, scan)) = capture.kvdir_scans.get(next_scan).filter(|(st, _)| *st <= t) {
            let last_before_start = capture.kvdir_scans.get(next_scan + 1).is_none_or(|(nt, _)| *nt > t);
            if *st >= lost || last_before_start {
                out.push(Msg::KvDir { at: st.max(lost.min(t)), scan: Ok(scan.clone()) });
            }
            next_scan += 1;
        }
        if t - last_link >= 0.99 {
            last_link = t;
            out.extend(link_messages(capture, t));
        }
        out.push(Msg::Tick { at: t });
        t += step;
    }
    out
}

/// What the link collectors would read at `t`: the recorded interface
/// counters and the connector directory's folders.
fn link_messages(capture: &Capture, t: f64) -> Vec<Msg> {
    let mut out = Vec::new();
    let i = capture.netdev.partition_point(|(nt, _)| *nt <= t);
    if i > 0 {
        let read = parse_net_dev(&capture.netdev[i - 1].1).map_err(|e| e.to_string());
        out.push(Msg::NetDev { at: t, read });
    }
    // Recorded listings (`kvdir_scans`) are sent at their own times.
    if capture.kvdir_scans.is_empty() && !capture.kvdir_created.is_empty() {
        let due = capture.kvdir_created.partition_point(|(ct, _)| *ct <= t);
        let scan: KvDirSnapshot = capture.kvdir_created[..due]
            .iter()
            .map(|(_, i)| {
                let (name, files) = &capture.kvdir_folders[*i];
                let stat =
                    FolderStat { files: files.len() as u64, bytes: files.iter().map(|(_, s)| *s).sum() };
                (name.clone(), stat)
            })
            .collect();
        out.push(Msg::KvDir { at: t, scan: Ok(scan) });
    }
    out
}
