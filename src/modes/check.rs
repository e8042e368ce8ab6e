//! `pdtop check`: no screen; the feed folded into a report.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::cli::{CheckArgs, UiArgs};
use crate::error::{Error, Result, RuntimeContext};
use crate::feed::Msg;
use crate::pipeline::{CHANNEL, Player, Session, spawn_collectors};
use crate::report::Report;
pub use crate::report::text::summary;
use crate::state::AppState;

pub fn check(args: &CheckArgs) -> Result<Report> {
    if let Some(file) = &args.replay {
        let rec = super::setup::open_recording(file)?;
        let mut state = rec.session.state();
        let end = Player::new(rec, state.clone(), 1.0, String::new()).run_to_end(&mut state);
        state.finish(end);
        return Ok(Report::from_state(&state));
    }
    let settings = super::setup::settings(&args.inputs, &UiArgs::default())?;
    if args.from_logs {
        return from_logs(args, &settings);
    }
    let session = Session::from_inputs(&args.inputs, &settings)?;
    // A bounded check reads the logs it was given: one that cannot be
    // opened is bad usage, named (the dashboard waits for it instead).
    for (_, path) in session.logs.iter().filter(|(_, p)| p != "-") {
        std::fs::File::open(path).map_err(|e| Error::usage(format!("{path}: {e}")))?;
    }
    let duration = args.duration.unwrap_or(0.0);
    if !(duration.is_finite() && duration > 0.0) {
        return Err(Error::usage("--duration must be a positive number of seconds"));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("runtime")?;
    let state = rt.block_on(async {
        let clock = session.clock();
        let (tx, rx) = mpsc::channel(CHANNEL);
        spawn_collectors(&session, clock.clone(), tx, None)?;
        let mut state = session.state();
        super::setup::stuck_after(&mut state, &settings);
        fold_for(&mut state, rx, Duration::from_secs_f64(duration)).await;
        state.finish(clock.now());
        Ok::<AppState, Error>(state)
    })?;
    if session.collect.as_ref().is_some_and(|c| c.prometheus.is_some()) && state.instances.is_empty() {
        let why = state.source_errors.last().map(|(s, e)| format!(": {s}: {e}")).unwrap_or_default();
        return Err(Error::Runtime(format!("no instance matched on the Prometheus server{why}")));
    }
    Ok(Report::from_state(&state))
}

/// `check --from-logs`: the files' lines folded on their own clock.
fn from_logs(args: &CheckArgs, settings: &crate::config::Settings) -> Result<Report> {
    let files = crate::pipeline::read_log_files(&args.inputs)?;
    let mut state = AppState::new(Vec::new(), settings.window_secs).with_logs(&files.logs);
    super::setup::stuck_after(&mut state, settings);
    for m in files.msgs {
        state.apply(m);
    }
    state.finish(files.end);
    let mut report = Report::from_state(&state);
    report.warnings.extend(files.notes);
    Ok(report)
}

/// Applies what the collectors send for `duration`.
async fn fold_for(state: &mut AppState, mut rx: mpsc::Receiver<Msg>, duration: Duration) {
    let deadline = tokio::time::Instant::now() + duration;
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => state.apply(m),
                None => break,
            },
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
}
