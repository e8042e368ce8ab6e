//! A Prometheus server as the source: the fleet read through the server
//! that already scrapes it (or anything that speaks its query API: Thanos,
//! Mimir, VictoriaMetrics), one request per refresh for the whole fleet
//! instead of one connection per instance.
//!
//! The collector asks for the *raw samples* of every watched instance since
//! its last refresh, both roles in one selector
//! (`{__name__=~"up|<names>", job=~"<jobs>", instance=~"<instances>"}[<window>]`,
//! the names those pdtop reads, `metrics::model::read_names`; the instances
//! and their roles from the discovery), reads the answer as it is parsed (`matrix`: nothing
//! allocated per sample), groups the samples by the `instance` label and by
//! sample timestamp (every series of one server scrape shares its
//! timestamp, and TSDB isolation makes a scrape visible whole or not at
//! all), and re-renders each group as the exposition text that instance
//! served. Each group becomes a [`Msg::Scrape`], so deltas, histograms,
//! restarts, the miss detector, the screen and the report work unchanged,
//! at the server's scrape resolution. Why not `increase(...[60s])`:
//! Prometheus extrapolates `increase` to the window's edges (fractional
//! request counts the miss detector cannot reason with), hides counter
//! resets (pdtop reports restarts), and would need one query per family.
//!
//! Health: a group whose `up` is 0 is a failed server scrape, reported with
//! the `lastError` of `/api/v1/targets`; an instance with no sample for
//! [`STALE_SCRAPES`] of its scrape intervals is stale (the server stopped
//! scraping it, or the server itself is unreachable). Instances are found
//! by `timestamp(up{<matcher>})` of every role in one query (each role's
//! answer marked by `label_replace`) at start, at every refresh until one
//! is found, and every [`REDISCOVER`]: the set is dynamic.
//!
//! The parts: `options` (the command line), `api` (requests and answers),
//! `matrix` (a range answer read without owning it), `tracker` (answers to
//! findings, no I/O), `exposition` (series back to text), `collector` (the
//! task, and placing server times on pdtop's clock).
//!
//! [`Msg::Scrape`]: crate::feed::Msg::Scrape

mod api;
mod collector;
mod exposition;
mod matrix;
mod options;
mod tracker;

pub use api::{Series, discovery_query, window_query};
pub use collector::{REDISCOVER, spawn};
pub use options::{Auth, PASSWORD_ENV, PromOptions, TOKEN_ENV, matcher_inner, parse_url};
pub use tracker::{Out, STALE_SCRAPES, Tracker};

#[cfg(test)]
mod tests;
