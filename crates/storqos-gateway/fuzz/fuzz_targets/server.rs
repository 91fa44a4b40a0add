//! Arbitrary bytes sent to a live gateway as a client would send them (one connection
//! per input, over a Unix socket), and after each input a check that the gateway still
//! greets a new client: no input may crash it, hang it or make it refuse others.
#![no_main]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

/// The gateway's socket; the gateway itself lives as long as the fuzzing process.
fn socket() -> &'static PathBuf {
    static GATEWAY: OnceLock<(storqos_gateway::Handle, PathBuf)> = OnceLock::new();
    &GATEWAY.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("storqos-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("a.img");
        std::fs::File::create(&img).unwrap().set_len(1 << 20).unwrap();
        let sock = dir.join("nbd.sock");
        let cfg = format!(
            r#"{{"listen":"unix:{}","exports":[{{"name":"a","path":"{}","tenant":0}}],
                "policy":{{"kind":"wf2q"}},"depth":2,"limits":{{"handshake_timeout_s":1,"idle_timeout_s":1}}}}"#,
            sock.display(),
            img.display()
        );
        let gw = storqos_gateway::start_with(
            storqos_gateway::Config::from_json(&cfg).unwrap(),
            storqos_gateway::Options { log: Some(std::sync::Arc::new(|_: &str| {})), ..Default::default() },
        )
        .unwrap();
        (gw, sock)
    })
    .1
}

/// Connect and read the 18-byte greeting (NBDMAGIC, IHAVEOPT, flags).
fn greeted() -> UnixStream {
    let mut s = UnixStream::connect(socket()).expect("the gateway accepts connections");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).expect("the gateway greets");
    assert_eq!(&g[0..8], b"NBDMAGIC");
    s
}

fuzz_target!(|data: &[u8]| {
    let mut s = greeted();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = s.write_all(data);
    let mut sink = [0u8; 65536];
    for _ in 0..8 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    drop(s);
    drop(greeted());
});
