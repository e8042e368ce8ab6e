//! `pdtop replay`: the dashboard on a recording.

use super::screen::run_screen;
use crate::app::App;
use crate::cli::{Inputs, ReplayArgs};
use crate::error::Result;
use crate::pipeline::{Feed, Player};

pub fn replay(args: ReplayArgs) -> Result<()> {
    let rec = super::open_recording(&args.file)?;
    let settings = super::settings(&Inputs::default(), &args.ui)?;
    let theme = super::theme(&settings)?;
    let name = args.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let state = rec.session.state();
    let player = Player::new(rec, state.clone(), args.speed, name);
    run_screen(App::new(state, theme), Feed::Recording(Box::new(player)))
}
