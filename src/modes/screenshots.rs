//! `pdtop screenshots`: frames drawn from the embedded recording, replayed
//! headless to chosen moments, saved as SVG.

use crate::app::App;
use crate::error::{Error, Result, RuntimeContext};
use crate::lab::{self, Capture};
use crate::theme::Theme;

pub fn screenshots(out: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    use crate::ui::svg::{DARK, LIGHT, buffer_to_svg};
    use ratatui::backend::TestBackend;
    let capture = Capture::embedded().map_err(|e| Error::Runtime(format!("demo data: {e}")))?;
    std::fs::create_dir_all(out).runtime("screenshot folder")?;
    let dark = Theme::builtin("dark").map_err(Error::runtime)?;
    let light = Theme::builtin("light").map_err(Error::runtime)?;
    // (file, seconds into the recording, theme, palette, view, trace open,
    // id search, columns x rows)
    type Shot<'a> =
        (&'a str, f64, &'a Theme, &'a crate::ui::svg::Palette, crate::ui::View, bool, &'a str, (u16, u16));
    const README: (u16, u16) = (140, 44);
    let shots: [Shot; 9] = {
        use crate::ui::View::*;
        [
            ("overview.svg", 45.0, &dark, &DARK, Overview, false, "", README),
            ("overview-80x24.svg", 45.0, &dark, &DARK, Overview, false, "", (80, 24)),
            ("overview-200x60.svg", 62.0, &dark, &DARK, Overview, false, "", (200, 60)),
            ("requests.svg", 62.0, &dark, &DARK, Requests, false, "", README),
            ("trace.svg", 62.0, &dark, &DARK, Requests, true, "edge_block-1", README),
            ("link.svg", 62.0, &dark, &DARK, Link, false, "", README),
            ("decode-restart.svg", 100.0, &dark, &DARK, Overview, false, "", README),
            ("events.svg", 146.0, &dark, &DARK, Events, false, "", README),
            ("light.svg", 45.0, &light, &LIGHT, Overview, false, "", README),
        ]
    };
    let mut written = Vec::new();
    for (file, secs, theme, palette, view, open, search, (w, h)) in shots {
        let state = lab::replay::state_at(&capture, secs, true);
        let mut app = App::new(state, theme.clone());
        app.view.search = search.to_string();
        app.view.view = view;
        app.view.detail = open;
        let mut term = ratatui::Terminal::new(TestBackend::new(w, h)).runtime("backend")?;
        term.draw(|f| app.draw(f)).runtime("draw")?;
        let path = out.join(file);
        std::fs::write(&path, buffer_to_svg(term.backend().buffer(), palette)).runtime("write")?;
        written.push(path);
    }
    Ok(written)
}
