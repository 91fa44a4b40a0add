//! The core's error type: configuration and input errors, each a one-line message that
//! says what is wrong and where.

use std::fmt;

/// A configuration or input error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A parameter is out of range or inconsistent (message names the parameter).
    InvalidConfig(String),
    /// Input data (a trace, a request stream) is malformed (message names the record).
    InvalidInput(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(m) => write!(f, "invalid configuration: {m}"),
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result with the core's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for an [`Error::InvalidConfig`].
pub fn config<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::InvalidConfig(msg.into()))
}
