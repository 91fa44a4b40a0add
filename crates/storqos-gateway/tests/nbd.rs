//! The gateway from the outside: a small NBD client written here, byte by byte from
//! the NBD spec (independent of the crate's own encoders), talks to a gateway started
//! on port 0 over TCP.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempPath;

use storqos_gateway::{start_with, Config, Handle, Options, Stats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NBDMAGIC: &[u8; 8] = b"NBDMAGIC";
const IHAVEOPT: &[u8; 8] = b"IHAVEOPT";
const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQ_MAGIC: u32 = 0x2560_9513;
const SIMPLE_MAGIC: u32 = 0x6744_6698;
const EINVAL: u32 = 22;
const ENOMEM: u32 = 12;
const ENOSPC: u32 = 28;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A scratch image of `len` zero bytes in the temp directory, removed when dropped: by a
/// test that fails as well as by one that passes.
fn image(tag: &str, len: u64) -> TempPath {
    let f = tempfile::Builder::new().prefix(&format!("storqos-gw-test-{tag}-")).suffix(".img").tempfile().unwrap();
    f.as_file().set_len(len).unwrap();
    f.into_temp_path()
}

type Lines = Arc<Mutex<Vec<String>>>;

/// Start a gateway on port 0 whose log lines are captured.
fn gateway(exports: &[(&str, &Path, u32)], extra: &str) -> (Handle, Lines) {
    let ex: Vec<(&str, &Path, u32, Option<u32>)> = exports.iter().map(|&(n, p, t)| (n, p, t, None)).collect();
    gateway_classes(&ex, extra)
}

/// [`gateway`] with an optional scheduling class per export.
fn gateway_classes(exports: &[(&str, &Path, u32, Option<u32>)], extra: &str) -> (Handle, Lines) {
    let ex: Vec<String> = exports
        .iter()
        .map(|(n, p, t, c)| {
            let class = c.map(|c| format!(r#","class":{c}"#)).unwrap_or_default();
            format!(r#"{{"name":"{n}","path":"{}","tenant":{t}{class}}}"#, p.display())
        })
        .collect();
    let json = format!(r#"{{"listen":"127.0.0.1:0","exports":[{}]{extra}}}"#, ex.join(","));
    let cfg = Config::from_json(&json).unwrap();
    let lines: Lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let log: storqos_gateway::Logger = Arc::new(move |m: &str| sink.lock().unwrap().push(m.to_string()));
    let h = start_with(cfg, Options { log: Some(log), ..Options::default() }).unwrap();
    (h, lines)
}

struct Client {
    s: TcpStream,
}

struct OptReply {
    option: u32,
    kind: u32,
    data: Vec<u8>,
}

impl Client {
    /// Connect, check the greeting, send the client flags.
    async fn hello(addr: SocketAddr, client_flags: u32) -> Client {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // As libnbd and qemu do: requests go out at once, not held back by Nagle's
        // algorithm until the gateway acknowledges the one before.
        s.set_nodelay(true).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).await.unwrap();
        assert_eq!(&g[0..8], NBDMAGIC);
        assert_eq!(&g[8..16], IHAVEOPT);
        assert_eq!(u16::from_be_bytes([g[16], g[17]]), 0b11, "FIXED_NEWSTYLE | NO_ZEROES");
        s.write_all(&client_flags.to_be_bytes()).await.unwrap();
        Client { s }
    }

    async fn option(&mut self, option: u32, data: &[u8]) {
        let mut b = IHAVEOPT.to_vec();
        b.extend(option.to_be_bytes());
        b.extend((data.len() as u32).to_be_bytes());
        b.extend(data);
        self.s.write_all(&b).await.unwrap();
    }

    async fn opt_reply(&mut self) -> OptReply {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).await.unwrap();
        assert_eq!(u64::from_be_bytes(h[0..8].try_into().unwrap()), REPLY_MAGIC);
        let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut data = vec![0u8; len as usize];
        self.s.read_exact(&mut data).await.unwrap();
        OptReply { option, kind, data }
    }

    fn go_data(name: &str) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend(name.as_bytes());
        d.extend(1u16.to_be_bytes());
        d.extend(3u16.to_be_bytes()); // NBD_INFO_BLOCK_SIZE
        d
    }

    /// NBD_OPT_GO (7) or NBD_OPT_INFO (6): (export size, transmission flags) or the
    /// error reply type.
    async fn go(&mut self, option: u32, name: &str) -> Result<(u64, u16), u32> {
        self.option(option, &Self::go_data(name)).await;
        let mut size_flags = None;
        let mut block = false;
        loop {
            let r = self.opt_reply().await;
            assert_eq!(r.option, option);
            match r.kind {
                1 => break, // ACK
                3 => {
                    let t = u16::from_be_bytes([r.data[0], r.data[1]]);
                    if t == 0 {
                        assert_eq!(r.data.len(), 12);
                        let size = u64::from_be_bytes(r.data[2..10].try_into().unwrap());
                        size_flags = Some((size, u16::from_be_bytes([r.data[10], r.data[11]])));
                    } else if t == 3 {
                        assert_eq!(r.data.len(), 14);
                        assert_eq!(u32::from_be_bytes(r.data[10..14].try_into().unwrap()), 32 << 20);
                        block = true;
                    }
                }
                e if e & 0x8000_0000 != 0 => return Err(e),
                other => panic!("unexpected reply type {other}"),
            }
        }
        assert!(block, "the block size was asked for");
        Ok(size_flags.expect("NBD_INFO_EXPORT before ACK"))
    }

    async fn connect(addr: SocketAddr, name: &str) -> Client {
        let mut c = Client::hello(addr, 3).await;
        c.go(7, name).await.unwrap();
        c
    }

    async fn request(&mut self, cmd: u16, flags: u16, cookie: u64, offset: u64, len: u32, data: &[u8]) {
        let mut b = REQ_MAGIC.to_be_bytes().to_vec();
        b.extend(flags.to_be_bytes());
        b.extend(cmd.to_be_bytes());
        b.extend(cookie.to_be_bytes());
        b.extend(offset.to_be_bytes());
        b.extend(len.to_be_bytes());
        b.extend(data);
        self.s.write_all(&b).await.unwrap();
    }

    /// A simple reply: (error, cookie); reads `data_len` bytes of data on success.
    async fn reply(&mut self, data_len: usize) -> (u32, u64, Vec<u8>) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).await.unwrap();
        assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), SIMPLE_MAGIC);
        let error = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let mut data = Vec::new();
        if error == 0 && data_len > 0 {
            data = vec![0u8; data_len];
            self.s.read_exact(&mut data).await.unwrap();
        }
        (error, cookie, data)
    }

    /// True if the server closed the connection (EOF within 5 s).
    async fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(tokio::time::timeout(Duration::from_secs(5), self.s.read(&mut b)).await, Ok(Ok(0)) | Ok(Err(_)))
    }

    /// Keep `outstanding` 4 KiB reads in flight until `window` has passed, then drain:
    /// (reads completed within the window, reads sent in all).
    async fn keep_busy(&mut self, outstanding: u64, window: Duration) -> (u64, u64) {
        let deadline = Instant::now() + window;
        let mut cookie = 0u64;
        for _ in 0..outstanding {
            self.request(0, 0, cookie, (cookie % 256) * 4096, 4096, &[]).await;
            cookie += 1;
        }
        let (mut done, mut in_flight) = (0u64, outstanding);
        while in_flight > 0 {
            assert_eq!(self.reply(4096).await.0, 0);
            in_flight -= 1;
            if Instant::now() < deadline {
                done += 1;
                self.request(0, 0, cookie, (cookie % 256) * 4096, 4096, &[]).await;
                cookie += 1;
                in_flight += 1;
            }
        }
        (done, cookie)
    }
}

#[test]
fn negotiation_write_read_flush_errors_disconnect() {
    let img = image("basic", 1 << 20);
    let (gw, lines) = gateway(&[("disk", &img, 0), ("other", &img, 1)], "");
    let addr = gw.addr().unwrap();
    rt().block_on(async {
        let mut c = Client::hello(addr, 3).await;
        // NBD_OPT_LIST: one NBD_REP_SERVER per export, then ACK.
        c.option(3, &[]).await;
        let mut names = Vec::new();
        loop {
            let r = c.opt_reply().await;
            if r.kind == 1 {
                break;
            }
            assert_eq!(r.kind, 2);
            let n = u32::from_be_bytes(r.data[0..4].try_into().unwrap()) as usize;
            names.push(String::from_utf8(r.data[4..4 + n].to_vec()).unwrap());
        }
        assert_eq!(names, ["disk", "other"]);
        // Unknown option → NBD_REP_ERR_UNSUP; STARTTLS without TLS configured too.
        c.option(99, &[1, 2, 3]).await;
        assert_eq!(c.opt_reply().await.kind, 0x8000_0001);
        c.option(5, &[]).await;
        assert_eq!(c.opt_reply().await.kind, 0x8000_0001);
        // INFO / GO on an unknown export → NBD_REP_ERR_UNKNOWN, negotiation goes on.
        assert_eq!(c.go(6, "nope").await, Err(0x8000_0006));
        assert_eq!(c.go(7, "nope").await, Err(0x8000_0006));
        // Inconsistent GO data → NBD_REP_ERR_INVALID.
        c.option(7, &[0, 0, 0, 50, b'x', 0, 0]).await;
        assert_eq!(c.opt_reply().await.kind, 0x8000_0003);
        // INFO then GO on the real export.
        let (size, flags) = c.go(6, "disk").await.unwrap();
        assert_eq!(size, 1 << 20);
        assert_eq!(flags & 0b1, 1, "HAS_FLAGS");
        assert_ne!(flags & (1 << 2), 0, "SEND_FLUSH");
        assert_ne!(flags & (1 << 5), 0, "SEND_TRIM");
        assert_ne!(flags & (1 << 6), 0, "SEND_WRITE_ZEROES");
        assert_eq!(flags & (1 << 1), 0, "not read-only");
        assert_eq!(c.go(7, "disk").await.unwrap().0, 1 << 20);

        // Transmission: write a pattern, read it back.
        let pattern: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
        c.request(1, 0, 11, 4096, pattern.len() as u32, &pattern).await;
        assert_eq!(c.reply(0).await, (0, 11, vec![]));
        c.request(0, 0, 12, 4096, pattern.len() as u32, &[]).await;
        let (e, cookie, data) = c.reply(pattern.len()).await;
        assert_eq!((e, cookie), (0, 12));
        assert!(data == pattern, "read back what was written");
        // FUA write and flush.
        c.request(1, 1, 13, 0, 512, &[0x5a; 512]).await;
        assert_eq!(c.reply(0).await.0, 0);
        c.request(3, 0, 14, 0, 0, &[]).await;
        assert_eq!(c.reply(0).await, (0, 14, vec![]));
        // Out of range: read → EINVAL, write → ENOSPC (its payload is consumed).
        c.request(0, 0, 15, (1 << 20) - 512, 1024, &[]).await;
        assert_eq!(c.reply(1024).await, (EINVAL, 15, vec![]));
        c.request(0, 0, 16, u64::MAX - 10, 512, &[]).await;
        assert_eq!(c.reply(512).await.0, EINVAL);
        c.request(1, 0, 17, 1 << 20, 4, &[1, 2, 3, 4]).await;
        assert_eq!(c.reply(0).await, (ENOSPC, 17, vec![]));
        // Unsupported command (NBD_CMD_CACHE) and unknown flag → EINVAL, connection kept.
        c.request(5, 0, 18, 0, 4096, &[]).await;
        assert_eq!(c.reply(0).await, (EINVAL, 18, vec![]));
        c.request(0, 1 << 4, 19, 0, 16, &[]).await;
        assert_eq!(c.reply(16).await.0, EINVAL);
        c.request(0, 0, 20, 0, 512, &[]).await;
        assert_eq!(c.reply(512).await, (0, 20, vec![0x5a; 512]));
        // NBD_CMD_DISC: the server closes.
        c.request(2, 0, 21, 0, 0, &[]).await;
        assert!(c.closed().await);
    });
    let stats: Stats = gw.shutdown();
    let on_disk = std::fs::read(&img).unwrap();
    assert_eq!(&on_disk[..512], &[0x5a; 512][..]);
    assert_eq!(on_disk[4096 + 1], 7);
    let t0 = stats.tenant(0).unwrap();
    assert_eq!((t0.ops, t0.reads, t0.writes, t0.flushes, t0.errors), (4, 2, 2, 1, 5));
    assert_eq!(t0.bytes, 2 * 65536 + 512 + 512);
    assert!(t0.p99_us > 0.0 && t0.mean_us > 0.0);
    assert_eq!(stats.tenant(1).unwrap().ops, 0);
    assert_eq!((stats.connections, stats.protocol_errors), (1, 0));
    assert!(lines.lock().unwrap().is_empty(), "{:?}", lines.lock().unwrap());
}

#[test]
fn trim_and_write_zeroes_go_through_the_policy() {
    let img = image("zeroes", 1 << 20);
    std::fs::write(&img, vec![0x33u8; 1 << 20]).unwrap();
    let (gw, lines) = gateway(&[("disk", &img, 0)], "");
    let addr = gw.addr().unwrap();
    rt().block_on(async {
        let mut c = Client::connect(addr, "disk").await;
        // WRITE_ZEROES (6): a hole, then with NO_HOLE (flag 2) and FUA (flag 1).
        c.request(6, 0, 1, 4096, 8192, &[]).await;
        assert_eq!(c.reply(0).await, (0, 1, vec![]));
        c.request(6, 3, 2, 65536, 100, &[]).await;
        assert_eq!(c.reply(0).await, (0, 2, vec![]));
        c.request(0, 0, 3, 4096, 8192, &[]).await;
        assert_eq!(c.reply(8192).await, (0, 3, vec![0; 8192]));
        c.request(0, 0, 4, 65532, 108, &[]).await;
        let (e, _, data) = c.reply(108).await;
        assert_eq!((e, &data[..4], &data[4..104], &data[104..]), (0, &[0x33; 4][..], &[0; 100][..], &[0x33; 4][..]));
        // TRIM (4) with FUA: answered; the file keeps its size.
        c.request(4, 1, 5, 131072, 65536, &[]).await;
        assert_eq!(c.reply(0).await, (0, 5, vec![]));
        // Out of range: trim → EINVAL, write-zeroes → ENOSPC; NO_HOLE on a trim, a zero
        // length → EINVAL. Nothing follows these headers.
        c.request(4, 0, 6, (1 << 20) - 512, 1024, &[]).await;
        assert_eq!(c.reply(0).await, (EINVAL, 6, vec![]));
        c.request(6, 0, 7, 1 << 20, 1, &[]).await;
        assert_eq!(c.reply(0).await, (ENOSPC, 7, vec![]));
        c.request(4, 2, 8, 0, 512, &[]).await;
        assert_eq!(c.reply(0).await, (EINVAL, 8, vec![]));
        c.request(6, 0, 9, 0, 0, &[]).await;
        assert_eq!(c.reply(0).await, (EINVAL, 9, vec![]));
        // A write-zeroes longer than the largest READ/WRITE is fine (no payload).
        c.request(6, 0, 10, 0, 1 << 20, &[]).await;
        assert_eq!(c.reply(0).await, (0, 10, vec![]));
        c.request(2, 0, 11, 0, 0, &[]).await;
        assert!(c.closed().await);
    });
    let stats: Stats = gw.shutdown();
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 1 << 20);
    assert!(std::fs::read(&img).unwrap().iter().all(|&b| b == 0));
    // The policy saw them as writes: 3 write-zeroes of their length, 1 trim of 0 bytes.
    let t0 = stats.tenant(0).unwrap();
    assert_eq!((t0.ops, t0.reads, t0.writes, t0.errors), (6, 2, 4, 4));
    assert_eq!(t0.bytes, 8192 + 100 + (1 << 20) + 8192 + 108);
    assert!(lines.lock().unwrap().is_empty(), "{:?}", lines.lock().unwrap());
}

#[test]
fn export_name_option_with_and_without_zeroes() {
    let img = image("oldopt", 8192);
    let (gw, lines) = gateway(&[("d", &img, 0)], "");
    rt().block_on(async {
        // Client without NO_ZEROES: size, flags and 124 zero bytes.
        let mut c = Client::hello(gw.addr().unwrap(), 1).await;
        c.option(1, b"d").await;
        let mut r = [0u8; 134];
        c.s.read_exact(&mut r).await.unwrap();
        assert_eq!(u64::from_be_bytes(r[0..8].try_into().unwrap()), 8192);
        assert!(r[10..].iter().all(|&b| b == 0));
        c.request(0, 0, 1, 0, 8, &[]).await;
        assert_eq!(c.reply(8).await, (0, 1, vec![0; 8]));
        // With NO_ZEROES: exactly 10 bytes, then transmission.
        let mut c = Client::hello(gw.addr().unwrap(), 3).await;
        c.option(1, b"d").await;
        let mut r = [0u8; 10];
        c.s.read_exact(&mut r).await.unwrap();
        c.request(0, 0, 2, 0, 8, &[]).await;
        assert_eq!(c.reply(8).await.1, 2);
        // Unknown export: the only answer the spec allows is closing.
        let mut c = Client::hello(gw.addr().unwrap(), 3).await;
        c.option(1, b"missing").await;
        assert!(c.closed().await);
        // NBD_OPT_ABORT: ACK, then closed.
        let mut c = Client::hello(gw.addr().unwrap(), 3).await;
        c.option(2, &[]).await;
        assert_eq!(c.opt_reply().await.kind, 1);
        assert!(c.closed().await);
    });
    let stats = gw.shutdown();
    assert_eq!(stats.tenant(0).unwrap().ops, 2);
    assert_eq!(stats.protocol_errors, 1);
    let l = lines.lock().unwrap();
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].contains("unknown export \"missing\""), "{l:?}");
}

#[test]
fn malformed_packets_close_only_that_connection() {
    let img = image("malformed", 1 << 20);
    let (gw, lines) = gateway(&[("d", &img, 0)], "");
    let addr = gw.addr().unwrap();
    let peers = rt().block_on(async {
        let mut good = Client::connect(addr, "d").await;
        let mut peers = Vec::new();

        // Bad request magic.
        let mut bad = Client::connect(addr, "d").await;
        peers.push(bad.s.local_addr().unwrap());
        bad.s.write_all(&[0xde, 0xad, 0xbe, 0xef]).await.unwrap();
        bad.s.write_all(&[0u8; 24]).await.unwrap();
        assert!(bad.closed().await);

        // A write longer than 32 MiB.
        let mut big = Client::connect(addr, "d").await;
        peers.push(big.s.local_addr().unwrap());
        big.request(1, 0, 1, 0, (32 << 20) + 1, &[]).await;
        assert!(big.closed().await);

        // A truncated request header, then the client half-closes.
        let mut cut = Client::connect(addr, "d").await;
        peers.push(cut.s.local_addr().unwrap());
        cut.s.write_all(&REQ_MAGIC.to_be_bytes()).await.unwrap();
        cut.s.write_all(&[0u8; 6]).await.unwrap();
        cut.s.shutdown().await.unwrap();
        assert!(cut.closed().await);

        // Bad option magic during negotiation.
        let mut neg = Client::hello(addr, 3).await;
        peers.push(neg.s.local_addr().unwrap());
        neg.s.write_all(b"IHAVEOPX\0\0\0\x07\0\0\0\0").await.unwrap();
        assert!(neg.closed().await);

        // Unknown client flags.
        let mut flags = Client::hello(addr, 0x80).await;
        peers.push(flags.s.local_addr().unwrap());
        assert!(flags.closed().await);

        // The first client never noticed.
        good.request(1, 0, 7, 512, 4, &[9, 8, 7, 6]).await;
        assert_eq!(good.reply(0).await, (0, 7, vec![]));
        good.request(0, 0, 8, 512, 4, &[]).await;
        assert_eq!(good.reply(4).await, (0, 8, vec![9, 8, 7, 6]));
        // And new clients are still served.
        let mut late = Client::connect(addr, "d").await;
        late.request(0, 0, 9, 512, 4, &[]).await;
        assert_eq!(late.reply(4).await.2, vec![9, 8, 7, 6]);
        peers
    });
    let stats = gw.shutdown();
    assert_eq!(stats.protocol_errors, 5);
    assert_eq!(stats.connections, 7);
    let l = lines.lock().unwrap().clone();
    assert_eq!(l.len(), 5, "{l:?}");
    let wants = [
        "bad request magic 0xdeadbeef (expected 0x25609513) during transmission",
        "request length 33554433 bytes exceeds the maximum of 33554432 bytes",
        "truncated request: connection ended after 10 of 28 bytes",
        "bad option request magic",
        "unknown client flags 0x80",
    ];
    for (peer, want) in peers.iter().zip(wants) {
        let line =
            l.iter().find(|x| x.contains(&peer.to_string())).unwrap_or_else(|| panic!("no line for {peer}: {l:?}"));
        assert!(line.contains(want), "{line:?} should say {want:?}");
        assert!(line.starts_with(&format!("client {peer}: ")), "{line}");
    }
}

/// Two tenants, each keeping `outstanding` 4 KiB reads in flight for `window`; returns
/// the reads each completed within the window and the gateway's statistics.
fn contend(policy: &str, tag: &str, classes: [Option<u32>; 2]) -> ([u64; 2], Stats, f64) {
    const OUTSTANDING: u64 = 16;
    let window = Duration::from_millis(1500);
    let a = image(&format!("{tag}-a"), 1 << 20);
    let b = image(&format!("{tag}-b"), 1 << 20);
    let extra = format!(r#","policy":{policy},"depth":1,"iops":2000"#);
    let (gw, _) = gateway_classes(&[("a", &a, 0, classes[0]), ("b", &b, 1, classes[1])], &extra);
    let addr = gw.addr().unwrap();
    let counts = rt().block_on(async move {
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let run = |name: &'static str| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                let mut c = Client::connect(addr, name).await;
                barrier.wait().await;
                c.keep_busy(OUTSTANDING, window).await
            })
        };
        let (ta, tb) = (run("a"), run("b"));
        let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
        [ra, rb]
    });
    let stats = gw.shutdown();
    // Every request the clients sent completed and was counted.
    assert_eq!(stats.tenant(0).unwrap().ops, counts[0].1);
    assert_eq!(stats.tenant(1).unwrap().ops, counts[1].1);
    let done = [counts[0].0, counts[1].0];
    let iops = (done[0] + done[1]) as f64 / window.as_secs_f64();
    (done, stats, iops)
}

#[test]
fn wf2q_weights_2_to_1_shape_two_tenants() {
    let (done, stats, iops) = contend(r#"{"kind":"wf2q","weights":[2,1]}"#, "wf2q", [None, None]);
    let ratio = done[0] as f64 / done[1] as f64;
    eprintln!("wf2q+ 2:1 at 2000 IOPS, depth 1: completed {done:?}, ratio {ratio:.3}, {iops:.0} IOPS");
    assert_eq!(stats.policy, "wf2q+");
    assert!((ratio / 2.0 - 1.0).abs() <= 0.10, "ratio {ratio} not within 10 % of 2");
    // Never above the emulated capacity; the lower bound is generous (a loaded CI machine).
    assert!((1000.0..=2100.0).contains(&iops), "emulated capacity 2000 IOPS, measured {iops}");
    // Tenant 0 waits less in the queue than tenant 1.
    assert!(stats.tenant(0).unwrap().mean_us < stats.tenant(1).unwrap().mean_us);
}

#[test]
fn export_classes_reach_a_policy_keyed_by_class() {
    // Tenant 0 is class 1 and tenant 1 class 0: by class, weights 2:1 favour tenant 1.
    let (done, _, _) = contend(r#"{"kind":"wf2q","weights":[2,1],"by":"class"}"#, "byclass", [Some(1), Some(0)]);
    let ratio = done[1] as f64 / done[0] as f64;
    eprintln!("wf2q+ by class 2:1: completed {done:?}, tenant 1 : tenant 0 = {ratio:.3}");
    assert!((ratio / 2.0 - 1.0).abs() <= 0.10, "ratio {ratio} not within 10 % of 2");
}

#[test]
fn emulated_capacity_at_depth_4_and_full_speed_without_it() {
    let img = image("pace", 1 << 20);
    let run = |extra: &str| {
        let (gw, _) = gateway(&[("d", &img, 0)], extra);
        let addr = gw.addr().unwrap();
        let window = Duration::from_millis(1000);
        let done = rt().block_on(async move {
            let mut c = Client::connect(addr, "d").await;
            c.keep_busy(16, window).await.0
        });
        drop(gw.shutdown());
        done as f64 / window.as_secs_f64()
    };
    let paced = run(r#","depth":4,"iops":1000"#);
    let free = run(r#","depth":4"#);
    eprintln!("depth 4: emulated 1000 IOPS → {paced:.0} IOPS; unpaced → {free:.0} IOPS");
    assert!((800.0..=1050.0).contains(&paced), "emulated 1000 IOPS, measured {paced}");
    assert!(free > 2.0 * paced, "without --iops the page-cached file is much faster: {free}");
}

#[test]
fn largest_transfer_round_trips() {
    // 32 MiB, the advertised maximum block size, in one WRITE and one READ.
    let img = image("big", 33 << 20);
    let (gw, _) = gateway(&[("d", &img, 0)], "");
    rt().block_on(async {
        let mut c = Client::connect(gw.addr().unwrap(), "d").await;
        let data: Vec<u8> = (0..(32u32 << 20)).map(|i| (i % 253) as u8).collect();
        c.request(1, 0, 1, 1 << 20, 32 << 20, &data).await;
        assert_eq!(c.reply(0).await, (0, 1, vec![]));
        c.request(0, 0, 2, 1 << 20, 32 << 20, &[]).await;
        let (e, cookie, back) = c.reply(32 << 20).await;
        assert_eq!((e, cookie), (0, 2));
        assert!(back == data);
    });
    let t = gw.shutdown().tenants[0].clone();
    assert_eq!((t.ops, t.bytes), (2, 64 << 20));
}

#[test]
fn fcfs_shares_equally_between_equal_clients() {
    let (done, stats, iops) = contend(r#"{"kind":"fcfs"}"#, "fcfs", [None, None]);
    let ratio = done[0] as f64 / done[1] as f64;
    eprintln!("fcfs at 2000 IOPS, depth 1: completed {done:?}, ratio {ratio:.3}, {iops:.0} IOPS");
    assert_eq!(stats.policy, "fcfs");
    assert!((ratio - 1.0).abs() <= 0.10, "ratio {ratio} not within 10 % of 1");
    // Never above the emulated capacity; the lower bound is generous (a loaded CI machine).
    assert!((1000.0..=2100.0).contains(&iops), "emulated capacity 2000 IOPS, measured {iops}");
}

#[test]
fn duration_stops_the_gateway_by_itself() {
    // SIGTERM / SIGINT are tested on a `storqos serve` child process (tests/python/test_serve.py):
    // a test must not signal its own test runner.
    let img = image("signals", 4096);
    let cfg = Config::from_json(&format!(
        r#"{{"listen":"127.0.0.1:0","exports":[{{"name":"d","path":"{}","tenant":0}}],"duration_s":0.3}}"#,
        img.display()
    ))
    .unwrap();
    let t0 = Instant::now();
    let stats = start_with(cfg, Options::default()).unwrap().wait();
    // Not before its time; the upper bound only catches a gateway that never stops.
    assert!(t0.elapsed() >= Duration::from_millis(290), "{:?}", t0.elapsed());
    assert!(stats.elapsed_s >= 0.29 && stats.elapsed_s < 60.0, "{}", stats.elapsed_s);
}

/// Seeded random bytes (xorshift64*: no dependency needed for a test's garbage).
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn random_garbage_in_either_phase_never_stops_the_server() {
    let img = image("garbage", 1 << 20);
    let (gw, lines) = gateway(&[("d", &img, 0)], "");
    let addr = gw.addr().unwrap();
    const CLIENTS: u64 = 60;
    let t0 = Instant::now();
    rt().block_on(async {
        let mut good = Client::connect(addr, "d").await;
        for seed in 0..CLIENTS {
            let bytes = garbage(seed, 1 + (seed as usize * 37) % 300);
            let mut c = if seed % 2 == 0 {
                // Negotiation: right after the greeting, instead of the client flags.
                let mut s = TcpStream::connect(addr).await.unwrap();
                let mut g = [0u8; 18];
                s.read_exact(&mut g).await.unwrap();
                Client { s }
            } else {
                // Transmission: after a proper GO.
                Client::connect(addr, "d").await
            };
            // The server may close before it has read it all: a failed write is fine.
            let _ = c.s.write_all(&bytes).await;
            let _ = c.s.shutdown().await;
            assert!(c.closed().await, "seed {seed}: the connection was not closed");
            // The others are still served, every time.
            good.request(0, 0, seed, seed * 512, 512, &[]).await;
            assert_eq!(good.reply(512).await, (0, seed, vec![0; 512]), "seed {seed}");
        }
    });
    let stats = gw.shutdown();
    let intervals = 1 + (t0.elapsed().as_secs_f64() / storqos_gateway::notices::PEER_INTERVAL.as_secs_f64()) as usize;
    assert_eq!(stats.connections, CLIENTS + 1);
    // Each bad connection logged at most one line, naming its client, or was counted in
    // a line saying how many lines the limit per address held back.
    let l = lines.lock().unwrap();
    let (counts, said): (Vec<&String>, Vec<&String>) = l.iter().partition(|x| x.contains("held back over the last"));
    let held: u64 = counts.iter().map(|x| x.split(' ').next().and_then(|n| n.parse::<u64>().ok()).unwrap()).sum();
    assert!(said.len() as u64 + held <= CLIENTS, "{l:?}");
    assert!(said.len() <= storqos_gateway::notices::PEER_LINES as usize * intervals, "{l:?}");
    assert!(said.iter().all(|x| x.starts_with("client 127.0.0.1:")), "{l:?}");
}

#[test]
fn check_opens_the_exports_and_builds_the_policy_without_listening() {
    let a = image("check-a", 1 << 20);
    // A port in use by nobody but named: check never binds, so it reports it as given.
    let json = |path: &str, policy: &str| {
        format!(r#"{{"listen":"127.0.0.1:9","exports":[{{"name":"a","path":"{path}","tenant":0}}],"policy":{policy}}}"#)
    };
    let cfg = Config::from_json(&json(&a.display().to_string(), r#"{"kind":"wf2q","weights":[2]}"#)).unwrap();
    let info = storqos_gateway::check(&cfg).unwrap();
    assert_eq!((info.listen.as_str(), info.policy.as_str()), ("127.0.0.1:9", "wf2q+"));
    assert_eq!((info.exports[0].name.as_str(), info.exports[0].size_bytes), ("a", 1 << 20));
    // A missing file is found by check, as start would find it.
    let cfg = Config::from_json(&json("/nonexistent/storqos.img", r#"{"kind":"fcfs"}"#)).unwrap();
    let e = storqos_gateway::check(&cfg).unwrap_err().to_string();
    assert!(e.contains("exports[0].path: /nonexistent/storqos.img"), "{e}");
}

/// Start a gateway from a JSON exports array and extra top-level fields.
fn gateway_json(exports: &str, extra: &str) -> (Handle, Lines) {
    let cfg = Config::from_json(&format!(r#"{{"listen":"127.0.0.1:0","exports":{exports}{extra}}}"#)).unwrap();
    let lines: Lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let log: storqos_gateway::Logger = Arc::new(move |m: &str| sink.lock().unwrap().push(m.to_string()));
    (start_with(cfg, Options { log: Some(log), ..Options::default() }).unwrap(), lines)
}

#[test]
fn read_only_exports_and_allow_lists() {
    let img = image("ro", 1 << 20);
    let exports = format!(
        r#"[{{"name":"ro","path":"{p}","tenant":0,"read_only":true}},
            {{"name":"lan","path":"{p}","tenant":1,"allow":["10.0.0.0/8"]}},
            {{"name":"local","path":"{p}","tenant":2,"allow":["127.0.0.1","::1"]}}]"#,
        p = img.display()
    );
    let (h, lines) = gateway_json(&exports, "");
    rt().block_on(async {
        // Read-only: the handshake says so (flag bit 1), writes get EPERM (1), reads work.
        let mut c = Client::hello(h.addr().unwrap(), 3).await;
        let (_, flags) = c.go(7, "ro").await.unwrap();
        assert_ne!(flags & 2, 0, "NBD_FLAG_READ_ONLY");
        c.request(1, 0, 1, 0, 4096, &[0xab; 4096]).await;
        assert_eq!(c.reply(0).await.0, 1, "EPERM");
        c.request(4, 0, 2, 0, 4096, &[]).await; // trim
        assert_eq!(c.reply(0).await.0, 1, "EPERM");
        c.request(0, 0, 3, 0, 4096, &[]).await;
        assert_eq!(c.reply(4096).await, (0, 3, vec![0; 4096]));
        // 127.0.0.1 is not in 10.0.0.0/8: GO is answered as for an export that does not
        // exist (NBD_REP_ERR_UNKNOWN, 2^31 + 6: not ERR_POLICY, which told the client the
        // name is served to others), the listing leaves the export out, and the client
        // may go on negotiating.
        let mut c = Client::hello(h.addr().unwrap(), 3).await;
        assert_eq!(c.go(7, "lan").await, Err(0x8000_0006));
        assert_eq!(c.go(6, "lan").await, c.go(6, "nonexistent").await);
        c.option(3, &[]).await; // NBD_OPT_LIST
        let mut names = Vec::new();
        loop {
            let r = c.opt_reply().await;
            if r.kind == 1 {
                break;
            }
            names.push(String::from_utf8(r.data[4..].to_vec()).unwrap());
        }
        assert_eq!(names, ["ro", "local"]);
        assert!(c.go(7, "local").await.is_ok());
    });
    drop(h.shutdown());
    assert!(lines.lock().unwrap().iter().any(|l| l.contains("address 127.0.0.1 is not allowed to use export \"lan\"")));
    assert!(std::fs::read(&img).unwrap().iter().all(|&b| b == 0), "nothing was written");
}

#[test]
fn connection_limits_and_timeouts() {
    let img = image("limits", 1 << 20);
    let exports = format!(r#"[{{"name":"a","path":"{}","tenant":0}}]"#, img.display());
    let limits = r#","limits":{"max_connections":3,"max_connections_per_export":2,
                    "handshake_timeout_s":0.3,"idle_timeout_s":0.5}"#;
    let (h, lines) = gateway_json(&exports, limits);
    rt().block_on(async {
        let (mut a, mut b) =
            (Client::connect(h.addr().unwrap(), "a").await, Client::connect(h.addr().unwrap(), "a").await);
        // A third connection to the export: refused by policy; it still counts as open.
        let mut c = Client::hello(h.addr().unwrap(), 3).await;
        assert_eq!(c.go(7, "a").await, Err(0x8000_0002));
        // A fourth connection is over the gateway's limit of 3: closed at once.
        let mut d = TcpStream::connect(h.addr().unwrap()).await.unwrap();
        let mut buf = [0u8; 18];
        let n = tokio::time::timeout(Duration::from_secs(5), d.read(&mut buf)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0, "closed without a greeting");
        // A client that never finishes its handshake is cut off after 0.3 s.
        assert!(c.closed().await);
        // With a request in flight a connection is not idle; with nothing, after 0.5 s it is closed.
        a.request(0, 0, 9, 0, 4096, &[]).await;
        assert_eq!(a.reply(4096).await.1, 9);
        let t0 = Instant::now();
        assert!(a.closed().await && b.closed().await);
        assert!(t0.elapsed() < Duration::from_secs(3));
        // Slots are given back: a new client is served.
        let mut e = Client::connect(h.addr().unwrap(), "a").await;
        e.request(0, 0, 1, 0, 4096, &[]).await;
        assert_eq!(e.reply(4096).await.0, 0);
    });
    drop(h.shutdown());
    let lines = lines.lock().unwrap();
    let said = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(said("connection limit of 3 reached"), 1, "{lines:?}");
    assert_eq!(said("no handshake within 0.3 s"), 1, "{lines:?}");
    assert_eq!(said("has its limit of 2 connections"), 1, "{lines:?}");
    assert!(said("idle for 0.5 s") == 1, "{lines:?}");
}

#[test]
fn clients_without_fixed_newstyle_are_refused_and_long_names_are_cut_in_the_log() {
    let img = image("oldstyle", 1 << 20);
    let (h, lines) = gateway(&[("a", &img, 0)], "");
    rt().block_on(async {
        let mut c = Client::hello(h.addr().unwrap(), 0).await; // no FIXED_NEWSTYLE
        assert!(c.closed().await);
        let mut c = Client::hello(h.addr().unwrap(), 3).await;
        c.option(1, "n".repeat(4000).as_bytes()).await; // NBD_OPT_EXPORT_NAME of an unknown export
        assert!(c.closed().await);
    });
    drop(h.shutdown());
    let lines = lines.lock().unwrap();
    assert!(lines.iter().any(|l| l.contains("client without the FIXED_NEWSTYLE flag")), "{lines:?}");
    let long = lines.iter().find(|l| l.contains("unknown export")).expect("logged");
    assert!(long.len() < 300 && long.contains("(4000 bytes)"), "{long}");
}

/// GET `path` from `addr` over HTTP/1.1: (status line, body).
async fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn metrics_count_what_the_clients_did() {
    let img = image("metrics", 1 << 20);
    let exports = format!(r#"[{{"name":"a","path":"{}","tenant":0}}]"#, img.display());
    let (h, _) = gateway_json(&exports, r#","metrics":"127.0.0.1:0","slos":{"0":0.25}"#);
    let at = h.info().metrics.clone().expect("the bound metrics address");
    rt().block_on(async {
        let mut c = Client::connect(h.addr().unwrap(), "a").await;
        for cookie in 0..3 {
            c.request(0, 0, cookie, 0, 4096, &[]).await;
            assert_eq!(c.reply(4096).await.0, 0);
        }
        c.request(1, 0, 9, 0, 8192, &[1; 8192]).await;
        assert_eq!(c.reply(0).await.0, 0);
        let (status, body) = http_get(&at, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        for line in [
            r#"storqos_requests_total{tenant="0",op="read"} 3"#,
            r#"storqos_requests_total{tenant="0",op="write"} 1"#,
            r#"storqos_bytes_total{tenant="0"} 20480"#,
            r#"storqos_response_seconds_count{tenant="0"} 4"#,
            // The tenant's 250 ms SLO is one of the buckets, and all four are within it.
            r#"storqos_response_seconds_bucket{le="0.25",tenant="0"} 4"#,
            r#"storqos_slo_met_total{tenant="0"} 4"#,
            r#"storqos_slo_compliance_ratio{tenant="0"} 1.0"#,
            "storqos_open_connections 1",
            "storqos_accepted_connections_total 1",
            r#"storqos_inflight_requests{tenant="0"} 0"#,
        ] {
            assert!(body.contains(line), "{line} not in\n{body}");
        }
        assert!(body.trim_end().ends_with("# EOF"));
        assert_eq!(http_get(&at, "/").await.0, "HTTP/1.1 404 Not Found");
    });
    drop(h.shutdown());
}

/// File descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

#[test]
fn idle_metrics_connections_hold_few_descriptors_and_never_keep_nbd_clients_out() {
    use storqos_gateway::metrics::MAX_SCRAPES;
    let img = image("metrics-flood", 1 << 20);
    let exports = format!(r#"[{{"name":"a","path":"{}","tenant":0}}]"#, img.display());
    let (h, _) = gateway_json(&exports, r#","metrics":"127.0.0.1:0""#);
    let at = h.info().metrics.clone().expect("the bound metrics address");
    rt().block_on(async {
        // Within the listen backlog (128 here) past the scrapes answered: more would
        // wait in connect() for a scrape to time out.
        const IDLE: usize = 120;
        let before = open_fds();
        let mut idle = Vec::new();
        for _ in 0..IDLE {
            idle.push(TcpStream::connect(&at).await.unwrap()); // and say nothing
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Ours (IDLE) and the gateway's accepted ones: at most MAX_SCRAPES of those,
        // where each idle connection took one of the gateway's descriptors before.
        let taken = open_fds() - before;
        assert!(taken <= IDLE + MAX_SCRAPES + 4, "{taken} descriptors for {IDLE} idle connections");
        let t0 = Instant::now();
        let mut c = Client::connect(h.addr().unwrap(), "a").await;
        c.request(0, 0, 1, 0, 4096, &[]).await;
        assert_eq!(c.reply(4096).await.0, 0);
        assert!(t0.elapsed() < Duration::from_secs(2), "an NBD read took {:?}", t0.elapsed());
        drop(idle); // their scrapes end, the waiting ones are accepted and end too
        let (status, body) = tokio::time::timeout(Duration::from_secs(5), http_get(&at, "/metrics")).await.unwrap();
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.contains(r#"storqos_requests_total{tenant="0",op="read"} 1"#), "{body}");
    });
    drop(h.shutdown());
}

/// One command on the control socket at `path`, its JSON reply.
async fn control(path: &std::path::Path, cmd: &str) -> serde_json::Value {
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while s.read(&mut b).await.unwrap() == 1 && b[0] != b'\n' {
        out.push(b[0]);
    }
    serde_json::from_slice(&out).unwrap()
}

/// Keep 8 reads in flight until `until`, recording when each completes; returns
/// (completion times, requests sent, replies received).
async fn reads_until(mut c: Client, until: Instant) -> (Vec<Instant>, u64, u64) {
    let (mut sent, mut got, mut times) = (0u64, 0u64, Vec::new());
    for _ in 0..8 {
        c.request(0, 0, sent, (sent % 64) * 4096, 4096, &[]).await;
        sent += 1;
    }
    while got < sent {
        assert_eq!(c.reply(4096).await.0, 0);
        got += 1;
        times.push(Instant::now());
        if Instant::now() < until {
            c.request(0, 0, sent, (sent % 64) * 4096, 4096, &[]).await;
            sent += 1;
        }
    }
    (times, sent, got)
}

#[test]
fn weights_changed_live_move_the_shares_within_2_s_and_lose_nothing() {
    let img = image("live", 1 << 20);
    let sock = std::env::temp_dir().join(format!("storqos-gw-test-{}-ctl.sock", std::process::id()));
    let exports = format!(
        r#"[{{"name":"a","path":"{p}","tenant":0}},{{"name":"b","path":"{p}","tenant":1}}]"#,
        p = img.display()
    );
    let extra = format!(
        r#","policy":{{"kind":"wf2q","weights":[1,1]}},"depth":1,"iops":1000,"control":"{}","tenant_names":{{"0":"web","1":"batch"}}"#,
        sock.display()
    );
    let (h, _) = gateway_json(&exports, &extra);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);
    let (a, b, t_set) = rt().block_on(async {
        let t0 = Instant::now();
        let until = t0 + Duration::from_millis(3500);
        let (ca, cb) = (Client::connect(h.addr().unwrap(), "a").await, Client::connect(h.addr().unwrap(), "b").await);
        let ta = tokio::spawn(reads_until(ca, until));
        let tb = tokio::spawn(reads_until(cb, until));
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let r = control(&sock, r#"{"cmd":"set","tenant":"batch","weight":3}"#).await;
        let t_set = Instant::now();
        assert_eq!(r["ok"], true, "{r}");
        let bad = control(&sock, r#"{"cmd":"set","tenant":"nobody","weight":3}"#).await;
        assert_eq!(bad["ok"], false);
        assert!(bad["error"].as_str().unwrap().contains("no tenant named \"nobody\" (known: web, batch)"), "{bad}");
        let stats = control(&sock, r#"{"cmd":"stats"}"#).await;
        assert_eq!(stats["policy"]["weights"], serde_json::json!([1, 3]), "{stats}");
        (ta.await.unwrap(), tb.await.unwrap(), t_set)
    });
    drop(h.shutdown());
    assert!(!sock.exists(), "the socket is removed at exit");
    // No I/O lost: every request of both clients was answered.
    assert_eq!((a.1, b.1), (a.2, b.2));
    let count = |t: &[Instant], from: Instant, to: Instant| t.iter().filter(|&&x| x >= from && x < to).count() as f64;
    let before =
        count(&b.0, t_set - Duration::from_millis(700), t_set) / count(&a.0, t_set - Duration::from_millis(700), t_set);
    let (from, to) = (t_set + Duration::from_millis(300), t_set + Duration::from_millis(2000));
    let after = count(&b.0, from, to) / count(&a.0, from, to);
    assert!((before - 1.0).abs() <= 0.1, "before: {before}");
    assert!((after - 3.0).abs() <= 0.3, "after: {after}");
}

#[test]
fn response_time_runs_until_the_reply_is_written() {
    // A 16 MiB read the page cache holds takes µs on the backend; a client that waits
    // 300 ms before reading the reply holds it in the reply path (more than the socket
    // buffers hold), and that time is the gateway's response time too.
    let img = image("replypath", 32 << 20);
    std::fs::write(&img, vec![7u8; 32 << 20]).unwrap();
    let (h, _) = gateway(&[("a", &img, 0)], "");
    rt().block_on(async {
        let mut c = Client::connect(h.addr().unwrap(), "a").await;
        c.request(0, 0, 1, 0, 16 << 20, &[]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (e, _, data) = c.reply(16 << 20).await;
        assert_eq!((e, data.len()), (0, 16 << 20));
    });
    let stats = h.shutdown();
    let t = stats.tenant(0).unwrap();
    assert_eq!(t.ops, 1);
    assert!(t.max_us >= 250_000.0, "the reply path is in the response time: {} µs", t.max_us);
}

#[test]
fn mclock_reject_at_limit_answers_enomem_and_serves_the_admitted_at_once() {
    // Tenant 0 limited to 100 IOPS, rejecting beyond a 50 ms threshold; tenant 1 free.
    let (a, b) = (image("reject-a", 1 << 20), image("reject-b", 1 << 20));
    let policy = r#","policy":{"kind":"mclock","limits":[100],"at_limit":"reject","reject_threshold_ns":50000000}"#;
    let (gw, _lines) = gateway(&[("a", &a, 0), ("b", &b, 1)], policy);
    let addr = gw.addr().unwrap();
    let (answers, other) = rt().block_on(async {
        // 40 reads sent at once: tags 0, 10, …, 50 ms lie within the threshold (6
        // admitted), the other 34 are answered ENOMEM at once.
        let mut c = Client::connect(addr, "a").await;
        let t0 = Instant::now();
        for cookie in 0..40u64 {
            c.request(0, 0, cookie, cookie * 4096, 4096, &[]).await;
        }
        let mut answers = Vec::new();
        for _ in 0..40 {
            let (e, cookie, _) = c.reply(4096).await;
            answers.push((e, cookie, t0.elapsed()));
        }
        // The unlimited tenant is not touched.
        let mut d = Client::connect(addr, "b").await;
        let (done, _) = d.keep_busy(4, Duration::from_millis(200)).await;
        (answers, done)
    });
    let ok: Vec<_> = answers.iter().filter(|a| a.0 == 0).collect();
    let rejected: Vec<_> = answers.iter().filter(|a| a.0 == ENOMEM).collect();
    // (6 when the 40 arrive within 10 ms; one more per 10 ms they take on a slow machine.)
    assert!((6..=8).contains(&ok.len()) && ok.len() + rejected.len() == 40, "{answers:?}");
    // What is admitted is served by its limit tag (≤ 50 ms), not queued behind the rest.
    assert!(ok.iter().all(|a| a.2 < Duration::from_millis(500)), "{ok:?}");
    assert!(other > 50, "tenant 1 served {other} reads in 200 ms");
    let stats = gw.shutdown();
    let t0 = stats.tenant(0).unwrap();
    assert_eq!((t0.ops, t0.rejected, t0.errors), (ok.len() as u64, rejected.len() as u64, rejected.len() as u64));
    assert_eq!(stats.tenant(1).unwrap().rejected, 0);
}

#[test]
fn exports_added_and_removed_live() {
    let (a, c) = (image("live-add-a", 1 << 20), image("live-add-c", 1 << 20));
    std::fs::write(&c, vec![0x5cu8; 1 << 20]).unwrap();
    let sock = std::env::temp_dir().join(format!("storqos-gw-test-{}-exports.sock", std::process::id()));
    let exports = format!(r#"[{{"name":"a","path":"{}","tenant":0}}]"#, a.display());
    let extra = format!(r#","control":"{}","tenant_names":{{"0":"web","1":"batch"}}"#, sock.display());
    let (h, _) = gateway_json(&exports, &extra);
    let addr = h.addr().unwrap();
    rt().block_on(async {
        // Not served yet.
        let mut probe = Client::hello(addr, 3).await;
        assert_eq!(probe.go(7, "c").await, Err(0x8000_0006));
        // Added, for tenant "batch": served, and its I/O is the tenant's.
        let add =
            format!(r#"{{"cmd":"add-export","export":{{"name":"c","path":"{}","tenant":"batch"}}}}"#, c.display());
        let r = control(&sock, &add).await;
        assert_eq!((r["ok"].as_bool(), r["tenant"].as_u64()), (Some(true), Some(1)), "{r}");
        let mut held = Client::connect(addr, "c").await;
        held.request(0, 0, 1, 0, 4096, &[]).await;
        assert_eq!(held.reply(4096).await, (0, 1, vec![0x5c; 4096]));
        // A name already served, a missing file, an unknown tenant: refused, nothing changes.
        assert!(control(&sock, &add).await["error"].as_str().unwrap().contains("already served"));
        let missing = r#"{"cmd":"add-export","export":{"name":"d","path":"/nonexistent/d.img","tenant":0}}"#;
        assert!(control(&sock, missing).await["error"].as_str().unwrap().contains("no such file"));
        let nobody = format!(r#"{{"cmd":"add-export","export":{{"name":"e","path":"{}","tenant":"x"}}}}"#, c.display());
        assert!(control(&sock, &nobody).await["error"].as_str().unwrap().contains("no tenant named"));
        // Removed: no new connection, but the open one keeps working until it closes.
        let r = control(&sock, r#"{"cmd":"remove-export","name":"c"}"#).await;
        assert_eq!((r["ok"].as_bool(), r["open_connections"].as_u64()), (Some(true), Some(1)), "{r}");
        let mut late = Client::hello(addr, 3).await;
        assert_eq!(late.go(7, "c").await, Err(0x8000_0006));
        held.request(0, 0, 2, 4096, 4096, &[]).await;
        assert_eq!(held.reply(4096).await, (0, 2, vec![0x5c; 4096]));
        let r = control(&sock, r#"{"cmd":"remove-export","name":"a"}"#).await;
        assert!(r["error"].as_str().unwrap().contains("the only export"), "{r}");
        let r = control(&sock, r#"{"cmd":"remove-export","name":"zz"}"#).await;
        assert!(r["error"].as_str().unwrap().contains("no export named \"zz\" (served: a)"), "{r}");
    });
    let stats = h.shutdown();
    let batch = stats.tenant(1).unwrap();
    assert_eq!((batch.ops, batch.exports.clone()), (2, vec!["c".to_string()]));
}

/// A structured reply chunk: (flags, type, cookie, payload).
async fn chunk(c: &mut Client) -> (u16, u16, u64, Vec<u8>) {
    let mut h = [0u8; 20];
    c.s.read_exact(&mut h).await.unwrap();
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x668e_33ef, "structured reply magic");
    let flags = u16::from_be_bytes([h[4], h[5]]);
    let kind = u16::from_be_bytes([h[6], h[7]]);
    let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let mut payload = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
    c.s.read_exact(&mut payload).await.unwrap();
    (flags, kind, cookie, payload)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

fn meta_query(export: &str, queries: &[&str]) -> Vec<u8> {
    let mut d = (export.len() as u32).to_be_bytes().to_vec();
    d.extend(export.as_bytes());
    d.extend((queries.len() as u32).to_be_bytes());
    for q in queries {
        d.extend((q.len() as u32).to_be_bytes());
        d.extend(q.as_bytes());
    }
    d
}

#[test]
fn structured_replies_holes_and_block_status() {
    // 1 MiB: a hole, 4 KiB of data at 256 KiB, a hole to the end.
    let img = image("structured", 1 << 20);
    {
        use std::os::unix::fs::FileExt;
        std::fs::OpenOptions::new().write(true).open(&img).unwrap().write_all_at(&[0x7e; 4096], 256 << 10).unwrap();
    }
    let (gw, _) = gateway(&[("s", &img, 0)], "");
    let addr = gw.addr().unwrap();
    rt().block_on(async {
        // Metadata contexts need structured replies first (NBD_REP_ERR_INVALID).
        let mut c = Client::hello(addr, 3).await;
        c.option(10, &meta_query("s", &["base:allocation"])).await;
        assert_eq!(c.opt_reply().await.kind, 0x8000_0003);
        // NBD_OPT_STRUCTURED_REPLY (8) → ACK; listing all contexts (no query) gives
        // base:allocation with id 0; setting it gives a non-zero id.
        c.option(8, &[]).await;
        assert_eq!(c.opt_reply().await.kind, 1);
        c.option(9, &meta_query("s", &[])).await;
        let r = c.opt_reply().await;
        assert_eq!((r.kind, be32(&r.data), &r.data[4..]), (4, 0, &b"base:allocation"[..]));
        assert_eq!(c.opt_reply().await.kind, 1);
        c.option(10, &meta_query("s", &["x-other:thing", "base:allocation"])).await;
        let r = c.opt_reply().await;
        assert_eq!((r.kind, &r.data[4..]), (4, &b"base:allocation"[..]));
        let ctx = be32(&r.data);
        assert_ne!(ctx, 0);
        assert_eq!(c.opt_reply().await.kind, 1);
        c.option(10, &meta_query("nope", &["base:allocation"])).await;
        assert_eq!(c.opt_reply().await.kind, 0x8000_0006, "unknown export");
        c.go(7, "s").await.unwrap();
        // A read across hole, data, hole: chunks OFFSET_HOLE (2), OFFSET_DATA (1),
        // OFFSET_HOLE, the last one flagged DONE; together they cover the range.
        c.request(0, 0, 1, 248 << 10, 16 << 10, &[]).await;
        let mut covered = Vec::new();
        loop {
            let (flags, kind, cookie, p) = chunk(&mut c).await;
            assert_eq!(cookie, 1);
            let off = u64::from_be_bytes(p[0..8].try_into().unwrap());
            match kind {
                2 => covered.push((off, be32(&p[8..]) as u64, None)),
                1 => covered.push((off, (p.len() - 8) as u64, Some(p[8..].to_vec()))),
                k => panic!("chunk type {k}"),
            }
            if flags & 1 == 1 {
                break;
            }
        }
        assert_eq!(
            covered.iter().map(|c| (c.0, c.1, c.2.is_some())).collect::<Vec<_>>(),
            vec![(248 << 10, 8 << 10, false), (256 << 10, 4 << 10, true), (260 << 10, 4 << 10, false)]
        );
        assert_eq!(covered[1].2.as_deref(), Some(&[0x7e; 4096][..]));
        // A read past the end: an ERROR chunk (type 2^15 + 1) with EINVAL, never a simple reply.
        c.request(0, 0, 2, 1 << 20, 4096, &[]).await;
        let (flags, kind, cookie, p) = chunk(&mut c).await;
        assert_eq!((flags, kind, cookie, be32(&p)), (1, 0x8001, 2, EINVAL));
        let msg_len = u16::from_be_bytes([p[4], p[5]]) as usize;
        assert_eq!(p.len(), 6 + msg_len);
        // Block status (7) of the whole export: hole, data, hole, for our context.
        c.request(7, 0, 3, 0, 1 << 20, &[]).await;
        let (flags, kind, cookie, p) = chunk(&mut c).await;
        assert_eq!((flags, kind, cookie, be32(&p)), (1, 5, 3, ctx));
        let extents: Vec<(u32, u32)> = p[4..].chunks(8).map(|e| (be32(e), be32(&e[4..]))).collect();
        assert_eq!(extents, vec![(256 << 10, 3), (4 << 10, 0), ((1 << 20) - (260 << 10), 3)]);
        // NBD_CMD_FLAG_REQ_ONE (8): the first extent only.
        c.request(7, 8, 4, 0, 1 << 20, &[]).await;
        let (_, _, _, p) = chunk(&mut c).await;
        assert_eq!(&p[4..], &[(256u32 << 10).to_be_bytes(), 3u32.to_be_bytes()].concat()[..]);
        // Writes keep simple replies (the spec allows either).
        c.request(1, 0, 5, 0, 4, &[1, 2, 3, 4]).await;
        assert_eq!(c.reply(0).await, (0, 5, vec![]));
        // Without base:allocation selected, block status is EINVAL.
        let mut plain = Client::hello(addr, 3).await;
        plain.option(8, &[]).await;
        assert_eq!(plain.opt_reply().await.kind, 1);
        plain.go(7, "s").await.unwrap();
        plain.request(7, 0, 9, 0, 4096, &[]).await;
        assert_eq!(plain.reply(0).await, (EINVAL, 9, vec![]));
    });
    drop(gw.shutdown());
}

/// The victim's read beside a tenant of 1 MiB reads on a slow disk (a 50 ms delay
/// rule on that tenant's export), depth 2: how long the victim's 4 KiB read took, and
/// how long the noisy tenant's 8 reads took. FCFS: the policy alone gives the victim
/// no precedence.
fn victim_beside_a_slow_tenant(tag: &str, cost: &str) -> (Duration, Duration) {
    let img = image(tag, 16 << 20);
    let p = img.display();
    let exports = format!(
        r#"[{{"name":"victim","path":"{p}","tenant":0}},
            {{"name":"noisy","path":"{p}","tenant":1,"faults":[{{"op":"read","delay_s":0.05}}]}}]"#
    );
    let (h, _) = gateway_json(&exports, &format!(r#","depth":2,"policy":{{"kind":"fcfs"}}{cost}"#));
    let addr = h.addr().unwrap();
    let took = rt().block_on(async {
        let mut victim = Client::connect(addr, "victim").await;
        let mut noisy = Client::connect(addr, "noisy").await;
        let t0 = Instant::now();
        for cookie in 0..8u64 {
            noisy.request(0, 0, cookie, cookie << 20, 1 << 20, &[]).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let sent = Instant::now();
        victim.request(0, 0, 99, 0, 4096, &[]).await;
        let (e, cookie, data) = victim.reply(4096).await;
        assert_eq!((e, cookie, data.len()), (0, 99, 4096));
        let victim_took = sent.elapsed();
        for _ in 0..8 {
            let (e, _, data) = noisy.reply(1 << 20).await;
            assert_eq!((e, data.len()), (0, 1 << 20));
        }
        (victim_took, t0.elapsed())
    });
    h.shutdown();
    took
}

#[test]
fn a_tenant_of_large_requests_on_a_slow_disk_does_not_hold_the_others() {
    // Without the cost model the noisy tenant's reads take both slots for 50 ms, and
    // its next ones are ahead of the victim's in the queue: the victim waits 2 rounds.
    let (victim, noisy) = victim_beside_a_slow_tenant("slow-off", r#","cost":{"enabled":false}"#);
    assert!(victim >= Duration::from_millis(80), "victim {victim:?}");
    assert!(noisy >= Duration::from_millis(200), "4 rounds of 2 reads: {noisy:?}");
    // With it a 1 MiB read costs more than the budget of two 64 KiB reads: the noisy
    // tenant has one read on the backend at a time (8 x 50 ms), its others are held,
    // and the victim's read takes the free slot at once.
    let (victim, noisy) = victim_beside_a_slow_tenant("slow-on", "");
    assert!(victim < Duration::from_millis(20), "victim {victim:?}");
    assert!(noisy >= Duration::from_millis(400), "one read at a time: {noisy:?}");
}
