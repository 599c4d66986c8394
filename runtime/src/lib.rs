//! `ember._ember`: the native half of the `ember` package. The public API is
//! the Python package (`runtime/python/ember`), which validates arguments and
//! calls the underscore functions here.

mod config;
mod hook;
mod jit;
mod json;
mod records;

use ember_profiler::{Tier, MAX_AVAILABLE_TIER};
use pyo3::exceptions::{PyImportError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList};
use pyo3::{ffi, IntoPyObjectExt};

use hook::Installed;
use records::state;

fn describe_other(addr: usize) -> String {
    format!(
        "another PEP 523 frame evaluator is installed (function at {addr:#x}, for example \
         TorchDynamo's); Ember does not chain evaluators. Remove it first, then call \
         ember.enable()"
    )
}

/// Install Ember's frame evaluator. Idempotent. Refuses, rather than
/// replacing or chaining, when another evaluator is installed.
#[pyfunction]
fn _enable(_py: Python<'_>) -> PyResult<()> {
    enable()
}

/// [`_enable`], for the start-up from the environment (config.rs). GIL held.
fn enable() -> PyResult<()> {
    // SAFETY: the callers hold the GIL.
    unsafe {
        // Ember's records and its code watcher belong to the main
        // interpreter: code objects of another would outlive their records'
        // knowledge of them. (An isolated subinterpreter cannot import this
        // module; a legacy one, Py_NewInterpreter, can.)
        if ffi::PyInterpreterState_Get() != ffi::PyInterpreterState_Main() {
            return Err(PyRuntimeError::new_err("Ember runs in the main interpreter only, not in a subinterpreter"));
        }
        match hook::installed() {
            Installed::Ember => Ok(()),
            Installed::Default => {
                hook::install(Some(hook::ember_fn()));
                Ok(())
            }
            Installed::Passthrough => Err(PyRuntimeError::new_err(describe_other(
                hook::passthrough_fn() as usize,
            ))),
            Installed::Other(f) => Err(PyRuntimeError::new_err(describe_other(f))),
        }
    }
}

/// Remove Ember's evaluator if it is the one installed; leave any other alone.
/// Returns whether Ember's evaluator was removed.
#[pyfunction]
fn _disable(_py: Python<'_>) -> bool {
    unsafe { hook::uninstall_ember() }
}

/// Which evaluator runs frames now: "default", "ember", "passthrough", "other".
#[pyfunction]
fn _installed(_py: Python<'_>) -> &'static str {
    match unsafe { hook::installed() } {
        Installed::Default => "default",
        Installed::Ember => "ember",
        Installed::Passthrough => "passthrough",
        Installed::Other(_) => "other",
    }
}

/// Install the do-nothing evaluator (benchmark floor, foreign-evaluator tests).
#[pyfunction]
fn _install_passthrough(_py: Python<'_>) -> PyResult<()> {
    unsafe {
        match hook::installed() {
            Installed::Default | Installed::Passthrough => {
                hook::install(Some(hook::passthrough_fn()));
                Ok(())
            }
            _ => Err(PyRuntimeError::new_err("another frame evaluator is installed")),
        }
    }
}

#[pyfunction]
fn _uninstall_passthrough(_py: Python<'_>) -> bool {
    unsafe {
        if let Installed::Passthrough = hook::installed() {
            hook::install(None);
            true
        } else {
            false
        }
    }
}

fn as_code<'py>(obj: &Bound<'py, PyAny>) -> PyResult<*mut ffi::PyObject> {
    if unsafe { ffi::PyCode_Check(obj.as_ptr()) } == 0 {
        return Err(PyTypeError::new_err(format!(
            "expected a code object, got {}",
            obj.get_type().name()?
        )));
    }
    Ok(obj.as_ptr())
}

fn tier_value(py: Python<'_>, tier: Option<Tier>) -> PyResult<Py<PyAny>> {
    match tier {
        Some(t) => t.number().into_py_any(py),
        None => Ok(py.None()),
    }
}

/// Pin a code object to a tier (validated by the Python layer too).
#[pyfunction]
fn _pin(code: &Bound<'_, PyAny>, tier: i64) -> PyResult<()> {
    let code = as_code(code)?;
    let tier = Tier::from_number(tier)
        .ok_or_else(|| PyValueError::new_err(format!("tier must be 0, 1 or 2, not {tier}")))?;
    if tier > MAX_AVAILABLE_TIER {
        return Err(PyValueError::new_err(format!(
            "tier {tier} is not available in this build of Ember (highest: {MAX_AVAILABLE_TIER})"
        )));
    }
    unsafe {
        let rec = records::get_or_create(code);
        if rec.is_null() {
            return Err(PyRuntimeError::new_err("could not attach Ember's record to the code object"));
        }
        (*rec).profile.pinned = Some(tier);
        records::refresh_direct(&mut *rec);
    }
    Ok(())
}

#[pyfunction]
fn _unpin(code: &Bound<'_, PyAny>) -> PyResult<()> {
    let code = as_code(code)?;
    unsafe {
        let rec = records::lookup(code);
        if !rec.is_null() {
            (*rec).profile.pinned = None;
            records::refresh_direct(&mut *rec);
        }
    }
    Ok(())
}

/// (current tier, pinned tier or None, calls, resumes) of a code object.
#[pyfunction]
fn _code_info(py: Python<'_>, code: &Bound<'_, PyAny>) -> PyResult<(u8, Py<PyAny>, u64, u64)> {
    let code = as_code(code)?;
    unsafe {
        let rec = records::lookup(code);
        if rec.is_null() {
            return Ok((Tier::Interpreter.number(), py.None(), 0, 0));
        }
        let p = &(*rec).profile;
        Ok((p.current_tier().number(), tier_value(py, p.pinned)?, p.calls, p.resumes))
    }
}

/// (bytecode instructions, machine-code bytes, compile ns, publish ns,
/// common-path bytes) of a code object's tier-1 code, or None
/// (benches/compile_speed.py).
#[pyfunction]
fn _tier1_info(py: Python<'_>, code: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let code = as_code(code)?;
    unsafe {
        let rec = records::lookup(code);
        match (!rec.is_null()).then(|| (*rec).compiled.as_deref()).flatten() {
            Some(c) => (c.n_instructions, c.code_bytes, (*rec).compile_ns, c.publish_ns, c.cold_offset).into_py_any(py),
            None => Ok(py.None()),
        }
    }
}

/// Every record as a dict (an empty list without `with_functions`: the
/// totals alone cost a fraction of it), plus global totals.
#[pyfunction]
#[pyo3(signature = (with_functions = true))]
fn _stats<'py>(py: Python<'py>, with_functions: bool) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let functions = PyList::empty(py);
    // Copy the pointers first: building dicts can run Python code (gc) that
    // frees code objects and so edits the registry.
    let recs: Vec<*mut records::CodeRecord> = unsafe { state().records.clone() };
    let mut holders = Vec::with_capacity(recs.len());
    for &rec in &recs {
        // Own a reference to every code object before anything can run.
        let code = unsafe { Bound::from_borrowed_ptr(py, (*rec).code) };
        holders.push(code);
    }
    for (i, code) in holders.iter().enumerate().take(if with_functions { usize::MAX } else { 0 }) {
        let p = unsafe { (*recs[i]).profile.clone() };
        let d = PyDict::new(py);
        d.set_item("qualname", code.getattr("co_qualname")?)?;
        d.set_item("filename", code.getattr("co_filename")?)?;
        d.set_item("firstlineno", code.getattr("co_firstlineno")?)?;
        d.set_item("calls", p.calls)?;
        d.set_item("resumes", p.resumes)?;
        d.set_item("handoffs", unsafe { (*recs[i]).handoffs })?;
        d.set_item("respecialisations_declined", unsafe { (*recs[i]).respecialisations_declined })?;
        let rec = unsafe { &*recs[i] };
        d.set_item("interpreted_ns", rec.interpreted_ns)?;
        // Counted by tier-1 code only: unknown for code never compiled.
        if rec.tier1_compiles > 0 {
            d.set_item("back_edges", p.back_edges)?;
        } else {
            d.set_item("back_edges", py.None())?;
        }
        d.set_item("tier", p.current_tier().number())?;
        d.set_item("pinned", tier_value(py, p.pinned)?)?;
        let per_tier = |v: u64| -> PyResult<Bound<'py, PyDict>> {
            let t = PyDict::new(py);
            t.set_item("1", v)?;
            Ok(t)
        };
        d.set_item("compiles", per_tier(rec.tier1_compiles)?)?;
        d.set_item("compile_ns", per_tier(rec.tier1_compile_ns_total)?)?;
        // Deoptimisations by reason are tier 2's; tier 1's are `handoffs`.
        d.set_item("deopts", PyDict::new(py))?;
        if let Some(c) = rec.compiled.as_deref() {
            let t1 = PyDict::new(py);
            t1.set_item("code_bytes", c.code_bytes)?;
            t1.set_item("hot_bytes", c.cold_offset)?;
            t1.set_item("total_bytes", c.total_bytes())?;
            t1.set_item("instructions", c.n_instructions)?;
            t1.set_item("compile_ns", rec.compile_ns)?;
            t1.set_item("publish_ns", c.publish_ns)?;
            t1.set_item("address", c.addr())?;
            d.set_item("tier1", t1)?;
        }
        d.set_item("interpreter_reason", rec.interpreter_reason())?;
        functions.append(d)?;
    }
    let totals = unsafe { state().totals.clone() };
    let g = PyDict::new(py);
    // Frames of live records plus those of freed records and record-less frames.
    let live_frames: u64 = recs.iter().map(|&r| unsafe { (*r).profile.calls + (*r).profile.resumes }).sum();
    g.set_item("frames", totals.frames + live_frames)?;
    let (freed_calls, freed_resumes, freed_back_edges) =
        unsafe { (state().freed.calls, state().freed.resumes, state().freed.back_edges) };
    let live_sum = |f: fn(&ember_profiler::CodeProfile) -> u64| -> u64 {
        recs.iter().map(|&r| unsafe { f(&(*r).profile) }).sum()
    };
    g.set_item("calls", freed_calls + live_sum(|p| p.calls))?;
    g.set_item("resumes", freed_resumes + live_sum(|p| p.resumes))?;
    g.set_item("code_objects_seen", totals.code_objects_seen)?;
    g.set_item("code_objects_freed", totals.code_objects_freed)?;
    g.set_item("code_objects_live", recs.len())?;
    let by_tier = PyDict::new(py);
    for t in 0..3u8 {
        let n = holders
            .iter()
            .enumerate()
            .filter(|(i, _)| unsafe { (*recs[*i]).profile.current_tier().number() } == t)
            .count();
        by_tier.set_item(t.to_string(), n)?;
    }
    g.set_item("code_objects_by_tier", by_tier)?;
    // Over the process's whole run, freed code objects included: how many
    // were ever compiled, and why the others stayed in the interpreter.
    let freed = unsafe { &state().freed };
    let freed_by_tier = PyDict::new(py);
    for (t, n) in freed.by_tier.iter().enumerate() {
        freed_by_tier.set_item(t.to_string(), n)?;
    }
    g.set_item("code_objects_freed_by_tier", freed_by_tier)?;
    let ever = PyDict::new(py);
    let live_compiled = recs.iter().filter(|&&r| unsafe { (*r).tier1_compiles > 0 }).count() as u64;
    ever.set_item("1", live_compiled + freed.compiled_tier1)?;
    g.set_item("code_objects_ever_compiled", ever)?;
    let mut reasons: std::collections::BTreeMap<String, u64> =
        freed.reasons.iter().flatten().map(|(k, v)| (k.clone(), *v)).collect();
    for &r in &recs {
        let rec = unsafe { &*r };
        if rec.tier1_compiles == 0 {
            if let Some(why) = rec.interpreter_reason() {
                *reasons.entry(why).or_default() += 1;
            }
        }
    }
    g.set_item("interpreter_reasons", reasons.into_iter().collect::<Vec<_>>().into_py_dict(py)?)?;
    let t1 = unsafe { &state().tier1 };
    let tier1 = PyDict::new(py);
    tier1.set_item("compiled", t1.compiled)?;
    tier1.set_item("compile_ns", t1.compile_ns)?;
    tier1.set_item("publish_ns", t1.publish_ns)?;
    tier1.set_item("code_bytes", t1.code_bytes)?;
    tier1.set_item("hot_bytes", t1.hot_bytes)?;
    tier1.set_item("instructions", t1.instructions)?;
    tier1.set_item("mapped_bytes", ember_tier1::jitmem::mapped_bytes())?;
    tier1.set_item("handoffs", unsafe { state().totals_handoffs })?;
    tier1.set_item("respecialisations_declined", unsafe { state().totals_respecialisations_declined })?;
    tier1.set_item("back_edges", freed_back_edges + live_sum(|p| p.back_edges))?;
    tier1.set_item("delegations_passed", ember_tier1::glue::delegations_passed())?;
    tier1.set_item("generators_made", ember_tier1::glue::generators_made())?;
    tier1.set_item("generators_drained", ember_tier1::glue::generators_drained())?;
    tier1.set_item("osr_entries", ember_tier1::glue::osr_entries())?;
    let refused = PyDict::new(py);
    if let Some(map) = &t1.refused {
        for (k, v) in map {
            refused.set_item(k, v)?;
        }
    }
    tier1.set_item("refused", refused)?;
    g.set_item("tier1", tier1)?;
    g.set_item("deopts", PyDict::new(py))?;
    out.set_item("global", g)?;
    out.set_item("functions", functions)?;
    Ok(out)
}

/// The compilation settings `cfg` gives (read and checked by config.rs).
/// GIL held.
fn configure(cfg: &config::Config) -> PyResult<()> {
    let max_tier = Tier::from_number(cfg.max_tier as i64)
        .filter(|t| *t <= MAX_AVAILABLE_TIER)
        .ok_or_else(|| PyValueError::new_err(format!("max tier must be 0..={MAX_AVAILABLE_TIER}")))?;
    // SAFETY: the callers hold the GIL.
    unsafe {
        let st = state();
        st.settings.tier1_threshold = cfg.tier1_threshold;
        st.settings.tier1_threshold_loopless = cfg.tier1_threshold_loopless;
        st.settings.tier1_loop_work_ns_per_unit = cfg.tier1_loop_work_ns_per_unit;
        st.settings.max_tier = max_tier;
        st.settings.code_limit = (cfg.code_limit_mb as usize) << 20;
        st.settings.perf_map = cfg.perf_map;
    }
    Ok(())
}

/// Compile a code object at tier 1 now; returns None or the refusal reason.
#[pyfunction]
fn _compile(code: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let code = as_code(code)?;
    unsafe {
        let rec = records::get_or_create(code);
        if rec.is_null() {
            return Err(PyRuntimeError::new_err("could not attach Ember's record to the code object"));
        }
        let rec = &mut *rec;
        if rec.compiled.is_none() {
            rec.refusal = None;
            jit::compile_tier1(code, rec);
        }
        Ok(rec.refusal.as_ref().map(|r| r.to_string()))
    }
}

/// (machine code bytes, address, [(bytecode index, code offset, stencil)]) of
/// a code object's tier-1 code, or None.
#[pyfunction]
fn _tier1_code<'py>(py: Python<'py>, code: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
    let code = as_code(code)?;
    unsafe {
        let rec = records::lookup(code);
        let Some(c) = (!rec.is_null()).then(|| (*rec).compiled.as_deref()).flatten() else {
            return Ok(py.None());
        };
        let bytes = pyo3::types::PyBytes::new(py, c.machine_code());
        let map = PyList::empty(py);
        for &(index, off, name) in &c.map {
            map.append((index, off, name))?;
        }
        (bytes, c.addr(), map).into_py_any(py)
    }
}

/// Disassembly of a code object's tier-1 code: a list of (key, stencil,
/// [(address, bytes, text)]) in address order, key being the bytecode
/// index of an instruction's code, "exits" for the shared exits, "cold"
/// where the rarely taken paths start, or ("cold", index) for the cold part
/// of an instruction's stencil (index None: of a shared exit); None when it
/// has no tier-1 code.
#[pyfunction]
fn _tier1_disassemble<'py>(py: Python<'py>, code: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
    let code = as_code(code)?;
    let c = unsafe {
        let rec = records::lookup(code);
        match (!rec.is_null()).then(|| (*rec).compiled.as_deref()).flatten() {
            Some(c) => c,
            None => return Ok(py.None()),
        }
    };
    let bytes = c.machine_code();
    let isa = ember_tier1::disasm::Isa::host();
    // The shared exits as one block, each instruction's code, and each cold
    // part, by address (the stores an unpacking does are placed among the
    // cold parts, each before its own cold part; stable sort).
    let mut blocks: Vec<(Py<PyAny>, &str, usize)> = Vec::new();
    blocks.push(("exits".into_py_any(py)?, "ERROR_EXIT, RERAISE_EXIT, DEOPT_EXIT", c.exits_offset));
    if c.cold_offset < bytes.len() {
        // Where the rarely taken paths start (an empty block, before what
        // is placed there).
        blocks.push(("cold".into_py_any(py)?, "the instructions' rarely taken paths", c.cold_offset));
    }
    for &(index, off, name) in &c.map {
        blocks.push((index.into_py_any(py)?, name, off));
    }
    for (index, off, name) in jit::compiler().cold_parts(c) {
        let index = (index != usize::MAX).then_some(index);
        blocks.push((("cold", index).into_py_any(py)?, name, off));
    }
    blocks.sort_by_key(|b| b.2);
    let out = PyList::empty(py);
    for i in 0..blocks.len() {
        let start = blocks[i].2;
        let end = blocks.get(i + 1).map_or(bytes.len(), |b| b.2);
        let lines = PyList::empty(py);
        for (addr, raw, text) in ember_tier1::disasm::disassemble(isa, &bytes[start..end], c.addr() + start as u64) {
            lines.append((addr, pyo3::types::PyBytes::new(py, &raw), text))?;
        }
        out.append((blocks[i].0.clone_ref(py), blocks[i].1, lines))?;
    }
    out.into_py_any(py)
}

/// Forget every counter (records stay attached to their code objects).
#[pyfunction]
fn _reset_counters(_py: Python<'_>) {
    unsafe {
        let st = state();
        st.totals.frames = 0;
        st.freed.calls = 0;
        st.freed.resumes = 0;
        st.freed.back_edges = 0;
        for &rec in &st.records {
            (*rec).profile.calls = 0;
            (*rec).profile.resumes = 0;
            (*rec).profile.back_edges = 0;
        }
    }
}

#[pymodule]
fn _ember(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    ember_pyabi::check_layout().map_err(|e| {
        PyImportError::new_err(format!("Ember was built against other CPython headers: {e}"))
    })?;
    unsafe {
        let st = state();
        if st.watcher < 0 {
            let id = ember_pyabi::current::PyCode_AddWatcher(records::code_watcher);
            if id < 0 {
                return Err(PyErr::fetch(py));
            }
            st.watcher = id;
            ember_tier1::glue::set_handoff_observer(records::note_handoff);
            ember_tier1::glue::set_respecialise_policy(records::may_respecialise);
            ember_tier1::glue::set_osr_policy(hook::osr_policy);
            ember_tier1::glue::set_evaluator(hook::ember_fn() as *const core::ffi::c_void);
            if ember_tier1::glue::init() < 0 {
                return Err(PyErr::fetch(py));
            }
        }
    }
    // Attributes set directly rather than with `m.add`/`m.add_function`,
    // which keep an `__all__` list: its first lookup raises AttributeError,
    // and pyo3 builds its PanicException type to inspect that error, a
    // fifth of what this module's set-up costs in every EMBER=1 process.
    m.setattr("MAX_AVAILABLE_TIER", MAX_AVAILABLE_TIER.number())?;
    m.setattr("ConfigError", py.get_type::<config::ConfigError>())?;
    for function in [
        wrap_pyfunction!(config::_start_from_environment, m)?,
        wrap_pyfunction!(config::_enable_from_environment, m)?,
        wrap_pyfunction!(config::_environ_config, m)?,
        wrap_pyfunction!(config::_check_path, m)?,
        wrap_pyfunction!(config::_report, m)?,
        wrap_pyfunction!(_enable, m)?,
        wrap_pyfunction!(_disable, m)?,
        wrap_pyfunction!(_installed, m)?,
        wrap_pyfunction!(_install_passthrough, m)?,
        wrap_pyfunction!(_uninstall_passthrough, m)?,
        wrap_pyfunction!(_pin, m)?,
        wrap_pyfunction!(_unpin, m)?,
        wrap_pyfunction!(_code_info, m)?,
        wrap_pyfunction!(_stats, m)?,
        wrap_pyfunction!(json::_write_json, m)?,
        wrap_pyfunction!(json::_gc_pause, m)?,
        wrap_pyfunction!(json::_gc_resume, m)?,
        wrap_pyfunction!(_reset_counters, m)?,
        wrap_pyfunction!(_compile, m)?,
        wrap_pyfunction!(_tier1_code, m)?,
        wrap_pyfunction!(_tier1_info, m)?,
        wrap_pyfunction!(_tier1_disassemble, m)?,
    ] {
        m.setattr(function.getattr(pyo3::intern!(py, "__name__"))?.cast_into::<pyo3::types::PyString>()?, function)?;
    }
    Ok(())
}
