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
/// starts nothing.
pub fn spawn_collectors(session: &Session, clock: Arc<dyn Clock>, tx: Sender<Msg>) -> Result<()> {
    let Some(c) = &session.collect else {
        return Ok(());
    };
    sources::spawn_log_tailers(&session.logs, c.log_poll, clock.clone(), tx.clone());
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
