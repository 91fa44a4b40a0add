//! The engine's loop on the wall clock: between turns ([`Engine::turn`]) it waits for
//! the next message, the turn's wake-up or a ring completion. Messages already waiting
//! are handled as one batch (up to [`BATCH`]) before the next turn dispatches again.
//! Deadlines within [`PRECISE_WAKE_NS`] also go to a [`Waker`] thread: tokio's timer
//! would fire them up to a millisecond late.

use storqos_core::time::Nanos;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{Engine, Turn};
use crate::clock::SystemClock;
use crate::local_backend::{ring_completed, LocalBackend};
use crate::message::Msg;
use crate::waker::Waker;

/// Deadlines closer than this (3 ms) also go to the [`Waker`]: tokio's timer would fire
/// them up to a millisecond late.
pub const PRECISE_WAKE_NS: Nanos = 3_000_000;
/// Most messages handled before the loop dispatches again.
pub const BATCH: usize = 256;

impl Engine<LocalBackend, SystemClock> {
    /// Run until [`Msg::Stop`] (or every sender is gone) and the outstanding I/Os have
    /// completed on the backend (an emulated device's remaining delay is not waited
    /// for). Requests still queued in the policy are answered `ESHUTDOWN`. `waker` sends
    /// [`Msg::Wake`] on the channel `rx` reads.
    pub async fn run(mut self, mut rx: UnboundedReceiver<Msg>, mut waker: Waker) {
        let mut stopping = false;
        let ring_ready = self.backend.take_ring_ready();
        loop {
            let (now, wake) = match self.turn(stopping) {
                Turn::Finished => break,
                Turn::Wait { now, wake } => (now, wake),
            };
            // Sleep until the next message, policy timer, emulated completion or the end
            // of the statistics window.
            if let Some(w) = wake.filter(|&w| w.saturating_sub(now) < PRECISE_WAKE_NS) {
                waker.wake_at(self.clock.std_instant(w));
            }
            let sleep = tokio::time::sleep_until(self.clock.instant(wake.unwrap_or(now)));
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { stopping = true; continue };
                    stopping |= self.handle(msg, stopping);
                    for _ in 0..BATCH {
                        match rx.try_recv() {
                            Ok(m) => stopping |= self.handle(m, stopping),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep, if wake.is_some() => {}
                _ = ring_completed(&ring_ready), if ring_ready.is_some() => self.reap(),
            }
            if stopping {
                // Nothing more will be dispatched: answer what the policy still holds.
                self.refuse_queued();
            }
        }
    }
}
