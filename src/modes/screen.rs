//! The screen sink: owns the terminal for the length of the dashboard and
//! restores it on every way out (return, error, panic, signals).

use ratatui::crossterm::event::Event;
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
    // Raw mode and the alternate screen.
    // Restores on every way out of this function, `?` included (an early
    // error used to leave the terminal raw and on the alternate screen),
    // a set-up that failed half-way too.
    let restore = RestoreOnDrop;
    ratatui::crossterm::terminal::enable_raw_mode().runtime("cannot set up the terminal")?;
    ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::terminal::EnterAlternateScreen)
        .runtime("cannot set up the terminal")?;
    // The dashboard's own screen, resized on the terminal's resize events
    // (`app::run`): asking the terminal its size before every frame cost
    // three system calls a second. Each frame is one write.
    let (w, h) = ratatui::crossterm::terminal::size().runtime("cannot read the terminal's size")?;
    let mut terminal = crate::ui::Screen::new(std::io::stdout(), w, h);
    #[cfg(debug_assertions)]
    test_ui_fault()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().runtime("ui runtime")?;
    let result = rt.block_on(async {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        spawn_input_thread(in_tx.clone());
        spawn_signal_watch(in_tx);
        app::run(&mut terminal, &mut app, feed, in_rx).await
    });
    // The cursor shown again; on a terminal that went away (the pane
    // closed, tmux killed) the write fails unprinted, and the demo's folder
    // is still removed.
    drop(terminal);
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

/// Reads terminal events on a plain thread (crossterm's read blocks).
fn spawn_input_thread(tx: mpsc::UnboundedSender<Input>) {
    let _ = std::thread::Builder::new().name("pdtop-input".into()).spawn(move || {
        while let Ok(ev) = ratatui::crossterm::event::read() {
            let input = match ev {
                Event::Key(k) => Input::Key(k),
                Event::Resize(w, h) => Input::Resize(w, h),
                _ => continue,
            };
            if tx.send(input).is_err() {
                break;
            }
        }
    });
}
