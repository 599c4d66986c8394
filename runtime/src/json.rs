//! JSON for `EMBER_STATS` files, written without Python's `json` module:
//! importing it (and through it `re`) would change the very program being
//! observed — another entry in `sys.modules`, and start-up work that under
//! tier 1 at threshold 0 compiles the regular-expression compiler.

use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: True is an int to Python.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::Number(v.into()));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::Number(v.into()));
        }
        return Err(PyValueError::new_err("integer out of the 64-bit range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("a float that JSON cannot hold (nan or infinity)"));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("JSON object keys must be str"))?
                .to_str()?
                .to_owned();
            map.insert(key, to_value(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l.iter().map(|v| to_value(&v)).collect::<PyResult<_>>().map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t.iter().map(|v| to_value(&v)).collect::<PyResult<_>>().map(Value::Array);
    }
    Err(PyTypeError::new_err(format!("cannot write a {} as JSON", obj.get_type().name()?)))
}

/// Write `obj` (dict, list, tuple, str, int, float, bool, None) to `path` as
/// indented JSON followed by a newline.
#[pyfunction]
pub fn _write_json(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<()> {
    let value = to_value(obj)?;
    let mut text = serde_json::to_string_pretty(&value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string(), path.to_owned())))
}

/// Turn the automatic garbage collector off; returns whether it was on.
/// For the exit-time stats writer: a collection triggered by its allocations
/// would run finalisers at a point where the program never ran them (a
/// `__del__` joining a daemon thread before daemon threads are stopped hangs).
#[pyfunction]
pub fn _gc_pause() -> bool {
    // SAFETY: the GIL is held in a #[pyfunction].
    unsafe { pyo3::ffi::PyGC_Disable() != 0 }
}

/// Turn the automatic garbage collector back on.
#[pyfunction]
pub fn _gc_resume() {
    unsafe {
        pyo3::ffi::PyGC_Enable();
    }
}
