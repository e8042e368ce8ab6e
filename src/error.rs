//! The two ways a mode fails, and the exit status each gets (README,
//! "Exit status"): bad usage is the user's to fix before running again; a
//! runtime failure happened while doing what was asked.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Flags that do not fit together, a value that does not parse, a file
    /// given on the command line that cannot be read. Exit 2.
    Usage(String),
    /// Something went wrong while running: no instance found through
    /// Prometheus, a corrupt recording, no terminal or one that cannot be
    /// set up, a lab that did not start. Exit 3.
    Runtime(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Exit statuses (0 and 1 are the verdict's: `Verdict::exit_code`).
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_RUNTIME: u8 = 3;

impl Error {
    pub fn usage(e: impl fmt::Display) -> Error {
        Error::Usage(e.to_string())
    }

    pub fn runtime(e: impl fmt::Display) -> Error {
        Error::Runtime(e.to_string())
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => EXIT_USAGE,
            Error::Runtime(_) => EXIT_RUNTIME,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(e) | Error::Runtime(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}

/// Bad usage, from the `String` errors of argument parsing helpers.
pub trait UsageContext<T> {
    fn usage(self) -> Result<T>;
}

impl<T, E: fmt::Display> UsageContext<T> for std::result::Result<T, E> {
    fn usage(self) -> Result<T> {
        self.map_err(Error::usage)
    }
}

/// A runtime failure, from any displayable error.
pub trait RuntimeContext<T> {
    fn runtime(self, what: &str) -> Result<T>;
}

impl<T, E: fmt::Display> RuntimeContext<T> for std::result::Result<T, E> {
    fn runtime(self, what: &str) -> Result<T> {
        self.map_err(
            |e| if what.is_empty() { Error::runtime(e) } else { Error::Runtime(format!("{what}: {e}")) },
        )
    }
}
