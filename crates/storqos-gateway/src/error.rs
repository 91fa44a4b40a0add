//! The gateway's error: a bad configuration (one line naming the field) or a failure
//! to start. Every module that can refuse returns it; it depends on nothing of the
//! gateway's own.

use std::fmt;

/// A gateway error: a bad configuration (one line naming the field) or an I/O failure
/// while starting (binding, opening an export).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The configuration is invalid; the message names the field.
    Config(String),
    /// The gateway could not start (runtime creation failed).
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) => write!(f, "invalid gateway configuration: {m}"),
            Error::Io(m) => write!(f, "gateway I/O error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result with the gateway's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
