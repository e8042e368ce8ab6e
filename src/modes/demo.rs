//! `pdtop demo`: the embedded lab on loopback, and the dashboard on it.

use std::io::Write;
use std::time::Duration;

use super::screen::run_screen;
use crate::app::App;
use crate::cli::{DemoArgs, Inputs};
use crate::error::{Error, Result};
use crate::feed::{Endpoint, LogOrigin, Role};
use crate::lab::{self, Capture, LabHandle, LabOptions};
use crate::pipeline::{Collect, Feed, LabInfo, Session, run_on_thread};
use crate::sources::NetDevPath;
use crate::sources::scrape::ScrapeOptions;
use crate::state::link::KvModel;

pub fn demo(args: DemoArgs) -> Result<()> {
    let capture = match &args.capture {
        Some(dir) => Capture::from_dir(dir),
        None => Capture::embedded(),
    }
    .map_err(|e| Error::Usage(format!("demo data: {e}")))?;
    let settings = super::setup::settings(&Inputs::default(), &args.ui)?;
    let name = capture.name.clone();
    let dir = std::env::temp_dir().join(format!("pdtop-demo-{}", std::process::id()));
    // The recorded spans go to the dashboard's own OTLP receiver, as vLLM's
    // exporter sent them.
    let otlp_to = (!capture.otlp_frames.is_empty()).then(free_loopback).flatten();
    let opts = LabOptions { speed: args.speed, looping: !args.no_loop, dir: dir.clone(), otlp_to };
    let model = capture.model_config.clone();
    let t0 = capture.t0;
    // Listening before the lab writes anything: a stop sent as soon as the
    // endpoints are printed still removes the folder.
    let stop = args.serve_only.then(StopSignals::listen).transpose()?;
    let handle = start_lab(capture, opts)?;
    if let Some(stop) = stop {
        print_lab(&name, args.speed, &handle, otlp_to);
        let _ = std::io::stdout().flush();
        stop.wait();
        close_lab(&handle, &dir);
        return Ok(());
    }
    let mut session =
        lab_session(&handle, t0, model.as_deref(), args.speed, settings.window_secs, settings.timeout);
    if let Some(c) = session.collect.as_mut() {
        c.otlp.http = otlp_to;
    }
    // pdtop's clock is the lab's: the time its stamps run on, at its speed.
    let clock = session.clock();
    let mut feed = Feed::live(&session, clock)?;
    if let Feed::Live(live) = &mut feed {
        live.lab = Some(LabInfo { capture: name, speed: args.speed, clock: handle.clock.clone() });
    }
    // Closed on every way out, a panic's unwinding included.
    let _closing = ClosingLab { handle: &handle, dir: &dir };
    run_screen(App::new(session.state(), super::setup::theme(&settings)?), feed)
}

/// Closes the lab when dropped.
struct ClosingLab<'a> {
    handle: &'a LabHandle,
    dir: &'a std::path::Path,
}

impl Drop for ClosingLab<'_> {
    fn drop(&mut self) {
        close_lab(self.handle, self.dir);
    }
}

/// The lab's writers stop first (one that ran on would make the folder
/// again), then its folder goes: a demo leaves nothing in the temp folder.
fn close_lab(handle: &LabHandle, dir: &std::path::Path) {
    handle.clock.stop();
    std::thread::sleep(Duration::from_millis(100));
    let _ = std::fs::remove_dir_all(dir);
}

/// Ctrl-C, `kill` and a closed terminal: how a lab serving without a
/// screen is stopped. Listened for from creation on.
struct StopSignals {
    rt: tokio::runtime::Runtime,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        let made = || -> std::io::Result<StopSignals> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
            let _in = rt.enter();
            let (term, hup, int) = (
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
                signal(SignalKind::interrupt())?,
            );
            Ok(StopSignals { rt, term, hup, int })
        };
        made().map_err(|e| Error::Runtime(format!("listening for stop signals: {e}")))
    }

    /// Blocks until one of them comes.
    fn wait(mut self) {
        self.rt.block_on(async {
            tokio::select! {
                _ = self.term.recv() => {}
                _ = self.hup.recv() => {}
                _ = self.int.recv() => {}
            }
        });
    }
}

/// What the demo watches: the lab's two instances, its logs, its link
/// files, scraped as often in recording time as a live pdtop would
/// (within reason). `t0` is the recording's start, `model` its config.
pub fn lab_session(
    handle: &LabHandle,
    t0: f64,
    model: Option<&str>,
    speed: f64,
    window_secs: f64,
    timeout: Duration,
) -> Session {
    let model = model.and_then(|text| {
        KvModel::from_config(text, "the recording's model-config.json".into(), Default::default()).ok()
    });
    let interval = Duration::from_secs_f64((1.0 / speed.max(0.01)).clamp(0.05, 1.0));
    Session {
        started: t0,
        endpoints: lab_endpoints(handle),
        router: None,
        logs: lab_logs(handle),
        iface: handle.net_dev_file.as_ref().map(|_| "lo".to_string()),
        kv_model: model,
        kv_cache_dtype: None,
        window_secs,
        clock_speed: speed,
        clock_origin: Some(handle.clock.stamp_origin()),
        show_prompts: false,
        collect: Some(Collect {
            scrape: ScrapeOptions { interval, timeout, bearer_token: None },
            prometheus: None,
            kv_dir: handle.kv_dir.clone(),
            net_dev: handle.net_dev_file.clone().map(NetDevPath::File),
            sys: None,
            log_poll: Duration::from_millis(50),
            link_interval: interval,
            otlp: Default::default(),
            since: crate::pipeline::DEFAULT_SINCE_S,
        }),
    }
}

/// The lab's servers and files, on a thread of their own.
pub fn start_lab(capture: Capture, opts: LabOptions) -> Result<LabHandle> {
    let (tx, rx) = std::sync::mpsc::channel();
    run_on_thread("pdtop-lab", move || async move {
        let _ = tx.send(lab::start(capture, opts).await.map_err(|e| e.to_string()));
    })?;
    rx.recv()
        .map_err(|_| Error::runtime("the demo lab did not start"))?
        .map_err(|e| Error::Runtime(format!("the demo lab did not start: {e}")))
}

fn print_lab(name: &str, speed: f64, handle: &LabHandle, otlp_to: Option<std::net::SocketAddr>) {
    let show =
        |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let of = |role: Role, what: &dyn Fn(&crate::lab::LabInstance) -> String| {
        handle.instances.iter().filter(|i| i.role == role).map(what).collect::<Vec<_>>().join(" ")
    };
    let addr = |i: &crate::lab::LabInstance| i.addr.to_string();
    let log = |i: &crate::lab::LabInstance| i.log.display().to_string();
    // The lab's clock runs at its speed, and so do the stamps it prints: a
    // pdtop watching it keeps the same time (a hidden flag, for this).
    let clock = if speed == 1.0 {
        String::new()
    } else {
        format!(" --clock-speed {speed} --clock-origin {:.3}", handle.clock.stamp_origin())
    };
    println!(
        "pdtop demo lab ({name}, x{speed}):\n  --prefill {} --decode {}{clock}\n  --prefill-log {} --decode-log {} --proxy-log {}\n  link: --kv-dir {} --iface lo --net-dev-file {}",
        of(Role::Prefill, &addr),
        of(Role::Decode, &addr),
        of(Role::Prefill, &log),
        of(Role::Decode, &log),
        show(&handle.proxy_log),
        show(&handle.kv_dir),
        show(&handle.net_dev_file),
    );
    if let Some(a) = otlp_to {
        println!("  spans: sent to http://{a}/v1/traces (--otlp-listen {a})");
    }
    std::io::stdout().flush().ok();
}

/// A free port on loopback (the OTLP receiver binds it a moment later).
fn free_loopback() -> Option<std::net::SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()
}

fn lab_logs(h: &LabHandle) -> Vec<(LogOrigin, String)> {
    let mut logs = Vec::new();
    for role in [Role::Prefill, Role::Decode] {
        for (k, i) in h.instances.iter().filter(|i| i.role == role).enumerate() {
            let o = if role == Role::Prefill { LogOrigin::Prefill(k) } else { LogOrigin::Decode(k) };
            logs.push((o, i.log.display().to_string()));
        }
    }
    logs.extend(h.proxy_log.iter().map(|p| (LogOrigin::Proxy, p.display().to_string())));
    logs
}

fn lab_endpoints(h: &LabHandle) -> Vec<Endpoint> {
    h.instances.iter().filter_map(|i| Endpoint::parse(i.role, &i.addr.to_string()).ok()).collect()
}
