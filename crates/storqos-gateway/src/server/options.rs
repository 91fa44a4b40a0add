//! How [`start_with`](crate::start_with) runs the gateway beyond its configuration.

use crate::notices::Logger;

/// How [`start_with`](crate::start_with) runs the gateway beyond its [`Config`](crate::Config).
#[derive(Clone, Default)]
pub struct Options {
    /// Stop on SIGTERM.
    pub sigterm: bool,
    /// Stop on SIGINT (Ctrl-C). Leave it off when the caller handles SIGINT itself
    /// (the Python binding polls Python's signal handlers instead).
    pub sigint: bool,
    /// Log sink (default: standard error, prefixed `storqos serve:`).
    pub log: Option<Logger>,
}
