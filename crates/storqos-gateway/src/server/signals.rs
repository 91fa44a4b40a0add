//! The signals a gateway stops on (SIGTERM, SIGINT) or reloads on (SIGHUP), and the
//! stop condition that joins them with [`Handle::stop`](crate::Handle::stop) and the
//! configured duration.

use std::time::Duration;

use tokio::sync::watch;

use super::options::Options;
use crate::error::{Error, Result};

/// The signal streams a gateway listens to, registered before [`start_with`] returns
/// (so a signal that arrives right after the ready message is not lost).
#[derive(Default)]
pub(crate) struct Signals {
    #[cfg(unix)]
    pub(crate) streams: Vec<tokio::signal::unix::Signal>,
    /// SIGHUP, with SIGTERM: it must not end the gateway (its default action would).
    #[cfg(unix)]
    pub(crate) hangup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Register the signals `options` asks for; must run inside the runtime.
    pub(crate) fn register(options: &Options) -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut streams = Vec::new();
            let wanted = [(options.sigterm, SignalKind::terminate()), (options.sigint, SignalKind::interrupt())];
            for (on, kind) in wanted {
                if on {
                    streams.push(signal(kind).map_err(|e| Error::Io(format!("cannot handle signals: {e}")))?);
                }
            }
            let hangup = if options.sigterm {
                Some(signal(SignalKind::hangup()).map_err(|e| Error::Io(format!("cannot handle signals: {e}")))?)
            } else {
                None
            };
            Ok(Signals { streams, hangup })
        }
        #[cfg(not(unix))]
        {
            let _ = options;
            Ok(Signals::default())
        }
    }

    /// Resolve when any of the signals arrives (never if there are none).
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        if !self.streams.is_empty() {
            let polls = self.streams.iter_mut().map(|s| Box::pin(s.recv()));
            let _ = futures_select_all(polls).await;
            return;
        }
        std::future::pending::<()>().await
    }
}

/// Wait for the first of several futures (a tiny `select_all`).
#[cfg(unix)]
pub(crate) async fn futures_select_all<F: std::future::Future + Unpin>(futs: impl Iterator<Item = F>) {
    let mut futs: Vec<F> = futs.collect();
    std::future::poll_fn(|cx| {
        for f in futs.iter_mut() {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Resolve when any enabled stop condition fires.
/// Resolve at each SIGHUP (never without it).
#[cfg(unix)]
pub(crate) async fn hangups(hangup: &mut Option<tokio::signal::unix::Signal>) {
    match hangup {
        Some(h) => {
            h.recv().await;
        }
        None => std::future::pending().await,
    }
}

pub(crate) async fn stop_signal(mut stop: watch::Receiver<bool>, duration: Option<Duration>, mut signals: Signals) {
    let requested = async {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                // The handle is gone: stop.
                return;
            }
        }
    };
    let timed = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = requested => {}
        _ = timed => {}
        _ = signals.recv() => {}
    }
}
