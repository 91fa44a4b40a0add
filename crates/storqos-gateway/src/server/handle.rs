//! The [`Handle`] of a running gateway: its reload (a new configuration applied without
//! losing a request, or refused whole), its statistics, and its stop.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::ready::ReadyInfo;
use crate::config::{Config, ExportConfig};
use crate::stats::{GaugeRow, Recorder, Stats, WindowRow};

pub(crate) type Finished = Arc<(Mutex<Option<Stats>>, Condvar)>;

/// A running gateway. Dropping it stops the gateway.
pub struct Handle {
    pub(crate) addr: Option<SocketAddr>,
    pub(crate) info: ReadyInfo,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) finished: Finished,
    pub(crate) stats: Arc<Mutex<Recorder>>,
    pub(crate) control: Arc<crate::control::Control>,
    pub(crate) hangup: Arc<AtomicBool>,
    /// The configuration being served (what a reload is compared with; the control
    /// socket's export changes are written into it).
    pub(crate) running: Arc<Mutex<Config>>,
    pub(crate) runtime: Option<tokio::runtime::Runtime>,
}

impl Handle {
    /// Whether a SIGHUP arrived since the last call (the caller reloads its
    /// configuration and hands it to [`Handle::reload`]).
    pub fn take_hangup(&self) -> bool {
        self.hangup.swap(false, Ordering::Relaxed)
    }

    /// Apply a new configuration to the running gateway: its policy (checked, then put
    /// in place without losing a request), its tenants' latency targets, its exports
    /// (new names are opened and served, names no longer there take no new connection).
    /// What cannot change while serving (listen address, an export kept under the same
    /// name, depth, emulated capacity, limits, metrics, control socket, TLS) must stay
    /// the same: a change there is an error and nothing changes. Returns the policy's
    /// name.
    pub fn reload(&self, new: Config) -> std::result::Result<String, String> {
        new.validate().map_err(|e| e.to_string())?;
        let mut running = self.running.lock().map_err(|_| "the gateway's configuration is unavailable")?;
        let changed_export = new
            .exports
            .iter()
            .find_map(|e| running.exports.iter().find(|o| o.name == e.name && *o != e).map(|_| e.name.clone()));
        if let Some(name) = changed_export {
            return Err(format!(
                "export {name:?} changed: an export cannot change while serving (remove it, then add it under \
                 another name, or restart); nothing changed"
            ));
        }
        let fixed = [
            ("listen", running.listen != new.listen),
            ("depth", running.depth != new.depth),
            ("iops", running.iops != new.iops),
            ("limits", running.limits != new.limits),
            ("metrics", running.metrics != new.metrics),
            ("control", running.control != new.control),
            ("cost", running.cost != new.cost),
            ("tiers", running.tiers != new.tiers),
            ("tls", running.tls != new.tls),
            ("direct_reads", running.direct_reads != new.direct_reads),
        ];
        let changed: Vec<&str> = fixed.iter().filter(|(_, c)| *c).map(|(k, _)| *k).collect();
        if !changed.is_empty() {
            return Err(format!(
                "{} cannot change while serving (restart for that); nothing changed",
                changed.join(", ")
            ));
        }
        let rt = self.runtime.as_ref().ok_or("the gateway has stopped")?;
        // New exports first (a file that does not open changes nothing), then the policy.
        let added: Vec<&ExportConfig> =
            new.exports.iter().filter(|e| !running.exports.iter().any(|o| o.name == e.name)).collect();
        let mut opened = Vec::new();
        for e in added {
            match self.control.open_export(e) {
                Ok(()) => opened.push(e.name.clone()),
                Err(why) => {
                    for name in &opened {
                        let _ = self.control.exports.remove(name);
                    }
                    return Err(format!("{why}; nothing changed"));
                }
            }
        }
        let name = match rt.block_on(self.control.apply(new.policy_json.clone())) {
            Ok(name) => name,
            Err(why) => {
                for name in &opened {
                    let _ = self.control.exports.remove(name);
                }
                return Err(why);
            }
        };
        for gone in running.exports.iter().filter(|o| !new.exports.iter().any(|e| e.name == o.name)) {
            let _ = self.control.exports.remove(&gone.name);
        }
        if let Ok(mut r) = self.stats.lock() {
            for (&t, &s) in &new.slos {
                r.set_slo(t, (s * 1e9).round() as u64);
            }
        }
        *running = new;
        Ok(name)
    }
    /// The TCP address the gateway listens on (`None` on a Unix socket).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// What it serves.
    pub fn info(&self) -> &ReadyInfo {
        &self.info
    }

    /// The per-window rows and gauge samples closed since the last call (empty without
    /// a window length), handed over: the gateway keeps no copy, and the final
    /// [`Stats::windows`](crate::Stats) and `gauges` hold only what was never taken.
    pub fn take_windows(&self) -> (Vec<WindowRow>, Vec<GaugeRow>) {
        self.stats.lock().map(|mut s| s.take_windows()).unwrap_or_default()
    }

    /// Ask the gateway to stop (returns at once; see [`Handle::wait`]).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// The final statistics if the gateway has stopped within `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Stats> {
        let (lock, cv) = &*self.finished;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv.wait_timeout_while(guard, timeout, |s| s.is_none()).unwrap_or_else(|e| e.into_inner());
        guard.clone()
    }

    /// Block until the gateway stops by itself (duration, signal, [`Handle::stop`]).
    pub fn wait(mut self) -> Stats {
        let (lock, cv) = &*self.finished;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let guard = cv.wait_while(guard, |s| s.is_none()).unwrap_or_else(|e| e.into_inner());
        let stats = guard.clone().unwrap_or_else(empty_stats);
        drop(guard);
        self.close();
        stats
    }

    /// Stop the gateway and return its statistics.
    pub fn shutdown(self) -> Stats {
        self.stop();
        self.wait()
    }

    fn close(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Dropped inside another runtime, where blocking is not allowed.
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.close();
    }
}

pub(crate) fn empty_stats() -> Stats {
    Stats {
        policy: String::new(),
        elapsed_s: 0.0,
        connections: 0,
        protocol_errors: 0,
        tenants: Vec::new(),
        windows: Vec::new(),
        gauges: Vec::new(),
    }
}
