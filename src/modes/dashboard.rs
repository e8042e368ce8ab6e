//! The live dashboard: the session's collectors, sunk to the screen.

use super::screen::run_screen;
use crate::app::App;
use crate::cli::{Inputs, UiArgs};
use crate::error::Result;
use crate::pipeline::{Feed, Session};

pub fn dashboard(inputs: Inputs, ui: UiArgs) -> Result<()> {
    let settings = super::setup::settings(&inputs, &ui)?;
    let session = Session::from_inputs(&inputs, &settings)?;
    let theme = super::setup::theme(&settings)?;
    let feed = Feed::live(&session, session.clock())?;
    let mut state = session.state();
    super::setup::stuck_after(&mut state, &settings);
    run_screen(App::new(state, theme), feed)
}
