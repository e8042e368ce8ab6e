//! `pdtop record` and `pdtop import-lab`: a feed sunk into a recording.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::cli::{ImportLabArgs, RecordArgs, UiArgs};
use crate::error::{Error, Result, RuntimeContext};
use crate::feed::Msg;
use crate::lab::{self, Capture};
use crate::pipeline::{CHANNEL, Session, spawn_collectors};
use crate::record::Writer;

/// The collectors of the dashboard, written to a file until the duration
/// ends or a signal comes.
pub fn record(args: &RecordArgs) -> Result<String> {
    let settings = super::setup::settings(&args.inputs, &UiArgs::default())?;
    let session = Session::from_inputs(&args.inputs, &settings)?;
    let file =
        std::fs::File::create(&args.out).map_err(|e| Error::Usage(format!("{}: {e}", args.out.display())))?;
    let mut writer = Writer::new(std::io::BufWriter::new(file), &session).runtime("recording")?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("runtime")?;
    let started = std::time::Instant::now();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::channel(CHANNEL);
        spawn_collectors(&session, session.clock(), tx, None)?;
        let stop = stop_signal(args.duration);
        tokio::pin!(stop);
        let mut flush = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                r = &mut stop => { r?; break; }
                msg = rx.recv() => match msg {
                    Some(mut m) if m.is_observation() => {
                        if !session.show_prompts {
                            hide_prompts(&mut m);
                        }
                        writer.write(&m).runtime("recording")?;
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = flush.tick() => writer.flush().runtime("recording")?,
            }
        }
        Ok::<(), Error>(())
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

/// Ends after `duration` seconds (if given), or on SIGTERM or SIGINT.
async fn stop_signal(duration: Option<f64>) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).runtime("signal")?;
    let mut int = signal(SignalKind::interrupt()).runtime("signal")?;
    match duration {
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
    Ok(())
}

/// A recording keeps log lines verbatim, except the prompt text some vLLM
/// versions print: that stays out unless `--show-prompts` was given.
fn hide_prompts(m: &mut Msg) {
    if let Msg::LogLines { lines, .. } = m {
        for l in lines.iter_mut() {
            if let Some(r) = crate::logs::vllm::redact_prompt(l) {
                *l = r;
            }
        }
    }
}

/// A capture folder as a recording.
pub fn import_lab(args: &ImportLabArgs) -> Result<String> {
    let capture = Capture::from_dir(&args.dir).map_err(Error::usage)?;
    let rec = lab::replay::recording(&capture);
    let file =
        std::fs::File::create(&args.out).map_err(|e| Error::Usage(format!("{}: {e}", args.out.display())))?;
    let mut w = Writer::new(std::io::BufWriter::new(file), &rec.session).runtime("recording")?;
    for m in &rec.messages {
        w.write(m).runtime("recording")?;
    }
    let n = w.entries;
    drop(w);
    Ok(format!("wrote {n} entries from {} to {}", args.dir.display(), args.out.display()))
}
