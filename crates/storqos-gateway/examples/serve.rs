//! Serve a gateway configuration file until Ctrl-C, SIGTERM or its `duration_s`, then
//! print the per-tenant statistics as JSON.
//!
//! `cargo run --release -p storqos-gateway --example serve -- gateway.json`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: serve CONFIG.json");
        std::process::exit(2);
    };
    let json = match std::fs::read_to_string(&path) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {path}: {e}");
            std::process::exit(2);
        }
    };
    let result = storqos_gateway::Config::from_json(&json).and_then(|cfg| {
        let gw = storqos_gateway::start_with(cfg, storqos_gateway::Options { sigterm: true, sigint: true, log: None })?;
        eprintln!("serving on nbd://{}", gw.info().listen);
        Ok(gw.wait())
    });
    match result {
        Ok(stats) => println!("{}", serde_json::to_string_pretty(&stats).unwrap_or_default()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
