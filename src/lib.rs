//! pdtop: a terminal dashboard for a vLLM disaggregated-prefill pair.
//!
//! Layout mirrors responsibility:
//! - `feed/`: the vocabulary every part speaks (messages, endpoints, roles, log origins).
//! - `pipeline/`: a session (what is watched), the feeds (live collectors, a recording).
//! - `modes/`: the sinks of a feed: screen, check report, recording, screenshots.
//! - `sources/`: collectors (HTTP scrapes, log tails, /proc/net/dev); never touch the terminal.
//! - `metrics/`: the Prometheus text parser and the vLLM metric model.
//! - `logs/`: parsers for vLLM, uvicorn and proxy log lines.
//! - `kv/`: KV-cache size arithmetic from a model's config.
//! - `state/`: the one owner of application state; pure `apply(msg)`.
//! - `report/`: what reports read, derived from state (`check`, per-request ledgers, span timings).
//! - `ui/`: rendering from state only.
//! - `lab/`: the embedded demo lab (recorded vLLM output served on loopback).

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod doctor;
pub mod error;
pub mod feed;
pub mod keymap;
pub mod kv;
pub mod lab;
pub mod logs;
pub mod metrics;
pub mod modes;
pub mod panic_report;
pub mod pipeline;
pub mod record;
pub mod report;
pub mod sources;
pub mod state;
pub mod theme;
pub mod traces;
pub mod ui;
