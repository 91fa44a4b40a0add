//! Prometheus metrics: `GET /metrics` on the `metrics` address, in the OpenMetrics text
//! format, encoded by the `prometheus-client` crate from a snapshot taken at each
//! scrape (nothing is counted twice: the per-tenant counters and latency histograms
//! are the gateway's own statistics, the queue and the policy's gauges come from the
//! engine).
//!
//! Per tenant (label `tenant`): `storqos_requests_total{op}`, `storqos_bytes_total`,
//! `storqos_errors_total`, `storqos_flushes_total`, `storqos_inflight_requests`,
//! `storqos_response_seconds` (a histogram whose buckets include every tenant's SLO),
//! `storqos_slo_seconds`, `storqos_slo_met_total` and `storqos_slo_compliance_ratio`
//! (the last 10 s). For the gateway: `storqos_queued_requests` (held by the policy),
//! `storqos_backend_requests`, `storqos_open_connections`,
//! `storqos_accepted_connections_total`, `storqos_policy_gauge{name}` (AVATAR's threshold,
//! SARC's credits, mClock's tag lag, a leaky bucket's rate: whatever the policy
//! reports). In a cluster (`storqos serve --cluster`): `storqos_cluster_etcd_up`,
//! `storqos_cluster_members`, `storqos_cluster_etcd_failures_total` and
//! `storqos_cluster_conflicts_total`, as the member's agent last reported them. With a
//! `[background]` job: `storqos_background_{running,warming,users_high,model}`,
//! `storqos_background_next_change_minutes`, `storqos_background_model_days`,
//! `storqos_background_progress_ratio`, `storqos_background_requests_total`,
//! `storqos_background_warm_requests_total` and `storqos_background_passes_total`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::message::{Msg, Probe};
use crate::stats::TenantMetrics;

/// Latency bucket bounds (s) every histogram has; the tenants' SLOs are added to them.
pub const LATENCY_BUCKETS_S: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The bucket bounds for SLO targets `slos_s`: the standard ones and the targets.
pub fn bounds(slos_s: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut b: Vec<f64> =
        LATENCY_BUCKETS_S.iter().copied().chain(slos_s).filter(|x| x.is_finite() && *x > 0.0).collect();
    b.sort_by(f64::total_cmp);
    b.dedup();
    b
}

/// Reads one counter of a tenant.
type Count = fn(&TenantMetrics) -> u64;

/// What one scrape reports.
#[derive(Debug)]
struct Snapshot {
    tenants: Vec<TenantMetrics>,
    probe: Probe,
    connections_open: u64,
    connections_total: u64,
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let tenant = |t: u32| vec![("tenant", t.to_string())];
        family(&mut e, "storqos_requests", "Reads and writes completed", MetricType::Counter, |mut m| {
            for t in &self.tenants {
                for (op, n) in [("read", t.reads), ("write", t.writes)] {
                    let labels = vec![("tenant", t.tenant.to_string()), ("op", op.to_string())];
                    ConstCounter::new(n).encode(m.encode_family(&labels)?)?;
                }
            }
            Ok(())
        })?;
        let counters: [(&str, &str, Count); 5] = [
            ("storqos_bytes", "Bytes of reads and writes completed", |t| t.bytes),
            ("storqos_errors", "Requests answered with an NBD error", |t| t.errors),
            ("storqos_rejected", "Requests rejected at the tenant's limit (answered ENOMEM, to retry)", |t| t.rejected),
            ("storqos_flushes", "Flushes completed", |t| t.flushes),
            ("storqos_slo_met", "Completions within the tenant's latency target", |t| t.slo_met),
        ];
        for (name, help, get) in counters {
            family(&mut e, name, help, MetricType::Counter, |mut m| {
                for t in &self.tenants {
                    ConstCounter::new(get(t)).encode(m.encode_family(&tenant(t.tenant))?)?;
                }
                Ok(())
            })?;
        }
        family(
            &mut e,
            "storqos_inflight_requests",
            "Requests in the gateway (queued or on the backend)",
            MetricType::Gauge,
            |mut m| {
                for t in &self.tenants {
                    let n = self.probe.inflight.iter().find(|(id, _)| *id == t.tenant).map_or(0, |x| x.1);
                    ConstGauge::new(n as i64).encode(m.encode_family(&tenant(t.tenant))?)?;
                }
                Ok(())
            },
        )?;
        family(
            &mut e,
            "storqos_response_seconds",
            "Response time, request parsed to reply written",
            MetricType::Histogram,
            |mut m| {
                for t in &self.tenants {
                    let count = t.latency_buckets.iter().map(|b| b.1).sum();
                    m.encode_family(&tenant(t.tenant))?.encode_histogram::<NoLabelSet>(
                        t.latency_sum_s,
                        count,
                        &t.latency_buckets,
                        None,
                    )?;
                }
                Ok(())
            },
        )?;
        family(&mut e, "storqos_slo_seconds", "The tenant's latency target", MetricType::Gauge, |mut m| {
            for t in self.tenants.iter().filter(|t| t.slo_s.is_some()) {
                ConstGauge::new(t.slo_s.unwrap_or(0.0)).encode(m.encode_family(&tenant(t.tenant))?)?;
            }
            Ok(())
        })?;
        family(
            &mut e,
            "storqos_slo_compliance_ratio",
            "Fraction of the last 10 s's completions within the target",
            MetricType::Gauge,
            |mut m| {
                for t in &self.tenants {
                    if let Some(c) = t.slo_compliance {
                        ConstGauge::new(c).encode(m.encode_family(&tenant(t.tenant))?)?;
                    }
                }
                Ok(())
            },
        )?;
        let gauges: [(&str, &str, i64); 3] = [
            ("storqos_queued_requests", "Requests held by the policy", self.probe.queued as i64),
            ("storqos_backend_requests", "Requests on the backend", self.probe.on_backend as i64),
            ("storqos_open_connections", "Connections open (handshakes included)", self.connections_open as i64),
        ];
        for (name, help, v) in gauges {
            family(&mut e, name, help, MetricType::Gauge, |m| ConstGauge::new(v).encode(m))?;
        }
        family(&mut e, "storqos_accepted_connections", "Connections accepted", MetricType::Counter, |m| {
            ConstCounter::new(self.connections_total).encode(m)
        })?;
        if let Some(c) = &self.probe.cluster {
            let gauges: [(&str, &str, i64); 2] = [
                (
                    "storqos_cluster_etcd_up",
                    "1 if the last exchange with etcd succeeded (else the last shares stand)",
                    c.etcd_up as i64,
                ),
                ("storqos_cluster_members", "Live gateways in the cluster, this one included", c.members as i64),
            ];
            for (name, help, v) in gauges {
                family(&mut e, name, help, MetricType::Gauge, |m| ConstGauge::new(v).encode(m))?;
            }
            let counters: [(&str, &str, u64); 2] = [
                ("storqos_cluster_etcd_failures", "Exchanges with etcd that failed", c.etcd_failures),
                (
                    "storqos_cluster_conflicts",
                    "Conflicts seen while running (export claims, refused tenant specs)",
                    c.conflicts,
                ),
            ];
            for (name, help, v) in counters {
                family(&mut e, name, help, MetricType::Counter, |m| ConstCounter::new(v).encode(m))?;
            }
        }
        if let Some(b) = &self.probe.background {
            let gauges: [(&str, &str, f64); 7] = [
                ("storqos_background_running", "1 while the background job runs", b.running as u8 as f64),
                (
                    "storqos_background_warming",
                    "1 while the fast tier is warmed for a predicted High",
                    b.warming as u8 as f64,
                ),
                ("storqos_background_users_high", "1 if the users' High state is detected now", b.high as u8 as f64),
                (
                    "storqos_background_next_change_minutes",
                    "Model minutes to the predicted next change (-1: none)",
                    b.next_change_min,
                ),
                ("storqos_background_model", "1 if a day model is in use", b.model as u8 as f64),
                ("storqos_background_model_days", "Days the learned day model was learned from", b.model_days as f64),
                (
                    "storqos_background_progress_ratio",
                    "How far the current pass over the job's export has gone (0-1)",
                    b.progress,
                ),
            ];
            for (name, help, v) in gauges {
                family(&mut e, name, help, MetricType::Gauge, |m| ConstGauge::new(v).encode(m))?;
            }
            let counters: [(&str, &str, u64); 3] = [
                ("storqos_background_requests", "Requests the background job has done", b.done),
                ("storqos_background_warm_requests", "Warm-up requests done", b.warmed),
                ("storqos_background_passes", "Passes over the job's export completed", b.passes),
            ];
            for (name, help, v) in counters {
                family(&mut e, name, help, MetricType::Counter, |m| ConstCounter::new(v).encode(m))?;
            }
        }
        family(
            &mut e,
            "storqos_policy_gauge",
            "The policy's own gauges (credits, thresholds, tag lag, rates)",
            MetricType::Gauge,
            |mut m| {
                for (name, v) in &self.probe.gauges {
                    ConstGauge::new(*v).encode(m.encode_family(&vec![("name", name.clone())])?)?;
                }
                Ok(())
            },
        )
    }
}

/// Encode one metric family: its descriptor, then what `body` writes into it.
fn family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    body: impl FnOnce(prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    body(e.encode_descriptor(name, help, None, kind)?)
}

/// What the metrics server reads at each scrape.
pub struct Source {
    /// The gateway's statistics.
    pub stats: Arc<std::sync::Mutex<crate::stats::Recorder>>,
    /// The engine.
    pub sched: tokio::sync::mpsc::UnboundedSender<Msg>,
    /// The gateway clock.
    pub clock: crate::clock::SystemClock,
    /// Latency bucket bounds (s).
    pub bounds: Vec<f64>,
    /// Connections open now.
    pub open: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections accepted.
    pub total: Arc<std::sync::atomic::AtomicU64>,
}

impl Source {
    async fn snapshot(&self) -> Snapshot {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let probe = match self.sched.send(Msg::Probe(tx)) {
            Ok(()) => {
                tokio::time::timeout(Duration::from_secs(2), rx).await.ok().and_then(Result::ok).unwrap_or_default()
            }
            Err(_) => Probe::default(),
        };
        let now = self.clock.now();
        let tenants = self.stats.lock().map(|s| s.metrics(now, &self.bounds)).unwrap_or_default();
        Snapshot {
            tenants,
            probe,
            connections_open: self.open.load(Ordering::Relaxed) as u64,
            connections_total: self.total.load(Ordering::Relaxed),
        }
    }

    /// The scrape body: the OpenMetrics text of a snapshot taken now.
    pub async fn render(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.snapshot().await));
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

/// Longest HTTP request head read from a scraper.
const MAX_REQUEST_HEAD: usize = 8 << 10;

/// Scrapes answered at once. Past them, connections wait in the kernel's listen backlog
/// and hold no file descriptor of the gateway: a client that opened a thousand idle
/// connections here once took every descriptor the process had, and the NBD clients'
/// connections waited (3.4 s at a limit of 1,024) for one to time out.
pub const MAX_SCRAPES: usize = 16;

/// How long a scraper may take to send its request head once connected. Prometheus
/// sends it in one write as it connects; a slow client that sent one header byte a
/// second kept its place for the whole [`SCRAPE_TIMEOUT`].
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the reply may take to be written (a scraper that reads it slowly, or not).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one scrape may take, from its connection to its reply: Prometheus's own
/// default `scrape_timeout`, after which it has given up anyway.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// The connections still reading their request head, oldest first: when every place
/// is taken, a newcomer closes the oldest of them. A scraper's head is in its first
/// packet, read as soon as it is accepted, so a flood of connections that say nothing
/// (or one byte a second) only ever closes itself.
#[derive(Default)]
struct Reading {
    next: u64,
    heads: std::collections::VecDeque<(u64, tokio::sync::oneshot::Sender<()>)>,
}

impl Reading {
    /// A connection starts reading its head: its id, and what closes it.
    fn start(&mut self) -> (u64, tokio::sync::oneshot::Receiver<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.next += 1;
        self.heads.push_back((self.next, tx));
        (self.next, rx)
    }

    /// Connection `id` has its head (or ended).
    fn done(&mut self, id: u64) {
        self.heads.retain(|(i, _)| *i != id);
    }

    /// Close the oldest connection still reading its head, if there is one.
    fn close_oldest(&mut self) -> bool {
        while let Some((_, close)) = self.heads.pop_front() {
            if close.send(()).is_ok() {
                return true;
            }
        }
        false
    }
}

/// Serve `GET /metrics` on `listener` until the task is dropped, [`MAX_SCRAPES`] at once.
pub async fn serve(listener: TcpListener, source: Arc<Source>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SCRAPES));
    let reading = Arc::new(std::sync::Mutex::new(Reading::default()));
    loop {
        // With a place free, take the next connection. With none, take it only if a
        // connection still reading its head can be closed to make room; else wait for
        // a scrape to end (connections wait in the backlog meanwhile).
        let free = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) if reading.lock().is_ok_and(|r| !r.heads.is_empty()) => None,
            Err(_) => match slots.clone().acquire_owned().await {
                Ok(slot) => Some(slot),
                Err(_) => return,
            },
        };
        let slot = match free {
            Some(slot) => slot,
            None => tokio::select! {
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    if let Ok(mut r) = reading.lock() {
                        r.close_oldest();
                    }
                    let Ok(slot) = slots.clone().acquire_owned().await else { return };
                    spawn_scrape(stream, slot, &reading, &source);
                    continue;
                }
            },
        };
        let Ok((stream, _)) = listener.accept().await else {
            drop(slot);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        spawn_scrape(stream, slot, &reading, &source);
    }
}

/// Answer `stream` on a task of its own, holding `slot` until it ends.
fn spawn_scrape(
    stream: TcpStream,
    slot: tokio::sync::OwnedSemaphorePermit,
    reading: &Arc<std::sync::Mutex<Reading>>,
    source: &Arc<Source>,
) {
    let (source, reading) = (source.clone(), reading.clone());
    let Ok((id, closed)) = reading.lock().map(|mut r| r.start()) else { return };
    tokio::spawn(async move {
        let _ = tokio::time::timeout(
            SCRAPE_TIMEOUT,
            answer(stream, &source, closed, || {
                if let Ok(mut r) = reading.lock() {
                    r.done(id);
                }
            }),
        )
        .await;
        if let Ok(mut r) = reading.lock() {
            r.done(id);
        }
        drop(slot);
    });
}

/// Read an HTTP request head (up to the blank line), or `None` if the client closes or
/// sends more than [`MAX_REQUEST_HEAD`].
async fn read_head(s: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_REQUEST_HEAD {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(head))
}

/// Answer one HTTP/1.x request and close (a scraper opens a connection per scrape or
/// reopens it: keep-alive is not needed). The head must come within [`HEAD_TIMEOUT`]
/// (and before `closed` fires: a newcomer needed the place), `have_head` is called once
/// it has; the reply must be written within [`WRITE_TIMEOUT`].
async fn answer(
    mut s: TcpStream,
    source: &Source,
    closed: tokio::sync::oneshot::Receiver<()>,
    have_head: impl FnOnce(),
) -> std::io::Result<()> {
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut s)) => match head {
            Ok(Ok(Some(head))) => head,
            _ => return Ok(()),
        },
        _ = closed => return Ok(()),
    };
    have_head();
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, ctype, body) = if method == b"GET" && path == b"/metrics" {
        ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", source.render().await)
    } else if method == b"GET" {
        ("404 Not Found", "text/plain; charset=utf-8", "storqos serve: metrics are at /metrics\n".to_string())
    } else {
        ("405 Method Not Allowed", "text/plain; charset=utf-8", "GET /metrics\n".to_string())
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        s.write_all(reply.as_bytes()).await?;
        s.shutdown().await
    };
    tokio::time::timeout(WRITE_TIMEOUT, write)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the scraper took no reply")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A metrics server over one tenant's empty statistics, on a loopback port.
    async fn server() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let (sched, _) = tokio::sync::mpsc::unbounded_channel();
        let source = Source {
            stats: Arc::new(std::sync::Mutex::new(crate::stats::Recorder::new([(0, "a")]))),
            sched,
            clock: crate::clock::SystemClock::start(),
            bounds: bounds([]),
            open: Arc::default(),
            total: Arc::default(),
        };
        tokio::spawn(serve(listener, Arc::new(source)));
        at
    }

    /// One scrape: the status line, and how long it took.
    async fn scrape(at: std::net::SocketAddr) -> (String, Duration) {
        let t0 = Instant::now();
        let mut s = TcpStream::connect(at).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        (out.lines().next().unwrap_or_default().to_string(), t0.elapsed())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_clients_never_keep_scrapes_out() {
        let at = server().await;
        // Four times the places, each with half a request head, then one byte at a
        // time: before, each held its place for the whole scrape timeout (10 s), and
        // a scrape waited behind 4 rounds of them.
        let mut slow = Vec::new();
        for _ in 0..4 * MAX_SCRAPES {
            let mut s = TcpStream::connect(at).await.unwrap();
            s.write_all(b"GET /met").await.unwrap();
            slow.push(s);
        }
        for _ in 0..5 {
            for s in &mut slow {
                let _ = s.write_all(b"r").await;
            }
            let (status, took) = scrape(at).await;
            assert_eq!(status, "HTTP/1.1 200 OK");
            assert!(took < HEAD_TIMEOUT, "a scrape beside slow clients took {took:?}");
        }
        // A slow client that sends its head within the deadline is answered too.
        let mut late = TcpStream::connect(at).await.unwrap();
        late.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        late.write_all(b"\r\n").await.unwrap();
        let mut out = String::new();
        late.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_head_not_sent_within_the_deadline_is_closed() {
        let at = server().await;
        let mut s = TcpStream::connect(at).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        let t0 = Instant::now();
        let mut out = Vec::new();
        // The gateway closes it: the read ends without a reply.
        s.read_to_end(&mut out).await.unwrap();
        assert!(out.is_empty());
        let took = t0.elapsed();
        assert!(took >= HEAD_TIMEOUT - Duration::from_millis(100) && took < SCRAPE_TIMEOUT, "{took:?}");
    }
}
