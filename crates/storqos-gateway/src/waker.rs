//! Wake-ups finer than tokio's timer. Tokio's timer wheel has a granularity of one
//! millisecond, so an emulated completion due in 0.5 ms fired about 1.1 ms late and a
//! 2k-IOPS emulated device answered a lone request in 1.2 ms instead of 0.5 ms. The
//! [`Waker`] is a thread that sleeps on a futex with a timeout (its timer slack set to
//! 1 µs) until the earliest deadline it was given, then sends a message to the
//! engine's loop, which wakes within tens of microseconds of the deadline.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

/// Sends `msg()` into a tokio channel at the deadlines it is given.
pub struct Waker {
    tx: Sender<Instant>,
    last: Option<Instant>,
}

impl Waker {
    /// A waker sending `msg()` on `to` at each deadline (the thread ends when the waker
    /// or the receiver is dropped).
    pub fn new<M: Send + 'static>(to: UnboundedSender<M>, msg: fn() -> M) -> std::io::Result<Self> {
        let (tx, rx) = channel::<Instant>();
        std::thread::Builder::new().name("storqos-waker".into()).spawn(move || {
            // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000u64, 0u64, 0u64, 0u64) };
            let mut next: Option<Instant> = None;
            loop {
                let got = match next {
                    Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
                match got {
                    Ok(d) => next = Some(next.map_or(d, |n| n.min(d))),
                    Err(RecvTimeoutError::Timeout) => {
                        next = None;
                        if to.send(msg()).is_err() {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })?;
        Ok(Waker { tx, last: None })
    }

    /// Wake the loop at `at` (a deadline already asked for is not sent again).
    pub fn wake_at(&mut self, at: Instant) {
        if self.last == Some(at) {
            return;
        }
        self.last = Some(at);
        let _ = self.tx.send(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wakes_near_the_deadline_and_the_earliest_first() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
            let mut w = Waker::new(tx, || 1).unwrap();
            let mut late = Vec::new();
            for _ in 0..50 {
                let t0 = Instant::now();
                w.wake_at(t0 + Duration::from_millis(50)); // superseded by the earlier one
                w.wake_at(t0 + Duration::from_micros(300));
                assert_eq!(rx.recv().await, Some(1));
                late.push(t0.elapsed().as_micros() as i64 - 300);
                while rx.try_recv().is_ok() {}
                tokio::time::sleep(Duration::from_millis(60)).await; // the 50 ms one fires too
                while rx.try_recv().is_ok() {}
            }
            late.sort_unstable();
            // Never early; the median well under tokio's millisecond (generous on 2 busy cores).
            assert!(late[0] >= 0, "woke early: {late:?}");
            assert!(late[25] < 500, "median lateness {} µs: {late:?}", late[25]);
        });
    }
}
