//! The modes: wiring of collectors, state and screen. Collectors run on
//! their own thread and runtime (so a collector's panic is told apart from
//! the UI's), the screen on the main thread.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use color_eyre::eyre::{Result, WrapErr, eyre};
use tokio::sync::mpsc;

use crate::app::{self, App, Input};
use crate::cli::{CheckArgs, DemoArgs, ImportLabArgs, Inputs, RecordArgs, ReplayArgs, UiArgs};
use crate::clock::{Clock, ScaledClock, SystemClock};
use crate::config::{FileConfig, Settings};
use crate::feed::LogOrigin;
use crate::feed::Role;
use crate::feed::{Endpoint, Msg};
use crate::lab::{self, Capture, LabHandle, LabOptions};
use crate::record::{Entry, Header, Recording};
use crate::replay::Player;
use crate::sources;
use crate::sources::prometheus::PromOptions;
use crate::sources::scrape::ScrapeOptions;
use crate::state::AppState;
use crate::state::link::{KvModel, LinkState};
use crate::state::report::Report;
use crate::theme::{self, Theme};

/// The collectors' thread name; the panic hook leaves the screen alone for
/// panics there (the supervisor turns them into an error state).
pub const COLLECTOR_THREAD: &str = "pdtop-collectors";
/// Environment variable holding a bearer token for every endpoint.
pub const TOKEN_ENV: &str = "PDTOP_BEARER_TOKEN";

pub fn endpoints(inputs: &Inputs) -> Result<Vec<Endpoint>, String> {
    // Through a Prometheus server the instances are discovered there.
    if inputs.prometheus.is_some() {
        return PromOptions::from_inputs(inputs, Duration::from_secs(1), Duration::from_secs(1))
            .map(|_| Vec::new());
    }
    let mut out = Vec::new();
    for (role, list) in [(Role::Prefill, &inputs.prefill), (Role::Decode, &inputs.decode)] {
        for s in list {
            out.push(Endpoint::parse(role, s)?);
        }
    }
    if out.is_empty() {
        return Err(
            "give at least one instance: --prefill HOST:PORT and/or --decode HOST:PORT (or try `pdtop demo`)"
                .into(),
        );
    }
    Ok(out)
}

/// The system clock, or a faster one for a sped-up lab.
fn clock_for(inputs: &Inputs) -> Arc<dyn Clock> {
    match inputs.clock_speed {
        Some(speed) if speed != 1.0 => Arc::new(ScaledClock::new(SystemClock.now(), speed)),
        _ => Arc::new(SystemClock),
    }
}

/// The tailed logs, tied to the instance each belongs to.
pub fn log_sources(inputs: &Inputs) -> Result<Vec<(LogOrigin, String)>, String> {
    if inputs.prefill_log.len() > inputs.prefill.len().max(1)
        || inputs.decode_log.len() > inputs.decode.len().max(1)
    {
        return Err("give at most one --prefill-log per --prefill and one --decode-log per --decode, in the same order".into());
    }
    let mut out: Vec<(LogOrigin, String)> = Vec::new();
    out.extend(inputs.prefill_log.iter().enumerate().map(|(i, p)| (LogOrigin::Prefill(i), p.clone())));
    out.extend(inputs.decode_log.iter().enumerate().map(|(i, p)| (LogOrigin::Decode(i), p.clone())));
    out.extend(inputs.proxy_log.iter().map(|p| (LogOrigin::Proxy, p.clone())));
    if out.iter().filter(|(_, p)| p == "-").count() > 1 {
        return Err("only one log can be read from stdin (-)".into());
    }
    Ok(out)
}

/// What the link panel watches, and the KV size per token if given.
pub fn link_state(inputs: &Inputs) -> Result<LinkState, String> {
    let dtype = match &inputs.kv_cache_dtype {
        Some(d) => Some(d.parse::<crate::kv::KvCacheDtype>().map_err(|e| e.to_string())?),
        None => None,
    };
    let model = if let Some(path) = &inputs.model_config {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let source = format!("--model-config {}", path.display());
        Some(
            KvModel::from_config(&text, source, dtype.unwrap_or_default())
                .map_err(|e| format!("{}: {e}", path.display()))?,
        )
    } else {
        inputs.kv_bytes_per_token.map(|n| KvModel {
            bytes_per_token: n,
            source: "--kv-bytes-per-token".into(),
            layers: None,
        })
    };
    Ok(LinkState::new(inputs.iface.clone(), model, dtype))
}

fn net_dev_path(inputs: &Inputs) -> Option<sources::NetDevPath> {
    inputs.iface.as_ref()?;
    Some(match &inputs.net_dev_file {
        Some(f) => sources::NetDevPath::File(f.clone()),
        None => sources::NetDevPath::Proc { netns_pid: inputs.netns_pid },
    })
}

/// How often logs are polled: often enough that a verdict lands within one
/// refresh.
fn log_poll(settings: &Settings) -> Duration {
    (settings.interval / 4).clamp(Duration::from_millis(50), Duration::from_millis(250))
}

fn scrape_options(settings: &Settings) -> ScrapeOptions {
    ScrapeOptions {
        interval: settings.interval,
        timeout: settings.timeout,
        bearer_token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
    }
}

fn prometheus_options(inputs: &Inputs, settings: &Settings) -> Result<Option<PromOptions>, String> {
    PromOptions::from_inputs(inputs, settings.interval, settings.timeout)
}

pub fn settings(inputs: &Inputs, ui: &UiArgs) -> Result<Settings, String> {
    let file = FileConfig::load(inputs.config.as_deref())?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    Settings::resolve(inputs, ui, &file, no_color)
}

/// The live dashboard.
pub fn dashboard(inputs: Inputs, ui: UiArgs) -> Result<()> {
    let settings = settings(&inputs, &ui).map_err(|e| eyre!(e))?;
    let eps = endpoints(&inputs).map_err(|e| eyre!(e))?;
    let logs = log_sources(&inputs).map_err(|e| eyre!(e))?;
    let link = link_state(&inputs).map_err(|e| eyre!(e))?;
    let (kv_dir, net_dev) = (inputs.kv_dir.clone(), net_dev_path(&inputs));
    let theme = Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).map_err(|e| eyre!(e))?;
    let (tx, rx) = mpsc::channel(1024);
    let clock = clock_for(&inputs);
    let opts = scrape_options(&settings);
    let prom = prometheus_options(&inputs, &settings).map_err(|e| eyre!(e))?;
    let (eps2, logs2, poll) = (eps.clone(), logs.clone(), log_poll(&settings));
    let clock2 = clock.clone();
    let interval = settings.interval;
    spawn_collector_thread(move || async move {
        sources::spawn_log_tailers(&logs2, poll, clock2.clone(), tx.clone());
        sources::spawn_link_sources(kv_dir, net_dev, interval, clock2.clone(), tx.clone());
        let started = match prom {
            Some(p) => sources::prometheus::spawn(p, eps2.len(), clock2.clone(), tx.clone()),
            None => sources::spawn_scrapers(&eps2, &opts, clock2.clone(), tx.clone()),
        };
        if let Err(e) = started {
            let _ = tx.send(Msg::SourceFailed { source: "http".into(), at: clock2.now(), error: e }).await;
        }
    })?;
    let state = AppState::new(eps, settings.window_secs)
        .with_logs(&logs)
        .with_link(link)
        .show_prompts(inputs.show_prompts);
    run_screen(App::new(state, theme), rx, clock, None)
}

/// The demo: the embedded lab on loopback, and the dashboard on it.
pub fn demo(args: DemoArgs) -> Result<()> {
    let capture = match &args.capture {
        Some(dir) => Capture::from_dir(dir),
        None => Capture::embedded(),
    }
    .map_err(|e| eyre!("demo data: {e}"))?;
    let name = capture.name.clone();
    let model = capture.model_config.as_deref().and_then(|text| {
        KvModel::from_config(text, "the recording's model-config.json".into(), Default::default()).ok()
    });
    // pdtop's clock follows the recording: its time of day, at its speed.
    let clock: Arc<dyn Clock> = Arc::new(ScaledClock::new(capture.t0, args.speed));
    let dir = std::env::temp_dir().join(format!("pdtop-demo-{}", std::process::id()));
    let opts = LabOptions { speed: args.speed, looping: !args.no_loop, dir: dir.clone() };
    let (lab_tx, lab_rx) = std::sync::mpsc::channel();
    let (tx, rx) = mpsc::channel(1024);
    let settings = settings(&Inputs::default(), &args.ui).map_err(|e| eyre!(e))?;
    let interval = Duration::from_secs_f64((1.0 / args.speed.max(0.01)).clamp(0.05, 1.0));
    let scrape_opts = ScrapeOptions { interval, timeout: settings.timeout, bearer_token: None };
    let clock2 = clock.clone();
    let serve_only = args.serve_only;
    spawn_collector_thread(move || async move {
        let handle = match lab::start(capture, opts).await {
            Ok(h) => h,
            Err(e) => {
                let _ = lab_tx.send(Err(e.to_string()));
                return;
            }
        };
        let eps = lab_endpoints(&handle);
        let logs = lab_logs(&handle);
        let (handle_kv_dir, handle_net_dev) = (handle.kv_dir.clone(), handle.net_dev_file.clone());
        let _ = lab_tx.send(Ok(handle));
        if serve_only {
            return;
        }
        sources::spawn_log_tailers(&logs, Duration::from_millis(50), clock2.clone(), tx.clone());
        let net_dev = handle_net_dev.map(sources::NetDevPath::File);
        sources::spawn_link_sources(handle_kv_dir, net_dev, interval, clock2.clone(), tx.clone());
        if let Err(e) = sources::spawn_scrapers(&eps, &scrape_opts, clock2.clone(), tx.clone()) {
            let _ = tx.send(Msg::SourceFailed { source: "http".into(), at: clock2.now(), error: e }).await;
        }
    })?;
    let handle: LabHandle = lab_rx
        .recv()
        .map_err(|_| eyre!("the demo lab did not start"))?
        .map_err(|e| eyre!("the demo lab did not start: {e}"))?;
    if args.serve_only {
        println!(
            "pdtop demo lab ({name}, x{}):\n  --prefill {} --decode {}\n  logs: {} {} {}\n  link: --kv-dir {} --iface lo --net-dev-file {}",
            args.speed,
            handle.prefill,
            handle.decode,
            handle.prefill_log.display(),
            handle.decode_log.display(),
            handle.proxy_log.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            handle.kv_dir.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            handle.net_dev_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        );
        std::io::stdout().flush().ok();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let theme = Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).map_err(|e| eyre!(e))?;
    let iface = handle.net_dev_file.as_ref().map(|_| "lo".to_string());
    let state = AppState::new(lab_endpoints(&handle), settings.window_secs)
        .with_logs(&lab_logs(&handle))
        .with_link(LinkState::new(iface, model, None));
    let result =
        run_screen(App::new(state, theme), rx, clock, Some((name, args.speed, handle.clock.clone())));
    let _ = std::fs::remove_dir_all(&dir);
    result
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

/// `pdtop check`: no screen; returns the report.
pub fn check(args: &CheckArgs) -> Result<Report, String> {
    if let Some(file) = &args.replay {
        let rec = Recording::open(file).map_err(|e| e.to_string())?;
        let mut state = state_for(&rec.header)?;
        let end = Player::new(rec, state.clone(), 1.0, String::new()).run_to_end(&mut state);
        state.finish(end);
        return Ok(Report::from_state(&state));
    }
    let settings = settings(&args.inputs, &UiArgs::default())?;
    let eps = endpoints(&args.inputs)?;
    let logs = log_sources(&args.inputs)?;
    let link = link_state(&args.inputs)?;
    let duration = args.duration.unwrap_or(0.0);
    if !(duration.is_finite() && duration > 0.0) {
        return Err("--duration must be a positive number of seconds".into());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let clock = clock_for(&args.inputs);
        let (tx, mut rx) = mpsc::channel(1024);
        sources::spawn_log_tailers(&logs, log_poll(&settings), clock.clone(), tx.clone());
        let (kv_dir, net_dev) = (args.inputs.kv_dir.clone(), net_dev_path(&args.inputs));
        sources::spawn_link_sources(kv_dir, net_dev, settings.interval, clock.clone(), tx.clone());
        match prometheus_options(&args.inputs, &settings)? {
            Some(p) => sources::prometheus::spawn(p, eps.len(), clock.clone(), tx)?,
            None => sources::spawn_scrapers(&eps, &scrape_options(&settings), clock.clone(), tx)?,
        }
        let mut state = AppState::new(eps, settings.window_secs).with_logs(&logs).with_link(link);
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(duration);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(m) => state.apply(m),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        state.finish(clock.now());
        if args.inputs.prometheus.is_some() && state.instances.is_empty() {
            let why = state.source_errors.last().map(|(s, e)| format!(": {s}: {e}")).unwrap_or_default();
            return Err(format!("no instance matched on the Prometheus server{why}"));
        }
        Ok(Report::from_state(&state))
    })
}

/// A human summary of a report, for `check` without `--json`.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    for i in &r.instances {
        s.push_str(&format!(
            "{:<8} {:<22} {} ok={} failed={} restarts={}{}\n",
            i.role.name(),
            i.endpoint,
            if i.up { "up  " } else { "DOWN" },
            i.scrapes_ok,
            i.scrapes_failed,
            i.restarts,
            i.last_error.as_ref().map(|e| format!(" last error: {e}")).unwrap_or_default()
        ));
    }
    let q = &r.requests;
    s.push_str(&format!(
        "requests: seen {} loaded {} silent_miss {} no_prefill {} error {}\n",
        q.seen, q.loaded, q.silent_miss, q.no_prefill, q.error
    ));
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s.push_str(&format!("verdict: {:?}\n", r.verdict));
    s
}

fn spawn_collector_thread<F, Fut>(start: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().build().wrap_err("collector runtime")?;
    std::thread::Builder::new()
        .name(COLLECTOR_THREAD.into())
        .spawn(move || {
            rt.block_on(async move {
                start().await;
                std::future::pending::<()>().await;
            })
        })
        .wrap_err("collector thread")?;
    Ok(())
}

/// Owns the terminal for the length of the dashboard and restores it on
/// every way out: return, error, panic (ratatui's hook) and signals.
fn run_screen(
    mut app: App,
    rx: mpsc::Receiver<Msg>,
    clock: Arc<dyn Clock>,
    demo: Option<(String, f64, lab::server::LabClock)>,
) -> Result<()> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(eyre!(
            "the dashboard needs a terminal; for no screen use `pdtop check --duration SECS --json`"
        ));
    }
    let mut terminal = ratatui::try_init().wrap_err("cannot set up the terminal")?;
    // Restores on every way out of this function, `?` included (an early
    // error used to leave the terminal raw and on the alternate screen).
    let restore = RestoreOnDrop;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(COLLECTOR_THREAD) {
            return;
        }
        hook(info);
    }));
    #[cfg(debug_assertions)]
    test_ui_fault()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().wrap_err("ui runtime")?;
    let result = rt.block_on(async {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        app::spawn_input_thread(in_tx.clone());
        spawn_signal_watch(in_tx);
        app::run(&mut terminal, &mut app, rx, in_rx, clock, demo).await
    });
    drop(restore);
    result.wrap_err("terminal")
}

struct RestoreOnDrop;

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        // While unwinding, the panic hook has already restored and printed
        // the message; leaving the alternate screen a second time would move
        // the cursor back (xterm's 1049 restores the saved position) and the
        // shell would overwrite the message.
        if !std::thread::panicking() {
            ratatui::restore();
        }
    }
}

/// Test hook, debug builds only: `PDTOP_TEST_UI_FAULT=panic|error` makes
/// the screen fail right after it took the terminal, so the tests can watch
/// the terminal come back from a panic and from an error exit of the real
/// binary. Release builds do not contain it.
#[cfg(debug_assertions)]
fn test_ui_fault() -> Result<()> {
    match std::env::var("PDTOP_TEST_UI_FAULT").as_deref() {
        Ok("panic") => panic!("test hook PDTOP_TEST_UI_FAULT"),
        Ok("error") => Err(eyre!("test hook PDTOP_TEST_UI_FAULT")),
        _ => Ok(()),
    }
}

fn spawn_signal_watch(tx: mpsc::UnboundedSender<Input>) {
    use tokio::signal::unix::{SignalKind, signal};
    for kind in [SignalKind::terminate(), SignalKind::hangup(), SignalKind::interrupt()] {
        let tx = tx.clone();
        if let Ok(mut s) = signal(kind) {
            tokio::spawn(async move {
                if s.recv().await.is_some() {
                    let _ = tx.send(Input::Signal);
                }
            });
        }
    }
}

/// `pdtop screenshots`: frames drawn from the embedded recording, replayed
/// headless to chosen moments, saved as SVG.
pub fn screenshots(out: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    use crate::ui::svg::{DARK, LIGHT, buffer_to_svg};
    use ratatui::backend::TestBackend;
    let capture = Capture::embedded().map_err(|e| eyre!("demo data: {e}"))?;
    std::fs::create_dir_all(out).wrap_err("screenshot folder")?;
    let dark = Theme::builtin("dark").map_err(|e| eyre!(e))?;
    let light = Theme::builtin("light").map_err(|e| eyre!(e))?;
    // (file, seconds into the recording, theme, palette, view, trace open, id search)
    type Shot<'a> = (&'a str, f64, &'a Theme, &'a crate::ui::svg::Palette, crate::ui::View, bool, &'a str);
    let shots: [Shot; 7] = {
        use crate::ui::View::*;
        [
            ("overview.svg", 45.0, &dark, &DARK, Overview, false, ""),
            ("requests.svg", 62.0, &dark, &DARK, Requests, false, ""),
            ("trace.svg", 62.0, &dark, &DARK, Requests, true, "edge_block-1"),
            ("link.svg", 62.0, &dark, &DARK, Link, false, ""),
            ("decode-restart.svg", 100.0, &dark, &DARK, Overview, false, ""),
            ("events.svg", 146.0, &dark, &DARK, Events, false, ""),
            ("light.svg", 45.0, &light, &LIGHT, Overview, false, ""),
        ]
    };
    let mut written = Vec::new();
    for (file, secs, theme, palette, view, open, search) in shots {
        let state = lab::replay::state_at(&capture, secs, true);
        let mut app = App::new(state, theme.clone());
        app.view.search = search.to_string();
        app.view.view = view;
        app.view.detail = open;
        let mut term = ratatui::Terminal::new(TestBackend::new(140, 44)).wrap_err("backend")?;
        term.draw(|f| app.draw(f)).wrap_err("draw")?;
        let path = out.join(file);
        std::fs::write(&path, buffer_to_svg(term.backend().buffer(), palette)).wrap_err("write")?;
        written.push(path);
    }
    Ok(written)
}

/// The state a recording's header describes: its endpoints, logs,
/// interface and KV size.
pub fn state_for(h: &Header) -> Result<AppState, String> {
    let mut eps = Vec::new();
    for (role, list) in [(Role::Prefill, &h.prefill), (Role::Decode, &h.decode)] {
        for s in list {
            eps.push(Endpoint::parse(role, s)?);
        }
    }
    let logs: Vec<(LogOrigin, String)> = h
        .logs
        .iter()
        .filter_map(|(s, p)| Some((crate::record::format::parse_source(s)?, p.clone())))
        .collect();
    let model = h.kv_bytes_per_token.map(|n| KvModel {
        bytes_per_token: n,
        source: h.kv_source.clone().unwrap_or_else(|| "the recording".into()),
        layers: None,
    });
    Ok(AppState::new(eps, h.window_secs).with_logs(&logs).with_link(LinkState::new(
        h.iface.clone(),
        model,
        None,
    )))
}

fn header_for(
    inputs: &Inputs,
    settings: &Settings,
    link: &LinkState,
    logs: &[(LogOrigin, String)],
) -> Header {
    Header {
        format: crate::record::FORMAT.into(),
        version: crate::record::VERSION,
        started: SystemClock.now(),
        prefill: inputs.prefill.clone(),
        decode: inputs.decode.clone(),
        logs: logs.iter().map(|(s, p)| (s.to_string(), p.clone())).collect(),
        iface: inputs.iface.clone(),
        kv_bytes_per_token: link.model.as_ref().map(|m| m.bytes_per_token),
        kv_source: link.model.as_ref().map(|m| m.source.clone()),
        window_secs: settings.window_secs,
    }
}

/// `pdtop record`: the collectors of the dashboard, written to a file.
pub fn record(args: &RecordArgs) -> Result<String, String> {
    let inputs = &args.inputs;
    let settings = settings(inputs, &UiArgs::default())?;
    let eps = endpoints(inputs)?;
    let logs = log_sources(inputs)?;
    let link = link_state(inputs)?;
    let header = header_for(inputs, &settings, &link, &logs);
    let file = std::fs::File::create(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let mut writer =
        crate::record::Writer::new(std::io::BufWriter::new(file), &header).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    rt.block_on(async {
        let clock = clock_for(inputs);
        let (tx, mut rx) = mpsc::channel(1024);
        sources::spawn_log_tailers(&logs, log_poll(&settings), clock.clone(), tx.clone());
        sources::spawn_link_sources(
            inputs.kv_dir.clone(),
            net_dev_path(inputs),
            settings.interval,
            clock.clone(),
            tx.clone(),
        );
        match prometheus_options(inputs, &settings)? {
            Some(p) => sources::prometheus::spawn(p, eps.len(), clock.clone(), tx)?,
            None => sources::spawn_scrapers(&eps, &scrape_options(&settings), clock.clone(), tx)?,
        }
        let stop = async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
            let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
            match args.duration {
                Some(d) => tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(d.max(0.0))) => {}
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                },
                None => tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                },
            }
            Ok::<(), String>(())
        };
        tokio::pin!(stop);
        let mut flush = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                r = &mut stop => { r?; break; }
                msg = rx.recv() => match msg {
                    Some(m) => if let Some(mut e) = Entry::from_msg(&m) {
                        if !inputs.show_prompts {
                            hide_prompts(&mut e);
                        }
                        writer.write(&e).map_err(|e| e.to_string())?;
                    },
                    None => break,
                },
                _ = flush.tick() => writer.flush().map_err(|e| e.to_string())?,
            }
        }
        Ok::<(), String>(())
    })?;
    let n = writer.entries;
    drop(writer);
    let size = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    Ok(format!(
        "recorded {n} entries in {:.0} s to {} ({} bytes)",
        started.elapsed().as_secs_f64(),
        args.out.display(),
        size
    ))
}

/// A recording keeps log lines verbatim, except the prompt text some vLLM
/// versions print: that stays out unless `--show-prompts` was given.
fn hide_prompts(e: &mut Entry) {
    if let Entry::Log { lines, .. } = e {
        for l in lines.iter_mut() {
            if let Some(r) = crate::logs::vllm::redact_prompt(l) {
                *l = r;
            }
        }
    }
}

/// `pdtop import-lab`: a capture folder as a recording.
pub fn import_lab(args: &ImportLabArgs) -> Result<String, String> {
    let capture = Capture::from_dir(&args.dir).map_err(|e| e.to_string())?;
    let state = lab::replay::initial_state(&capture, true);
    let header = Header {
        format: crate::record::FORMAT.into(),
        version: crate::record::VERSION,
        started: capture.t0,
        prefill: state.instances_of(Role::Prefill).map(|i| i.endpoint.display.clone()).collect(),
        decode: state.instances_of(Role::Decode).map(|i| i.endpoint.display.clone()).collect(),
        logs: capture
            .logs
            .iter()
            .map(|l| (lab::replay::source_of(l.file_name).to_string(), l.file_name.to_string()))
            .collect(),
        iface: state.link.iface.clone(),
        kv_bytes_per_token: state.link.model.as_ref().map(|m| m.bytes_per_token),
        kv_source: state.link.model.as_ref().map(|m| m.source.clone()),
        window_secs: state.window_secs,
    };
    let file = std::fs::File::create(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let mut w =
        crate::record::Writer::new(std::io::BufWriter::new(file), &header).map_err(|e| e.to_string())?;
    let span = capture.t_end - capture.t0 + 1.0;
    for m in lab::replay::messages(&capture, span, true) {
        if let Some(e) = Entry::from_msg(&m) {
            w.write(&e).map_err(|e| e.to_string())?;
        }
    }
    let n = w.entries;
    drop(w);
    Ok(format!("wrote {n} entries from {} to {}", args.dir.display(), args.out.display()))
}

/// `pdtop replay`: the dashboard on a recording.
pub fn replay(args: ReplayArgs) -> Result<()> {
    let rec = Recording::open(&args.file).map_err(|e| eyre!(e))?;
    let state = state_for(&rec.header).map_err(|e| eyre!(e))?;
    let settings = settings(&Inputs::default(), &args.ui).map_err(|e| eyre!(e))?;
    let theme = Theme::load(&settings.theme, theme::user_theme_dir().as_deref()).map_err(|e| eyre!(e))?;
    let name = args.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut app = App::new(state.clone(), theme);
    app.player = Some(Player::new(rec, state, args.speed, name));
    // No collectors: the channel stays open and empty.
    let (_tx, rx) = mpsc::channel(1);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let r = run_screen(app, rx, clock, None);
    drop(_tx);
    r
}
