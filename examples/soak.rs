//! Soak: 24 simulated hours of a prefill/decode pair scraped every second,
//! replayed headless as fast as the machine goes, through the same
//! `AppState::apply` the dashboard uses. Prints resident memory (VmRSS from
//! /proc/self/status) and the bytes live on the heap at the start and every
//! simulated hour, so a leak shows as a curve that keeps climbing after the
//! rings are full (the heap column), and the allocator's own overhead and
//! fragmentation as the gap between the two.
//!
//! The embedded recording (about three minutes of a real vLLM pair, with
//! silent misses and a decode restart) is looped. Each loop shifts time by
//! the recording's length, advances every counter and histogram series by
//! its final value in the recording (so deltas stay what the pair really
//! did, and a loop boundary is not a restart), and renames the request ids
//! in the log lines (so each loop's requests are new ones).
//!
//! `cargo run --release --example soak [-- HOURS]` (default 24).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use pdtop::feed::LogOrigin;
use pdtop::feed::Msg;
use pdtop::feed::Role;
use pdtop::feed::{TailCounts, TailState};
use pdtop::lab::Capture;
use pdtop::lab::replay::endpoints;
use pdtop::state::AppState;

/// The system allocator, counting the bytes live on the heap: RSS minus
/// that is what the allocator keeps of freed memory, so a leak (heap keeps
/// climbing) and fragmentation (only RSS does) tell apart.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to `System` unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Relaxed);
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn heap_kib() -> usize {
    LIVE.load(Relaxed) / 1024
}

/// Hands the pages freed by loading the recording back to the system, so
/// that RSS measures the state from the start rather than the loader's
/// high-water mark (glibc keeps freed heap pages otherwise).
fn give_back_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's malloc_trim only releases free pages.
        unsafe {
            malloc_trim(0);
        }
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The text of an instance's bodies with the values taken out, shared by
/// every scrape with the same series (in this recording, all of an
/// instance's), so that the harness holds one copy of the text and a row of
/// numbers per scrape.
struct Skeleton {
    instance: usize,
    /// (text before a value, is a counter-like series), then the text after
    /// the last value.
    parts: Vec<(String, bool)>,
    tail: String,
    /// Added per loop to each value: a cumulative series' final value in
    /// the recording (0 for gauges).
    step: Vec<f64>,
}

/// One scrape: its skeleton and its values.
struct Template {
    skeleton: usize,
    values: Box<[f64]>,
}

fn cumulative(name: &str) -> bool {
    let name = name.split('{').next().unwrap_or(name);
    ["_total", "_bucket", "_count", "_sum"].iter().any(|s| name.ends_with(s))
}

impl Template {
    fn new(instance: usize, body: &str, skeletons: &mut Vec<Skeleton>) -> Template {
        let mut parts = Vec::new();
        let mut values = Vec::new();
        let mut text = String::new();
        for line in body.lines() {
            match (line.starts_with('#'), line.rsplit_once(' ')) {
                (false, Some((head, v))) if v.parse::<f64>().is_ok() => {
                    text.push_str(head);
                    text.push(' ');
                    parts.push((std::mem::take(&mut text), cumulative(head)));
                    values.push(v.parse().unwrap_or(0.0));
                    text.push('\n');
                }
                _ => {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        let sk = Skeleton { instance, parts, tail: text, step: Vec::new() };
        let skeleton = match skeletons
            .iter()
            .position(|s| s.instance == instance && s.parts == sk.parts && s.tail == sk.tail)
        {
            Some(i) => i,
            None => {
                skeletons.push(sk);
                skeletons.len() - 1
            }
        };
        Template { skeleton, values: values.into_boxed_slice() }
    }

    /// The final value of each cumulative series, by its text.
    fn finals(&self, skeletons: &[Skeleton]) -> HashMap<String, f64> {
        let sk = &skeletons[self.skeleton];
        sk.parts
            .iter()
            .zip(self.values.iter())
            .filter(|(p, _)| p.1)
            .map(|(p, v)| (p.0.trim_start().to_string(), *v))
            .collect()
    }

    fn render(&self, loop_no: u32, skeletons: &[Skeleton], out: &mut String) {
        use std::fmt::Write;
        let sk = &skeletons[self.skeleton];
        out.clear();
        for (((text, _), v), step) in sk.parts.iter().zip(self.values.iter()).zip(&sk.step) {
            out.push_str(text);
            let _ = write!(out, "{}", v + step * f64::from(loop_no));
        }
        out.push_str(&sk.tail);
    }
}

/// The recording, reduced to what a loop replays.
struct Recording {
    t0: f64,
    period: f64,
    skeletons: Vec<Skeleton>,
    /// (time into the recording, instance, body, error)
    picked: Vec<(f64, usize, Option<Template>, String)>,
    logs: Vec<(LogOrigin, Vec<(f64, String)>)>,
    endpoints: Vec<pdtop::feed::Endpoint>,
}

fn load() -> Recording {
    let cap = Capture::embedded().expect("embedded capture");
    let period = (cap.t_end - cap.t0).ceil() + 1.0;
    // One scrape a second per instance, as the replay picks them.
    let mut skeletons: Vec<Skeleton> = Vec::new();
    let mut picked: Vec<(f64, usize, Option<Template>, String)> = Vec::new();
    let mut last = [f64::MIN; 2];
    for r in &cap.scrapes {
        let i = usize::from(r.role == Role::Decode);
        if r.t - last[i] >= 0.99 {
            last[i] = r.t;
            picked.push((
                r.t - cap.t0,
                i,
                r.body.as_deref().map(|b| Template::new(i, b, &mut skeletons)),
                r.error.clone().unwrap_or_default(),
            ));
        }
    }
    let mut finals = [HashMap::new(), HashMap::new()];
    for (_, i, t, _) in &picked {
        if let Some(t) = t {
            finals[*i] = t.finals(&skeletons);
        }
    }
    for sk in &mut skeletons {
        let finals = &finals[sk.instance];
        sk.step = sk
            .parts
            .iter()
            .map(|(text, cum)| if *cum { finals.get(text.trim_start()).copied().unwrap_or(0.0) } else { 0.0 })
            .collect();
    }
    let logs = cap
        .logs
        .iter()
        .map(|l| (l.source, l.lines.iter().map(|(t, s)| (t - cap.t0, s.clone())).collect()))
        .collect();
    Recording { t0: cap.t0, period, skeletons, picked, logs, endpoints: endpoints(&cap) }
}

fn main() {
    let hours: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(24.0);
    // What loading freed (decompressing the whole recording: 25 MiB) goes
    // back to the system, so the table shows the state's memory rather than
    // the loader's high-water mark.
    let Recording { t0, period, skeletons, picked, mut logs, endpoints } = load();
    give_back_freed_heap();
    logs.sort_by_key(|(s, _)| match s {
        LogOrigin::Prefill(_) => 0,
        LogOrigin::Proxy => 1,
        LogOrigin::Decode(_) => 2,
    });
    let log_names: Vec<(LogOrigin, String)> = logs.iter().map(|(s, _)| (*s, format!("{s}.log"))).collect();
    let mut st = AppState::new(endpoints, 60.0).with_logs(&log_names);

    let total = hours * 3600.0;
    let start = Instant::now();
    println!("sim_hour  rss_kib  heap_kib  scrapes  log_lines  history  events  traces  wall_s");
    let report = |h: u32, st: &AppState, scrapes: u64, lines: u64| {
        let traces = st.logs.as_ref().map(|l| l.correlator.traces().count()).unwrap_or(0);
        let history: usize = st.instances.iter().map(|i| i.history.len()).sum();
        println!(
            "{h:>8} {:>8} {:>9} {scrapes:>8} {lines:>10} {history:>8} {:>7} {traces:>7} {:>7.1}",
            rss_kib(),
            heap_kib(),
            st.events.len(),
            start.elapsed().as_secs_f64()
        );
    };
    report(0, &st, 0, 0);
    let (mut scrapes, mut lines_fed) = (0u64, 0u64);
    let mut next_hour = 1u32;
    let mut body = String::with_capacity(64 << 10);
    let mut loop_no = 0u32;
    'outer: loop {
        let base = t0 + f64::from(loop_no) * period;
        let tag = format!("lab{loop_no}-");
        let mut next_line = vec![0usize; logs.len()];
        let mut row = 0;
        let mut t = 0.0;
        while t < period {
            let now = base + t;
            if now - t0 >= total {
                break 'outer;
            }
            for (k, (src, lines)) in logs.iter().enumerate() {
                let from = next_line[k];
                let to = from + lines[from..].partition_point(|(lt, _)| *lt <= t);
                if to > from {
                    let batch: Vec<String> =
                        lines[from..to].iter().map(|(_, l)| l.replace("lab-", &tag)).collect();
                    lines_fed += batch.len() as u64;
                    st.apply(Msg::LogLines {
                        source: *src,
                        at: now,
                        lines: batch,
                        state: TailState::Following,
                        counts: TailCounts::default(),
                    });
                    next_line[k] = to;
                }
            }
            while row < picked.len() && picked[row].0 <= t {
                let (_, instance, tpl, error) = &picked[row];
                st.apply(match tpl {
                    Some(tpl) => {
                        tpl.render(loop_no, &skeletons, &mut body);
                        Msg::Scrape { instance: *instance, at: now, body: body.clone() }
                    }
                    None => Msg::ScrapeFailed { instance: *instance, at: now, error: error.clone() },
                });
                scrapes += 1;
                row += 1;
            }
            // The tailer's end of a polling round: the files were read up
            // to now. Without it the state gives no line on (a line of one
            // log may not overtake an unread one of another), and the soak
            // measured lines held until the end (231 MiB at hour 24).
            st.apply(Msg::LogsPolled { at: now });
            st.apply(Msg::Tick { at: now });
            if now - t0 >= f64::from(next_hour) * 3600.0 {
                report(next_hour, &st, scrapes, lines_fed);
                next_hour += 1;
            }
            t += 0.5;
        }
        loop_no += 1;
    }
    st.finish(t0 + total);
    report(
        next_hour.max(1) - 1 + u32::from(total >= f64::from(next_hour) * 3600.0 - 1.0),
        &st,
        scrapes,
        lines_fed,
    );
    println!(
        "done: {:.1} simulated hours, {loop_no} loops of {period:.0} s, {scrapes} scrapes ({:.0} per instance), {lines_fed} log lines, restarts {:?}, rss {} KiB, heap {} KiB, {:.1} s",
        total / 3600.0,
        scrapes as f64 / 2.0,
        st.instances.iter().map(|i| i.health.restarts).collect::<Vec<_>>(),
        rss_kib(),
        heap_kib(),
        start.elapsed().as_secs_f64()
    );
}
