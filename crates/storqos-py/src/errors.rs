//! Core and gateway errors as the Python exceptions of `storqos.base.errors`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use storqos_core::Error;

/// A core error as the Python exception of its kind (`storqos.base.errors.ConfigError` or
/// `DataError`, subclasses of `InputError`) carrying the core's message.
pub(crate) fn err(e: Error) -> PyErr {
    match e {
        Error::InvalidConfig(m) => typed_error("ConfigError", m),
        Error::InvalidInput(m) => typed_error("DataError", m),
    }
}

/// An instance of `storqos.base.errors.<class>` with `message`; a `ValueError` with the message
/// if that module cannot be imported (the extension used without its package).
pub(crate) fn typed_error(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let ty = py.import("storqos.base.errors").and_then(|m| m.getattr(class));
        match ty {
            Ok(ty) => match ty.call1((message.as_str(),)) {
                Ok(instance) => PyErr::from_value(instance),
                Err(e) => e,
            },
            Err(_) => PyValueError::new_err(message),
        }
    })
}
