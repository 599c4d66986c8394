//! Ember's environment variables: the one table of what they mean and
//! accept, and turning Ember on from them at interpreter start-up.
//!
//! Here rather than in the Python package so that the `EMBER=1` autoload
//! (`runtime/data/purelib/ember_autoload.py`) needs only this extension:
//! importing the package as well cost every such process about 0.3 ms.
//! The package (`ember._from_environ`, `ember.enable`, `python -m ember`)
//! reads the variables through the same functions.
//!
//! Every `EMBER*` variable is validated before Ember turns on. A bad value
//! is reported in one line naming the variable and what it accepts, and
//! Ember stays off rather than guessing. `EMBER_DEV_*` belongs to the
//! development scripts (`dev/env`) and is ignored.

use std::collections::HashSet;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::create_exception!(ember, ConfigError, PyValueError, "A configuration value Ember cannot accept.");

/// Defaults of the compilation settings. Compiling costs, in a short
/// program whose caches are cold, about 1-1.5 us per instruction (and the new
/// code is not in cache either), while compiled code saves a fraction of the
/// interpreter's time: compiling pays only once the interpreter has spent a
/// few times that on the function. A function without a loop runs each
/// instruction once per call, so it is compiled after many calls (start-up
/// code, imports, runs most of its functions fewer times). One with a loop
/// may run long in few calls (a benchmark's main loop: once per iteration).
/// So a function with a loop is compiled once its frames have run in the
/// interpreter for DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT ns per code unit of
/// its bytecode (less the time of frames of other such functions they call)
/// and its loops have gone round 64 times there (hook.rs,
/// MIN_LOOP_ITERATIONS: time alone compiled start-up code whose few
/// iterations wait on files, importlib.metadata's, in every process):
/// at one of its loop's back-edges, the frame going on in compiled code from
/// there (on-stack replacement, tier1/csrc/osr.c), or at its second call (its
/// first, in the interpreter, has specialised the instructions it ran).
/// A generator's or coroutine's resumptions count as calls here: its one
/// frame may run a program's main loop, and compiled code can take it over
/// at its next resumption. A loop that runs long is compiled; the loops of
/// code run a few times at start-up (imports: enum, re, dataclasses), which
/// compiling made a short program pay for, are not. The values were chosen
/// by whole-process times of pyperformance's benchmarks run once
/// (benches/README.md, cold runs): 128 calls and 1000 ns compiled about 115
/// functions of start-up code per process, 1024 and 4000 about 25, and were
/// slower by 2 to 4% of the whole process; 4096 and 8000 compiled the
/// benchmarks' own functions too late. Since imports run without the
/// evaluator (hook.rs, run_import), start-up code's calls are mostly not
/// counted: 256 compiles no more start-up functions than 1024 in those
/// processes (2026-11-29), and compiles a program's own functions sooner
/// (chaos's set-up calls a few of them some 3,000 times: whole cold runs,
/// 40 processes, 0.964x/0.965x against the interpreter at 1024 and
/// 0.970x/0.979x at 256 in two runs; the other nine within noise).
const DEFAULT_TIER1_THRESHOLD: u64 = 2;
const DEFAULT_TIER1_THRESHOLD_LOOPLESS: u64 = 256;
const DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT: u64 = 4000;
/// Tier 1 is on by default: with every function compiled at its first call
/// it gives CPython's own test suite the interpreter's results, and it is
/// what makes a program faster (tier 0 only counts, at the hook's cost).
const DEFAULT_MAX_TIER: u64 = 1;
const DEFAULT_CODE_LIMIT_MB: u64 = 512;

/// What a variable sets.
#[derive(Clone, Copy)]
enum Field {
    /// EMBER: 0 or 1.
    Enabled,
    /// A whole number >= 0.
    Threshold,
    /// A whole number >= 0, of MiB.
    CodeLimitMb,
    /// A tier this build has: 0 or 1.
    MaxTier,
    /// 0 or 1.
    PerfMap,
    /// A file to write at exit (see [`check_path`]).
    StatsPath,
}

/// The variables by name (sorted), and what each sets; what they mean and
/// accept: docs/usage.md.
const VARIABLES: &[(&str, Field)] = &[
    // 1 turns Ember on at interpreter start-up (via ember.pth), 0 leaves it off.
    ("EMBER", Field::Enabled),
    // Executable memory compiled code may use, in MiB; when reached, new code
    // stays in the interpreter until compiled code is freed.
    ("EMBER_CODE_LIMIT_MB", Field::CodeLimitMb),
    // The highest tier the automatic policy compiles to; 0 only counts.
    ("EMBER_MAX_TIER", Field::MaxTier),
    // 1 writes /tmp/perf-<pid>.map so that Linux perf names compiled functions.
    ("EMBER_PERF_MAP", Field::PerfMap),
    // Write ember.stats() as JSON to this path at exit.
    ("EMBER_STATS", Field::StatsPath),
    // Calls before a function is compiled at tier 1, for every function (0:
    // at the first call); replaces the default policy.
    ("EMBER_TIER1_THRESHOLD", Field::Threshold),
];

/// The settings the variables give.
pub struct Config {
    pub enabled: bool,
    pub stats_path: Option<String>,
    pub tier1_threshold: u64,
    pub tier1_threshold_loopless: u64,
    pub tier1_loop_work_ns_per_unit: u64,
    pub max_tier: u64,
    pub code_limit_mb: u64,
    pub perf_map: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            enabled: false,
            stats_path: None,
            tier1_threshold: DEFAULT_TIER1_THRESHOLD,
            tier1_threshold_loopless: DEFAULT_TIER1_THRESHOLD_LOOPLESS,
            tier1_loop_work_ns_per_unit: DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT,
            max_tier: DEFAULT_MAX_TIER,
            code_limit_mb: DEFAULT_CODE_LIMIT_MB,
            perf_map: false,
        }
    }
}

/// `value` as Python's `repr` shows it (the messages quote values so).
fn repr(py: Python<'_>, value: &str) -> PyResult<String> {
    Ok(pyo3::types::PyString::new(py, value).repr()?.to_string())
}

fn rejected(py: Python<'_>, name: &str, value: &str, expected: &str) -> PyErr {
    match repr(py, value) {
        Ok(r) => ConfigError::new_err(format!("{name}={r} is not accepted: expected {expected}")),
        Err(e) => e,
    }
}

/// A file to write at exit; "{pid}" in it becomes the id of the process
/// that writes it (one file per process when a program forks or starts
/// subprocesses with the same environment). It is kept as given and
/// replaced when the file is written; its directory is checked now, for
/// this process.
pub fn check_path(py: Python<'_>, name: &str, value: &str) -> PyResult<()> {
    if value.is_empty() {
        return Err(ConfigError::new_err(format!("{name} is empty: expected the path of a file to write")));
    }
    let path = py.import("os.path")?;
    let here = value.replace("{pid}", &std::process::id().to_string());
    let parent = path.call_method1("dirname", (path.call_method1("abspath", (here,))?,))?;
    if !path.call_method1("isdir", (&parent,))?.is_truthy()? {
        let parent: String = parent.extract()?;
        return Err(ConfigError::new_err(format!(
            "{name}={} is not accepted: directory {} does not exist",
            repr(py, value)?,
            repr(py, &parent)?
        )));
    }
    Ok(())
}

fn flag(py: Python<'_>, name: &str, value: &str) -> PyResult<bool> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(rejected(py, name, value, "1 (on) or 0 (off)")),
    }
}

fn count(py: Python<'_>, name: &str, value: &str, max: u64) -> PyResult<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(rejected(py, name, value, "a whole number >= 0"));
    }
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| rejected(py, name, value, &format!("a whole number from 0 to {max}")))
}

fn parse_one(py: Python<'_>, cfg: &mut Config, name: &str, field: Field, value: &str) -> PyResult<()> {
    match field {
        Field::Enabled => cfg.enabled = flag(py, name, value)?,
        Field::PerfMap => cfg.perf_map = flag(py, name, value)?,
        Field::Threshold => cfg.tier1_threshold = count(py, name, value, u64::MAX)?,
        // Made bytes for the runtime.
        Field::CodeLimitMb => cfg.code_limit_mb = count(py, name, value, (usize::MAX >> 20) as u64)?,
        Field::MaxTier => {
            cfg.max_tier = match value {
                "0" => 0,
                "1" => 1,
                _ => {
                    return Err(rejected(
                        py,
                        name,
                        value,
                        "0 (interpreter only) or 1 (baseline compiler), the tiers this build has",
                    ))
                }
            }
        }
        Field::StatsPath => {
            check_path(py, name, value)?;
            cfg.stats_path = Some(value.to_owned());
        }
    }
    Ok(())
}

/// The settings `environ` (a mapping of names to values) gives, or
/// ConfigError for the first bad variable, in the order of their names.
pub fn from_environ(environ: &Bound<'_, PyAny>) -> PyResult<Config> {
    let py = environ.py();
    let mut names: Vec<String> = Vec::new();
    for key in environ.try_iter()? {
        let name: String = key?.extract()?;
        if name.starts_with("EMBER") && !name.starts_with("EMBER_DEV_") {
            names.push(name);
        }
    }
    names.sort();
    let mut cfg = Config::default();
    let threshold_set = names.iter().any(|n| n == "EMBER_TIER1_THRESHOLD");
    for name in names {
        let Some(&(_, field)) = VARIABLES.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
            return Err(ConfigError::new_err(format!(
                "{name} is not an Ember variable (known: {})",
                known.join(", ")
            )));
        };
        let value: String = environ.get_item(&name)?.extract()?;
        parse_one(py, &mut cfg, &name, field, &value)?;
    }
    if threshold_set {
        // One threshold for every function, as given.
        cfg.tier1_threshold_loopless = cfg.tier1_threshold;
        cfg.tier1_loop_work_ns_per_unit = 0;
    }
    Ok(cfg)
}

/// Messages [`report`] has printed: each once per process (under
/// `python -m ember` with EMBER set, both the autoload and `python -m
/// ember` read the environment and try to turn Ember on). Under the GIL.
static mut REPORTED: Option<HashSet<String>> = None;

/// Say on standard error, in one line, why Ember stays off.
pub fn report(py: Python<'_>, why: &str) -> PyResult<()> {
    let message = format!("ember: {why}; Ember stays off\n");
    // SAFETY: under the GIL.
    let reported = unsafe { (*core::ptr::addr_of_mut!(REPORTED)).get_or_insert_with(HashSet::new) };
    if reported.insert(message.clone()) {
        py.import("sys")?.getattr("stderr")?.call_method1("write", (message,))?;
    }
    Ok(())
}

/// The settings as a dict of `ember._Config`'s fields.
fn as_dict<'py>(py: Python<'py>, cfg: &Config) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("enabled", cfg.enabled)?;
    d.set_item("stats_path", cfg.stats_path.as_deref())?;
    d.set_item("tier1_threshold", cfg.tier1_threshold)?;
    d.set_item("tier1_threshold_loopless", cfg.tier1_threshold_loopless)?;
    d.set_item("tier1_loop_work_ns_per_unit", cfg.tier1_loop_work_ns_per_unit)?;
    d.set_item("max_tier", cfg.max_tier)?;
    d.set_item("code_limit_mb", cfg.code_limit_mb)?;
    d.set_item("perf_map", cfg.perf_map)?;
    Ok(d)
}

/// `ember._from_environ`: the settings `environ` gives, as a dict.
#[pyfunction]
pub fn _environ_config<'py>(environ: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    as_dict(environ.py(), &from_environ(environ)?)
}

/// `ember._path`: ConfigError unless `value` names a file that can be
/// written at exit.
#[pyfunction]
pub fn _check_path(py: Python<'_>, name: &str, value: &str) -> PyResult<()> {
    check_path(py, name, value)
}

/// `ember._report`.
#[pyfunction]
pub fn _report(py: Python<'_>, why: &str) -> PyResult<()> {
    report(py, why)
}

/// The settings `os.environ`'s EMBER* variables give.
fn from_os_environ(py: Python<'_>) -> PyResult<Config> {
    from_environ(&py.import("os")?.getattr("environ")?)
}

/// `cfg`'s settings taken, and Ember's evaluator installed (RuntimeError
/// for another evaluator).
fn configure_and_enable(cfg: &Config) -> PyResult<()> {
    crate::configure(cfg)?;
    crate::enable()
}

/// `ember.enable()`: Ember on with the settings `os.environ` gives, whatever
/// EMBER says; ConfigError for a bad variable, RuntimeError for another
/// frame evaluator. Returns the EMBER_STATS path, for the package to write
/// the stats at exit.
#[pyfunction]
pub fn _enable_from_environment(py: Python<'_>) -> PyResult<Option<String>> {
    let cfg = from_os_environ(py)?;
    configure_and_enable(&cfg)?;
    Ok(cfg.stats_path)
}

/// Turn Ember on as `os.environ`'s EMBER* variables say (the autoload,
/// `ember._start_from_environment`). Never raises for configuration: a bad
/// value, or another frame evaluator, is reported in one line and Ember
/// stays off. Returns whether Ember is on, and the EMBER_STATS path for the
/// caller to write the stats at exit (the package does).
#[pyfunction]
pub fn _start_from_environment(py: Python<'_>) -> PyResult<(bool, Option<String>)> {
    let cfg = match from_os_environ(py) {
        Ok(cfg) => cfg,
        Err(e) if e.is_instance_of::<ConfigError>(py) => {
            report(py, &e.value(py).str()?.to_string())?;
            return Ok((false, None));
        }
        Err(e) => return Err(e),
    };
    if !cfg.enabled {
        return Ok((false, None));
    }
    match configure_and_enable(&cfg) {
        Ok(()) => Ok((true, cfg.stats_path)),
        Err(e) if e.is_instance_of::<PyRuntimeError>(py) => {
            report(py, &e.value(py).str()?.to_string())?;
            Ok((false, None))
        }
        Err(e) => Err(e),
    }
}
