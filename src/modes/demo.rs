//! `pdtop demo`: the embedded lab on loopback, and the dashboard on it.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use super::screen::run_screen;
use crate::app::App;
use crate::cli::{DemoArgs, Inputs};
use crate::clock::{Clock, ScaledClock};
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
    let settings = super::settings(&Inputs::default(), &args.ui)?;
    let name = capture.name.clone();
    let dir = std::env::temp_dir().join(format!("pdtop-demo-{}", std::process::id()));
    let opts = LabOptions { speed: args.speed, looping: !args.no_loop, dir: dir.clone() };
    let model = capture.model_config.clone();
    let t0 = capture.t0;
    let handle = start_lab(capture, opts)?;
    if args.serve_only {
        print_lab(&name, args.speed, &handle);
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let session =
        lab_session(&handle, t0, model.as_deref(), args.speed, settings.window_secs, settings.timeout);
    // pdtop's clock follows the recording: its time of day, at its speed.
    let clock: Arc<dyn Clock> = Arc::new(ScaledClock::new(t0, args.speed));
    let mut feed = Feed::live(&session, clock)?;
    if let Feed::Live(live) = &mut feed {
        live.lab = Some(LabInfo { capture: name, speed: args.speed, clock: handle.clock.clone() });
    }
    let result = run_screen(App::new(session.state(), super::theme(&settings)?), feed);
    let _ = std::fs::remove_dir_all(&dir);
    result
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

fn print_lab(name: &str, speed: f64, handle: &LabHandle) {
    let show =
        |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    println!(
        "pdtop demo lab ({name}, x{speed}):\n  --prefill {} --decode {}\n  logs: {} {} {}\n  link: --kv-dir {} --iface lo --net-dev-file {}",
        handle.prefill,
        handle.decode,
        handle.prefill_log.display(),
        handle.decode_log.display(),
        show(&handle.proxy_log),
        show(&handle.kv_dir),
        show(&handle.net_dev_file),
    );
    std::io::stdout().flush().ok();
}

fn lab_logs(h: &LabHandle) -> Vec<(LogOrigin, String)> {
    let mut logs = vec![
        (LogOrigin::Prefill(0), h.prefill_log.display().to_string()),
        (LogOrigin::Decode(0), h.decode_log.display().to_string()),
    ];
    logs.extend(h.proxy_log.iter().map(|p| (LogOrigin::Proxy, p.display().to_string())));
    logs
}

fn lab_endpoints(h: &LabHandle) -> Vec<Endpoint> {
    [(Role::Prefill, h.prefill), (Role::Decode, h.decode)]
        .into_iter()
        .filter_map(|(role, addr)| Endpoint::parse(role, &addr.to_string()).ok())
        .collect()
}
