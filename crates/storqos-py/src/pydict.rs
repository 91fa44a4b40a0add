//! The `dict!` macro that builds the Python dicts of results.

/// A Python dict from `key => value` pairs, each value converted by PyO3
/// (`dict!(py, { "completed" => n, "p99_ns" => v.into_pyarray(py) })`): the result tables
/// read as tables instead of one `set_item` call per column.
macro_rules! dict {
    ($py:expr, { $($k:expr => $v:expr),* $(,)? }) => {{
        let d = PyDict::new($py);
        $( d.set_item($k, $v)?; )*
        d
    }};
}
