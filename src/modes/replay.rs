//! `pdtop replay`: the dashboard on a recording, or on log files read
//! after the fact (`--from-logs`), both paced by the same player.

use super::screen::run_screen;
use crate::app::App;
use crate::cli::{Inputs, ReplayArgs};
use crate::error::{Error, Result};
use crate::pipeline::{Feed, Player};

pub fn replay(args: ReplayArgs) -> Result<()> {
    let (app, player) = replay_app(&args)?;
    run_screen(app, Feed::Recording(Box::new(player)))
}

/// The app and the player a replay runs (the tests drive them into a
/// test terminal).
pub fn replay_app(args: &ReplayArgs) -> Result<(App, Player)> {
    let inputs = Inputs {
        prefill_log: args.prefill_log.clone(),
        decode_log: args.decode_log.clone(),
        proxy_log: args.proxy_log.clone(),
        stuck_after: args.stuck_after,
        ..Inputs::default()
    };
    let settings = super::setup::settings(&inputs, &args.ui)?;
    let theme = super::setup::theme(&settings)?;
    let mut notes = Vec::new();
    let (rec, name) = match (&args.file, args.from_logs) {
        (_, true) => {
            let mut files = crate::pipeline::read_log_files(&inputs)?;
            // File names, as the LOGS row shows them.
            notes = std::mem::take(&mut files.notes)
                .into_iter()
                .map(|n| {
                    files.logs.iter().fold(n, |n, (_, p)| {
                        let name = std::path::Path::new(p).file_name().map(|f| f.to_string_lossy());
                        match name {
                            Some(f) if !p.is_empty() => n.replace(p.as_str(), &f),
                            _ => n,
                        }
                    })
                })
                .collect();
            (files.into_recording(settings.window_secs), "logs".to_string())
        }
        (Some(file), false) => {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (super::setup::open_recording(file)?, name)
        }
        (None, false) => return Err(Error::usage("give a recording, or --from-logs with --*-log files")),
    };
    let mut state = rec.session.state();
    super::setup::stuck_after(&mut state, &settings);
    let mut player = Player::new(rec, state.clone(), args.speed, name);
    // Log files read after the fact have ended: at their end, what is
    // still open is decided as `check --from-logs` decides it.
    player.finish_at_end = args.from_logs;
    let mut app = App::new(state, theme);
    app.view.logs_only = args.from_logs;
    app.view.notes = notes;
    Ok((app, player))
}
