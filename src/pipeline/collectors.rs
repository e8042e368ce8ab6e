//! Live collectors: one spawn for all of them, on the runtime of the
//! caller, and a thread of their own for the screen modes (so a
//! collector's panic is told apart from the UI's).

use std::sync::Arc;

use tokio::sync::mpsc::Sender;

use super::session::Session;
use crate::clock::Clock;
use crate::error::{Error, Result, RuntimeContext};
use crate::feed::Msg;
use crate::sources;

/// The collectors' thread name; the panic hook leaves the screen alone for
/// panics there (the supervisor turns them into an error state).
pub const COLLECTOR_THREAD: &str = "pdtop-collectors";

/// Starts every collector the session asks for, on the current runtime:
/// log tailers, the connector directory and interface, and the scrapers
/// (or a Prometheus server's), and the OTLP span receiver. A session without live inputs (a replay)
/// starts nothing. `wake` is told of the logs' news (the screen's loop).
pub fn spawn_collectors(
    session: &Session,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
    wake: Option<sources::Wake>,
) -> Result<()> {
    let Some(c) = &session.collect else {
        return Ok(());
    };
    // The doctor takes the lines the tailer reads: one read per line.
    let doctor = doctor_sources(session, c).map(|d| (d, crate::doctor::watch::StartupLogs::default()));
    let also = doctor.as_ref().map(|(_, logs)| {
        let logs = logs.clone();
        Box::new(move |path: &str, lines: &[String], reset: bool, state: &crate::feed::TailState| {
            logs.feed(path, lines, reset, state)
        }) as sources::LinesRead
    });
    sources::spawn_log_tailers(&session.logs, c.log_poll, also, clock.clone(), (tx.clone(), wake));
    sources::spawn_link_sources(
        c.kv_dir.clone(),
        c.net_dev.clone(),
        c.sys.clone(),
        c.link_interval,
        clock.clone(),
        tx.clone(),
    );
    if c.otlp.is_on() {
        sources::otlp::spawn(&c.otlp, clock.clone(), tx.clone()).map_err(Error::Runtime)?;
    }
    if let Some((d, logs)) = doctor {
        tokio::spawn(crate::doctor::watch::run(d, logs, clock.clone(), tx.clone()));
    }
    if let Some(r) = &session.router {
        sources::router::spawn(r, &c.scrape, clock.clone(), tx.clone()).map_err(Error::Runtime)?;
    }
    match &c.prometheus {
        Some(p) => sources::prometheus::spawn(p.clone(), session.endpoints.len(), clock, tx),
        None => sources::spawn_scrapers(&session.endpoints, &c.scrape, clock, tx),
    }
    .map_err(Error::Runtime)
}

/// Runs `start` on a thread and runtime of its own, then keeps that
/// runtime alive (its spawned tasks go on) for the life of the process.
pub fn run_on_thread<F, Fut>(name: &str, start: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("collector runtime")?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            rt.block_on(async move {
                start().await;
                std::future::pending::<()>().await;
            })
        })
        .runtime("collector thread")?;
    Ok(())
}

/// What the doctor reads on the dashboard: the pair and its logs, when
/// both roles are given (a Prometheus-discovered fleet is not a pair).
fn doctor_sources(session: &Session, c: &super::session::Collect) -> Option<crate::doctor::gather::Sources> {
    use crate::feed::{LogOrigin, Role};
    let of = |role| session.endpoints.iter().filter(|e| e.role == role).map(|e| e.display.clone()).collect();
    let (prefill, decode): (Vec<String>, Vec<String>) = (of(Role::Prefill), of(Role::Decode));
    if prefill.is_empty() || decode.is_empty() {
        return None;
    }
    let logs = |want: fn(&LogOrigin) -> Option<usize>| {
        let mut l: Vec<(usize, String)> = session
            .logs
            .iter()
            .filter_map(|(o, p)| Some((want(o)?, p.clone())))
            .filter(|(_, p)| p != "-")
            .collect();
        l.sort();
        l.into_iter().map(|(_, p)| p).collect()
    };
    Some(crate::doctor::gather::Sources {
        prefill,
        decode,
        proxy: None,
        prefill_log: logs(|o| if let LogOrigin::Prefill(n) = o { Some(*n) } else { None }),
        decode_log: logs(|o| if let LogOrigin::Decode(n) = o { Some(*n) } else { None }),
        proc_root: std::path::PathBuf::from("/proc"),
        sys_class_net: c.sys.as_ref().and_then(|s| s.net.clone()).unwrap_or_else(|| "/sys/class/net".into()),
        netns_pid: match &c.net_dev {
            Some(crate::sources::NetDevPath::Proc { netns_pid }) => *netns_pid,
            _ => None,
        },
        timeout: c.scrape.timeout,
        // The demo's lab is served from this process.
        own_pid: Some(std::process::id()),
    })
}
