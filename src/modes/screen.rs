//! The screen sink: owns the terminal for the length of the dashboard and
//! restores it on every way out (return, error, panic, signals).

use tokio::sync::mpsc;

use crate::app::{self, App, Input};
use crate::error::{Error, Result, RuntimeContext};
use crate::pipeline::{COLLECTOR_THREAD, Feed};

pub fn run_screen(mut app: App, feed: Feed) -> Result<()> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        // Runtime (exit 3), like a terminal that cannot be set up: the
        // command line was right, where it ran has no screen.
        return Err(Error::runtime(
            "the dashboard needs a terminal; for no screen use `pdtop check --duration SECS --json`",
        ));
    }
    // Only a panic of this (the drawing) thread ends the dashboard, so only
    // it restores the terminal. A collector's panic is caught by its runtime
    // and shown as that source failing; it may run on a runtime's worker
    // or blocking thread, whose name is not the collector's, and restoring
    // there would leave a running dashboard in cooked mode (keys echoed,
    // `q` waiting for Enter). The hook is in place before raw mode: the
    // collectors already run, and ratatui's `try_init`, whose hook restores
    // on any thread's panic until this one replaced it, once let a scraper
    // panicking at start-up do just that.
    let ui = std::thread::current().id();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let here = std::thread::current();
        if here.id() != ui || here.name() == Some(COLLECTOR_THREAD) {
            return;
        }
        ratatui::restore();
        hook(info);
    }));
    // Raw mode and the alternate screen; frames are then written through
    // a buffer, one write each, not one locked and line-scanned write of
    // stdout per escape sequence.
    // Restores on every way out of this function, `?` included (an early
    // error used to leave the terminal raw and on the alternate screen),
    // a set-up that failed half-way too.
    let restore = RestoreOnDrop;
    ratatui::crossterm::terminal::enable_raw_mode().runtime("cannot set up the terminal")?;
    ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::terminal::EnterAlternateScreen)
        .runtime("cannot set up the terminal")?;
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
    // A fixed viewport, resized on the terminal's resize events (`app::run`):
    // a full-screen one asks the terminal its size before every frame.
    let (w, h) = ratatui::crossterm::terminal::size().runtime("cannot read the terminal's size")?;
    let viewport = ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, w, h));
    let mut terminal = ratatui::Terminal::with_options(
        ratatui::backend::CrosstermBackend::new(out),
        ratatui::TerminalOptions { viewport },
    )
    .runtime("cannot set up the terminal")?;
    #[cfg(debug_assertions)]
    test_ui_fault()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("ui runtime")?;
    let result = rt.block_on(async {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        app::spawn_input_thread(in_tx.clone());
        spawn_signal_watch(in_tx);
        app::run(&mut terminal, &mut app, feed, in_rx).await
    });
    // A terminal that went away (the pane closed, tmux killed): ratatui's
    // own drop would print its failure to the dead stderr, and a failed
    // print panics before the demo's folder is removed. It is let go.
    if terminal.show_cursor().is_err() {
        std::mem::forget(terminal);
    }
    drop(restore);
    result.map(|_| ()).runtime("terminal")
}

struct RestoreOnDrop;

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        // While unwinding, the panic hook has already restored and printed
        // the message; leaving the alternate screen a second time would move
        // the cursor back (xterm's 1049 restores the saved position) and the
        // shell would overwrite the message.
        // Errors unprinted: stderr may be the terminal that went away.
        if !std::thread::panicking() {
            let _ = ratatui::try_restore();
        }
    }
}

/// Test hook, debug builds only: `PDTOP_TEST_UI_FAULT=panic|error` makes
/// the screen fail right after it took the terminal, so the tests can watch
/// the terminal come back from a panic and from an error exit of the real
/// binary. Release builds do not contain it.
#[cfg(debug_assertions)]
fn test_ui_fault() -> Result<()> {
    match std::env::var("PDTOP_TEST_UI_FAULT").as_deref() {
        Ok("panic") => panic!("test hook PDTOP_TEST_UI_FAULT"),
        Ok("error") => Err(Error::runtime("test hook PDTOP_TEST_UI_FAULT")),
        _ => Ok(()),
    }
}

fn spawn_signal_watch(tx: mpsc::UnboundedSender<Input>) {
    use tokio::signal::unix::{SignalKind, signal};
    for kind in [SignalKind::terminate(), SignalKind::hangup(), SignalKind::interrupt()] {
        let tx = tx.clone();
        if let Ok(mut s) = signal(kind) {
            tokio::spawn(async move {
                if s.recv().await.is_some() {
                    let _ = tx.send(Input::Signal);
                }
            });
        }
    }
}
