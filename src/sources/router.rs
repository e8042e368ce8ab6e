//! The router's `/metrics` (`--router`): a GET per interval, as the
//! instance scraper does, with its backoff. Each attempt ends in one
//! [`Msg::Router`], a body or a readable cause.

use std::sync::Arc;

use tokio::sync::mpsc::Sender;

use super::http::{Auth, HttpClient};
use super::scrape::{ScrapeOptions, backoff};
use crate::clock::Clock;
use crate::feed::{Endpoint, Msg, Role, RouterEndpoint};

/// Starts the router's scraper, supervised (a panic is a source error).
pub fn spawn(
    router: &RouterEndpoint,
    opts: &ScrapeOptions,
    clock: Arc<dyn Clock>,
    tx: Sender<Msg>,
) -> Result<(), String> {
    // The same per-endpoint token variable an instance at that address would use.
    let as_ep =
        Endpoint { role: Role::Prefill, display: router.display.clone(), base_url: router.base_url.clone() };
    let token = super::scrape::token_for(&as_ep, opts.bearer_token.as_deref(), |k| std::env::var(k).ok());
    let client = HttpClient::new(&router.base_url, token.map_or(Auth::None, Auth::Bearer))?;
    let task = tokio::spawn(run(client, opts.clone(), clock.clone(), tx.clone()));
    super::supervise(format!("router scraper {}", router.display), task, clock, tx);
    Ok(())
}

async fn run(mut client: HttpClient, opts: ScrapeOptions, clock: Arc<dyn Clock>, tx: Sender<Msg>) {
    let mut failures = 0u32;
    loop {
        let started = tokio::time::Instant::now();
        let scrape = client.get("/metrics", opts.timeout).await;
        failures = if scrape.is_ok() { 0 } else { failures + 1 };
        if tx.send(Msg::Router { at: clock.now(), scrape }).await.is_err() {
            return;
        }
        let wait = backoff(opts.interval, failures).saturating_sub(started.elapsed());
        clock.sleep(wait).await;
    }
}
