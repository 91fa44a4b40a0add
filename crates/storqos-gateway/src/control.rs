//! Live control: a Unix socket (created mode 0600, so only its owner can use it) that
//! takes one JSON command per line and answers one JSON line (`{"ok": true, ...}` or
//! `{"ok": false, "error": "..."}`); `storqos ctl` speaks it.
//!
//! Commands:
//! - `{"cmd": "stats"}`: the per-tenant statistics so far, the policy, connections;
//! - `{"cmd": "set", "tenant": "web" | 0, "weight": 3, "reservation": 100,
//!   "limit": 500, "slo_s": 0.01}`: change a tenant's parameters in the running
//!   policy (its `weights`, `reservations`, `limits` lists) and its latency target;
//! - `{"cmd": "shares", "tenants": [{"tenant": "web" | 0, "reservation": 40, "weight":
//!   0.5, "limit": 120}], "cluster": {"etcd_up": true, "members": 4, "etcd_failures": 0,
//!   "conflicts": 0}}`: set reservations, weights and limits in the running mClock in
//!   place, without the pause of a policy change (a cluster's allocator, every period;
//!   `cluster`, optional, is its view for the metrics); the reply gives each tenant's
//!   demand (`arrived` so far, `inflight` now);
//! - `{"cmd": "background", "state": {"running": true, "warming": false, "high": false,
//!   "next_change_min": 312, "model": true, "done": 1200, "warmed": 0, ...}}`: the
//!   gateway's `[background]` job reports its state, its model and its progress (the
//!   fields of `message::BackgroundState`; shown by `stats`, exported as metrics);
//! - `{"cmd": "policy", "spec": {...}}`: replace the whole policy (the simulator's spec);
//! - `{"cmd": "add-export", "export": {"name": "c", "path": "/srv/c.img", "tenant": 2}}`:
//!   serve a new export (the fields of a configuration's export; the tenant as a name or
//!   an id); `{"cmd": "remove-export", "name": "c"}`: offer it no more (its open
//!   connections keep it until they close; the reply counts them);
//! - `{"cmd": "drain"}`: take no new connection, stop once the open ones have closed.
//!
//! A policy change is checked before it is applied (a wrong one leaves the running
//! policy as it was); once valid, dispatch pauses until the backend is empty, then the
//! new policy takes the old one's queue with the requests' arrival times
//! ([`crate::message::Msg::Reconfigure`]): no request is lost.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use storqos_core::spec::SchedulerSpec;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc::UnboundedSender;

use crate::message::{Msg, Share};
use crate::stats::Recorder;
use crate::tenant_values::{check_tenant_values, check_value};

/// Longest command line accepted.
pub const MAX_COMMAND_BYTES: u64 = 64 << 10;

/// What the control socket acts on.
pub struct Control {
    /// The exports being served.
    pub exports: Arc<crate::export::Exports>,
    /// The configuration being served (export changes are written into it, so that a
    /// reload compares with what is served).
    pub running: Arc<Mutex<crate::config::Config>>,
    /// The gateway's statistics (and the tenants' latency targets).
    pub stats: Arc<Mutex<Recorder>>,
    /// The engine.
    pub sched: UnboundedSender<Msg>,
    /// The running policy, as JSON (what `set` edits).
    pub policy: Mutex<Value>,
    /// Tenant names by id.
    pub names: BTreeMap<u32, String>,
    /// Connections open now.
    pub open: Arc<AtomicUsize>,
    /// Set by `drain`.
    pub draining: Arc<AtomicBool>,
    /// The gateway clock.
    pub clock: crate::clock::SystemClock,
    /// The background job's state as it last reported it (`background`).
    pub background: Mutex<Option<crate::message::BackgroundState>>,
}

/// Create the socket at `path` (replacing a stale socket, and nothing else: see
/// [`crate::transport::socket_path`], which `check` asks too), mode 0600.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use crate::transport::{socket_path, SocketPath};
    use std::os::unix::fs::PermissionsExt;
    match socket_path(path)? {
        SocketPath::Free => {}
        // A socket left by a gateway that is gone (one that is alive answers).
        SocketPath::Stale => std::fs::remove_file(path)?,
        SocketPath::Live => {
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "a running gateway already uses it"))
        }
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Serve commands on `listener` until the task is dropped.
pub async fn serve(listener: UnixListener, control: Arc<Control>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let c = control.clone();
        tokio::spawn(async move {
            let _ = session(stream, &c).await;
        });
    }
}

async fn session(stream: UnixStream, c: &Control) -> std::io::Result<()> {
    let (rd, mut wr) = stream.into_split();
    let mut lines = BufReader::new(rd);
    loop {
        let mut line = String::new();
        let n = (&mut lines).take(MAX_COMMAND_BYTES).read_line(&mut line).await?;
        if n == 0 {
            return Ok(());
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(cmd) => c.run(&cmd).await.unwrap_or_else(|e| json!({"ok": false, "error": e})),
            Err(e) => json!({"ok": false, "error": format!("not a JSON command: {e}")}),
        };
        wr.write_all(format!("{reply}\n").as_bytes()).await?;
    }
}

impl Control {
    async fn run(&self, cmd: &Value) -> Result<Value, String> {
        match cmd.get("cmd").and_then(Value::as_str) {
            Some("stats") => Ok(self.stats()),
            Some("set") => self.set(cmd).await,
            Some("policy") => {
                let spec = cmd.get("spec").ok_or("policy: give the new policy as \"spec\"")?.clone();
                let name = self.apply(spec).await?;
                Ok(json!({"ok": true, "policy": name}))
            }
            Some("shares") => self.shares(cmd).await,
            Some("background") => {
                let state = cmd.get("state").cloned().ok_or("background: give the job's \"state\"")?;
                let state: crate::message::BackgroundState =
                    serde_json::from_value(state).map_err(|e| format!("background: {e}"))?;
                if let Ok(mut b) = self.background.lock() {
                    *b = Some(state.clone());
                }
                self.sched.send(Msg::Background(state)).map_err(|_| "the gateway is stopping")?;
                Ok(json!({"ok": true}))
            }
            Some("add-export") => self.add_export_cmd(cmd),
            Some("remove-export") => self.remove_export_cmd(cmd),
            Some("drain") => {
                self.draining.store(true, Ordering::Relaxed);
                Ok(json!({"ok": true, "open_connections": self.open.load(Ordering::Relaxed)}))
            }
            Some(other) => {
                Err(format!("unknown command {other:?} (known: stats, set, shares, background, policy, add-export, remove-export, drain)"))
            }
            None => {
                Err("a command is a JSON object with \"cmd\": stats, set, shares, background, policy, add-export, remove-export or drain"
                    .into())
            }
        }
    }

    fn stats(&self) -> Value {
        let elapsed = self.clock.now() as f64 / 1e9;
        let s = self.stats.lock().map(|s| s.summary(String::new(), elapsed, 0, 0)).ok();
        json!({
            "ok": true,
            "policy": self.policy.lock().map(|p| p.clone()).unwrap_or(Value::Null),
            "elapsed_s": elapsed,
            "open_connections": self.open.load(Ordering::Relaxed),
            "draining": self.draining.load(Ordering::Relaxed),
            "tenants": s.map(|s| serde_json::to_value(s.tenants).unwrap_or(Value::Null)),
            "names": self.names,
            "background": self.background.lock().ok().and_then(|b| b.clone()),
        })
    }

    /// The tenant a command names: an id, or a name from the configuration.
    fn tenant(&self, v: &Value) -> Result<u32, String> {
        if let Some(id) = v.as_u64() {
            return u32::try_from(id).map_err(|_| format!("tenant {id} does not exist"));
        }
        let name = v.as_str().ok_or("set: give the tenant as a name or an id")?;
        self.names.iter().find(|(_, n)| n.as_str() == name).map(|(&id, _)| id).ok_or_else(|| {
            let known: Vec<&str> = self.names.values().map(String::as_str).collect();
            format!(
                "no tenant named {name:?} (known: {})",
                if known.is_empty() { "ids only".into() } else { known.join(", ") }
            )
        })
    }

    /// Whether tenant `t` is one the gateway serves: an export's, or named in the
    /// configuration.
    fn served(&self, t: u32) -> Result<(), String> {
        let running = self.running_now()?;
        if self.names.contains_key(&t) || running.exports.iter().any(|e| e.tenant == t) {
            return Ok(());
        }
        let ids: std::collections::BTreeSet<u32> =
            running.exports.iter().map(|e| e.tenant).chain(self.names.keys().copied()).collect();
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        Err(format!("tenant {t} is not served (tenants: {})", ids.join(", ")))
    }

    async fn set(&self, cmd: &Value) -> Result<Value, String> {
        let tenant = self.tenant(cmd.get("tenant").ok_or("set: give the tenant")?)?;
        self.served(tenant)?;
        let mut spec = self.policy.lock().map_err(|_| "the policy is unavailable")?.clone();
        let kind = spec.get("kind").and_then(Value::as_str).unwrap_or("?").to_string();
        let mut changed = Vec::new();
        // Each list with the value a tenant beyond it has (core::spec: weight 1, no
        // reservation, no limit): a policy started without the list, or a tenant added
        // since, gets the list written out up to the tenant.
        for (key, list, beyond) in [
            ("weight", "weights", json!(1.0)),
            ("reservation", "reservations", json!(0.0)),
            ("limit", "limits", Value::Null),
        ] {
            let Some(v) = cmd.get(key) else { continue };
            check_value(list, key, v)?;
            let takes_it = |spec: &Value| {
                let mut probe = spec.clone();
                probe.as_object_mut().map(|o| o.insert(list.into(), json!([])));
                serde_json::from_value::<SchedulerSpec>(probe).is_ok()
            };
            if spec.get(list).is_none() && takes_it(&spec) {
                spec.as_object_mut().map(|o| o.insert(list.into(), json!([])));
            }
            write_list(&mut spec, list, tenant, v.clone(), beyond).ok_or_else(|| format!("{kind} takes no {list}"))?;
            changed.push(key);
        }
        if let Some(slo) = cmd.get("slo_s") {
            let s =
                slo.as_f64().filter(|s| s.is_finite() && *s > 0.0).ok_or("slo_s: a latency target > 0 in seconds")?;
            if let Ok(mut r) = self.stats.lock() {
                r.set_slo(tenant, (s * 1e9).round() as u64);
            }
            changed.push("slo");
        }
        if changed.is_empty() {
            return Err("set: give weight, reservation, limit or slo_s".into());
        }
        let name = if changed.iter().any(|k| *k != "slo") { Some(self.apply(spec).await?) } else { None };
        Ok(json!({"ok": true, "tenant": tenant, "changed": changed, "policy": name}))
    }

    /// `shares`: set tenants' reservations and limits in the running mClock in place
    /// (a cluster allocator's shares, every period: no pause, unlike `set`), and answer
    /// with what each tenant has asked of this gateway so far (`arrived`: requests since
    /// the start; `inflight`: in the gateway now), keyed by tenant id.
    async fn shares(&self, cmd: &Value) -> Result<Value, String> {
        let list = cmd.get("tenants").and_then(Value::as_array).ok_or("shares: give \"tenants\" as a list")?;
        let mut shares = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            let at = |what: &str| format!("shares: tenants[{i}]: {what}");
            let tenant = self.tenant(e.get("tenant").ok_or_else(|| at("give the tenant"))?).map_err(|m| at(&m))?;
            self.served(tenant).map_err(|m| at(&m))?;
            let r = e.get("reservation").cloned().unwrap_or(json!(0.0));
            let l = e.get("limit").cloned().unwrap_or(Value::Null);
            let w = e.get("weight").cloned().unwrap_or(Value::Null);
            check_value("reservations", "reservation", &r).map_err(|m| at(&m))?;
            check_value("limits", "limit", &l).map_err(|m| at(&m))?;
            check_value("weights", "weight", &w).map_err(|m| at(&m))?;
            let reservation = r.as_f64().ok_or_else(|| at("reservation: a number of IOPS"))?;
            let number = |v: Value, what: &str| match v {
                Value::Null => Ok(None),
                v => v.as_f64().map(Some).ok_or_else(|| at(what)),
            };
            let limit = number(l, "limit: a number of IOPS or null")?;
            let weight = number(w, "weight: a number or null")?;
            shares.push(Share { tenant, reservation, weight, limit });
        }
        let cluster = match cmd.get("cluster") {
            None => None,
            Some(c) => Some(serde_json::from_value(c.clone()).map_err(|e| format!("shares: cluster: {e}"))?),
        };
        let (done, rx) = tokio::sync::oneshot::channel();
        self.sched
            .send(Msg::Shares { shares: shares.clone(), cluster, done })
            .map_err(|_| "the gateway is stopping")?;
        let demand = rx.await.map_err(|_| "the gateway is stopping")??;
        if let Ok(mut p) = self.policy.lock() {
            for s in shares {
                write_list(&mut p, "reservations", s.tenant, json!(s.reservation), json!(0.0));
                write_list(&mut p, "limits", s.tenant, s.limit.map_or(Value::Null, |l| json!(l)), Value::Null);
                if let Some(w) = s.weight {
                    write_list(&mut p, "weights", s.tenant, json!(w), json!(1.0));
                }
            }
        }
        let by_id =
            |v: Vec<(u32, Value)>| v.into_iter().map(|(t, n)| (t.to_string(), n)).collect::<serde_json::Map<_, _>>();
        Ok(json!({
            "ok": true,
            "arrived": by_id(demand.arrived.into_iter().map(|(t, n)| (t, json!(n))).collect()),
            "inflight": by_id(demand.inflight.into_iter().map(|(t, n)| (t, json!(n))).collect()),
            "reported": demand.reported,
        }))
    }

    /// Open and serve export `cfg` (its statistics under its tenant); the running
    /// configuration is the caller's to update.
    pub fn open_export(&self, cfg: &crate::config::ExportConfig) -> Result<(), String> {
        let e = self.exports.add(cfg)?;
        if let Ok(mut s) = self.stats.lock() {
            s.add_export(e.tenant, &e.name);
        }
        Ok(())
    }

    /// The running configuration, unless a reload holds it (this runs on the runtime's
    /// one thread, which the reload waits for: blocking here would stall both).
    fn running_now(&self) -> Result<std::sync::MutexGuard<'_, crate::config::Config>, String> {
        self.running.try_lock().map_err(|e| match e {
            std::sync::TryLockError::WouldBlock => "a reload is in progress: try again".to_string(),
            std::sync::TryLockError::Poisoned(_) => "the gateway's configuration is unavailable".to_string(),
        })
    }

    fn add_export_cmd(&self, cmd: &Value) -> Result<Value, String> {
        let mut spec = cmd.get("export").cloned().ok_or("add-export: give the export as \"export\"")?;
        if let Some(t) = spec.get("tenant").filter(|t| t.is_string()).cloned() {
            spec["tenant"] = json!(self.tenant(&t)?);
        }
        let cfg: crate::config::ExportConfig =
            serde_json::from_value(spec).map_err(|e| format!("add-export: {}", e.to_string().replace('\n', " ")))?;
        let mut running = self.running_now()?;
        self.open_export(&cfg)?;
        running.exports.push(cfg.clone());
        Ok(json!({"ok": true, "export": cfg.name, "tenant": cfg.tenant}))
    }

    fn remove_export_cmd(&self, cmd: &Value) -> Result<Value, String> {
        let name = cmd.get("name").and_then(Value::as_str).ok_or("remove-export: give the export's \"name\"")?;
        let mut running = self.running_now()?;
        let gone = self.exports.remove(name)?;
        running.exports.retain(|e| e.name != name);
        let open = gone.connections.load(Ordering::Relaxed);
        Ok(json!({"ok": true, "export": name, "open_connections": open}))
    }

    /// Check `spec`, build it, and put it in place of the running policy (its name).
    pub async fn apply(&self, spec: Value) -> Result<String, String> {
        check_tenant_values(&spec).map_err(|e| format!("policy: {e}"))?;
        let parsed: SchedulerSpec = serde_json::from_value(spec.clone()).map_err(|e| format!("policy: {e}"))?;
        let sched = parsed.build().map_err(|e| format!("policy: {e}"))?;
        let (done, rx) = tokio::sync::oneshot::channel();
        self.sched.send(Msg::Reconfigure { sched: Box::new(sched), done }).map_err(|_| "the gateway is stopping")?;
        let name = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .map_err(|_| "the backend did not empty within 30 s: the change waits")?
            .map_err(|_| "the gateway is stopping")?;
        if let Ok(mut p) = self.policy.lock() {
            *p = spec;
        }
        Ok(name)
    }
}

/// Set tenant `tenant`'s entry of `spec`'s list `list` to `v`, writing the list out up
/// to it with `beyond` (the value a tenant past the list has); `None` if `spec` has no
/// such list.
fn write_list(spec: &mut Value, list: &str, tenant: u32, v: Value, beyond: Value) -> Option<()> {
    let arr = spec.get_mut(list).and_then(Value::as_array_mut)?;
    let i = tenant as usize;
    if arr.len() <= i {
        arr.resize(i + 1, beyond);
    }
    arr[i] = v;
    Some(())
}

#[cfg(test)]
mod tests {
    use super::bind;

    #[tokio::test]
    async fn only_a_stale_socket_is_replaced() {
        let scratch = crate::scratch::dir("control-bind");
        let dir = scratch.path();
        // A file that is not a socket stays as it was.
        let file = dir.join("gw.toml");
        std::fs::write(&file, "listen = \"127.0.0.1:10809\"\n").unwrap();
        let err = bind(&file).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "listen = \"127.0.0.1:10809\"\n");
        // A live socket is in use; once its listener is gone, it is stale and replaced.
        let sock = dir.join("gw.sock");
        let live = bind(&sock).unwrap();
        assert_eq!(bind(&sock).unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
        drop(live);
        let again = bind(&sock).unwrap();
        drop(again);
    }
}
