//! The screen modes' panic report: the words color-eyre's hook printed
//! (header, message, location, how to get a backtrace), from std alone, so
//! the build needs no backtrace/gimli/object tree. The terminal guard
//! (`modes/screen.rs`) lets it through once the screen is restored.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::io::IsTerminal;
use std::panic::PanicHookInfo;

const RED: &str = "\x1b[31m";
const CYAN: &str = "\x1b[36m";
const PURPLE: &str = "\x1b[35m";
const RESET: &str = "\x1b[0m";

/// Replaces the panic hook with the report on stderr (coloured on a terminal).
pub fn install() {
    std::panic::set_hook(Box::new(|info: &PanicHookInfo<'_>| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("<non string panic payload>");
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
        // Captured only when RUST_BACKTRACE (or RUST_LIB_BACKTRACE) asks.
        let trace = Backtrace::capture();
        let trace = (trace.status() == BacktraceStatus::Captured).then(|| trace.to_string());
        eprint!(
            "{}",
            render(message, location.as_deref(), trace.as_deref(), std::io::stderr().is_terminal())
        );
    }));
}

/// The report's text.
pub fn render(message: &str, location: Option<&str>, backtrace: Option<&str>, color: bool) -> String {
    let paint = |style: &str, s: &str| if color { format!("{style}{s}{RESET}") } else { s.to_string() };
    let mut out = format!("{}\n", paint(RED, "The application panicked (crashed)."));
    out += &format!("Message:  {}\n", paint(CYAN, message));
    out += &format!("Location: {}\n\n", paint(PURPLE, location.unwrap_or("<unknown>")));
    match backtrace {
        Some(trace) => out += &format!("Backtrace:\n{trace}\n"),
        None => out += "Backtrace omitted. Run with RUST_BACKTRACE=1 environment variable to display it.\n",
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_message_and_location() {
        let r = render("boom", Some("src/app.rs:12"), None, false);
        assert_eq!(
            r,
            "The application panicked (crashed).\nMessage:  boom\nLocation: src/app.rs:12\n\n\
             Backtrace omitted. Run with RUST_BACKTRACE=1 environment variable to display it.\n"
        );
    }

    #[test]
    fn a_backtrace_when_asked_and_colour_on_a_terminal() {
        let r = render("boom", None, Some("   0: pdtop::main"), true);
        assert!(r.starts_with("\x1b[31mThe application panicked (crashed).\x1b[0m\n"), "{r}");
        assert!(r.contains("Message:  \x1b[36mboom\x1b[0m\n"), "{r}");
        assert!(r.contains("Location: \x1b[35m<unknown>\x1b[0m\n"), "{r}");
        assert!(r.ends_with("Backtrace:\n   0: pdtop::main\n"), "{r}");
    }
}
