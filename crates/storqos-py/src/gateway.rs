//! `storqos._core.serve`: run the live NBD gateway (crates/storqos-gateway) from Python.

use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use storqos_gateway::{check, start_with, Config, Error, Options};

use crate::gateway_results::{self as results, GatewayInfo, GatewayStats};

/// A configuration error as `storqos.base.errors.GatewayConfigError` (an `InputError`); an
/// I/O error starting the server as `RuntimeError` (not the user's input).
fn gw_err(e: Error) -> PyErr {
    match e {
        Error::Config(m) => crate::errors::typed_error("GatewayConfigError", m),
        Error::Io(_) => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Hand the rows and gauge samples of newly closed windows to `on_window(rows,
/// gauges)`, if given (the gateway then keeps no copy of them).
fn live_windows(handle: &storqos_gateway::Handle, on_window: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(cb) = on_window {
        let (rows, gauges) = handle.take_windows();
        if !rows.is_empty() || !gauges.is_empty() {
            let call = cb.call1((results::rows(&rows), results::gauges(&gauges)));
            if let Err(e) = call {
                handle.stop();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Serve the gateway described by `config_json` (the schema of
/// `storqos_gateway::Config`) until its `duration_s`, SIGTERM, Ctrl-C (Python's
/// SIGINT handler, polled every 100 ms), or `stop()` returning true (polled as often:
/// a caller whose SIGINT handler only records the signal, so that it never interrupts
/// the callbacks halfway, stops the gateway through it), with the GIL released.
/// `on_ready(info)` is called once it listens, with a `GatewayInfo` (the bound address,
/// the exports); `on_window(rows, gauges)` with the `WindowRow`s and `GaugeRow`s of each
/// window as it closes (with a `window_s`): they are handed over, and the returned
/// statistics' `windows` and `gauges` are then empty. Returns the `GatewayStats`.
/// Configuration errors (a missing file, a bad policy, an address in use) raise
/// `GatewayConfigError` with a one-line message.
///
/// On SIGHUP, `on_reload()` (if given) returns the configuration to apply (JSON, as
/// `config_json`); what cannot change while serving, or a configuration that does not
/// check, is said on stderr and the gateway goes on with the old one.
#[pyfunction]
#[pyo3(signature = (config_json, on_ready=None, on_window=None, on_reload=None, stop=None))]
pub fn serve<'py>(
    py: Python<'py>,
    config_json: &str,
    on_ready: Option<Bound<'py, PyAny>>,
    on_window: Option<Bound<'py, PyAny>>,
    on_reload: Option<Bound<'py, PyAny>>,
    stop: Option<Bound<'py, PyAny>>,
) -> PyResult<GatewayStats> {
    let cfg = Config::from_json(config_json).map_err(gw_err)?;
    let handle =
        py.detach(move || start_with(cfg, Options { sigterm: true, sigint: false, log: None })).map_err(gw_err)?;
    if let Some(cb) = on_ready {
        if let Err(e) = cb.call1((GatewayInfo::from(handle.info()),)) {
            py.detach(|| drop(handle.shutdown()));
            return Err(e);
        }
    }
    let stats = loop {
        if let Some(s) = py.detach(|| handle.wait_timeout(Duration::from_millis(100))) {
            break s;
        }
        let stop_asked = match stop.as_ref() {
            Some(f) => f.call0().and_then(|v| v.is_truthy()).unwrap_or(true),
            None => false,
        };
        if py.check_signals().is_err() || stop_asked {
            // Ctrl-C: stop serving and report what was done (the interrupt is consumed).
            handle.stop();
        }
        live_windows(&handle, on_window.as_ref())?;
        if handle.take_hangup() {
            reload(py, &handle, on_reload.as_ref());
        }
    };
    // The last, partial window is in the final statistics: hand it over too.
    let (rows, gauges) = (stats.windows.clone(), stats.gauges.clone());
    py.detach(move || drop(handle.wait()));
    if let Some(cb) = on_window.as_ref().filter(|_| !rows.is_empty() || !gauges.is_empty()) {
        cb.call1((results::rows(&rows), results::gauges(&gauges)))?;
    }
    let mut stats = stats;
    if on_window.is_some() {
        (stats.windows, stats.gauges) = (Vec::new(), Vec::new());
    }
    Ok(GatewayStats::from(&stats))
}

/// SIGHUP: ask `on_reload` for the configuration and apply it; say how it went.
fn reload(py: Python<'_>, handle: &storqos_gateway::Handle, on_reload: Option<&Bound<'_, PyAny>>) {
    let Some(cb) = on_reload else {
        eprintln!("storqos serve: SIGHUP: no configuration file to reload (serve --config FILE); still serving");
        return;
    };
    let outcome = match cb.call0().and_then(|v| v.extract::<String>()) {
        Err(e) => Err(e.value(py).to_string()),
        Ok(json) => match Config::from_json(&json) {
            Err(e) => Err(e.to_string()),
            Ok(cfg) => py.detach(|| handle.reload(cfg)),
        },
    };
    match outcome {
        Ok(policy) => eprintln!("storqos serve: SIGHUP: configuration reloaded (policy {policy})"),
        Err(e) => eprintln!("storqos serve: SIGHUP: reload failed: {e}; still serving the old configuration"),
    }
}

/// Check the gateway described by `config_json` as `serve` would before listening
/// (fields, export files, policy) and return what it would serve, a `GatewayInfo`
/// (`listen` as given).
#[pyfunction]
pub fn check_gateway(py: Python<'_>, config_json: &str) -> PyResult<GatewayInfo> {
    let cfg = Config::from_json(config_json).map_err(gw_err)?;
    let info = py.detach(|| check(&cfg)).map_err(gw_err)?;
    Ok(GatewayInfo::from(&info))
}

/// Add `serve` and `check_gateway` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(check_gateway, m)?)
}
