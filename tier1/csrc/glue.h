/* What tier 1's run-time helpers (the C files of csrc) share among themselves. */
#ifndef EMBER_GLUE_H
#define EMBER_GLUE_H
#include "../../stencils/c/ember_stencil.h"
#include "pycore_instruments.h"

/* The code object's name `i` (co_names), for the helpers that take an
 * instruction's name from its oparg. */
static inline PyObject *
ember_name_at(_PyInterpreterFrame *frame, int i)
{
    return PyTuple_GET_ITEM(_PyFrame_GetCode(frame)->co_names, i);
}

/* What calls and resumptions need of the runtime's record of a code object
 * (its C prefix: runtime/src/records.rs, DirectEntry). `entry`: the compiled
 * entry at the first instruction when the evaluator would run a call there
 * without a decision, else 0. `entries`: the entry table when the evaluator
 * would enter compiled code at all, else NULL. Both valid for the
 * instrumentation version `version`. */
typedef struct ember_direct_entry {
    uint64_t entry;
    uint64_t version;
    uint64_t *calls;
    const uint64_t *entries;
    uint64_t n_entries;
    uint64_t *resumes;
    /* Back-edges the interpreter took in frames of the code while it had
     * no compiled entries (one in EMBER_OSR_CHECK_EVERY seen). */
    uint64_t *interpreted_back_edges;
} ember_direct_entry;

/* A generic CALL's memory of the last Python function it pushed directly
 * (tier1/src/compile.rs, SiteCache; zeroed, it matches nothing). A call
 * matches when its callable is a function of version `func_version` called
 * with `args_plus_one - 1` positional arguments. Function versions are
 * valid only when set from the function's code object's co_version, unique
 * to that code object, and are cleared by any change to the function's
 * code, defaults or vectorcall. So a match means: a plain function of that
 * code, called with exactly its parameters (its shape checked when the
 * cache was filled), and `direct`, that code's record, alive as long as
 * the code object is. */
typedef struct {
    uint32_t func_version;
    uint16_t args_plus_one;
    /* Calls that missed: the site learns at the first miss and then every
     * EMBER_CALL_CACHE_RELEARN-th (one calling several functions in turn, or
     * one it cannot learn, would otherwise try at each call). */
    uint8_t misses;
    /* The function makes a generator, coroutine or async generator. */
    uint8_t generator;
    ember_direct_entry *direct;
} ember_call_cache;
#define EMBER_CALL_CACHE_RELEARN 16

/* A SEND's memory of the code object of the generator or coroutine it last
 * resumed. Code versions are unique to their code object and
 * never 0, so a match means that code object, and `direct` its record,
 * alive as long as it is. */
typedef struct {
    uint32_t code_version;
    uint32_t unused;
    ember_direct_entry *direct;
} ember_send_cache;
/* Their sizes in words, as tier 1 allocates them (site_cache_words). */
_Static_assert(sizeof(ember_call_cache) == 2 * 8, "site_cache_words(CALL)");
_Static_assert(sizeof(ember_send_cache) == 2 * 8, "site_cache_words(SEND)");

/* The runtime's table of records by code object (profiler/src/ptrmap.rs,
 * RawMap), republished after every insertion (ember_set_records); and the
 * evaluator that runs them. NULL: everything goes through the installed
 * evaluator. Defined in glue.c; inline here for the hot paths of gen.c too. */
struct ember_records {
    const struct { uintptr_t key; ember_direct_entry *value; } *slots;
    uintptr_t mask;
    uint32_t shift;
};
extern struct ember_records ember_records;
extern _PyFrameEvalFunction ember_evaluator;

/* The record of `code` while Ember's evaluator is the installed one, else
 * NULL. */
static inline __attribute__((always_inline)) ember_direct_entry *
ember_find_direct(PyThreadState *tstate, PyCodeObject *code)
{
    if (tstate->interp->eval_frame != ember_evaluator) {
        return NULL;
    }
    if (ember_records.slots == NULL) {
        return NULL;
    }
    uintptr_t key = (uintptr_t)code;
    uintptr_t i = (uintptr_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> ember_records.shift);
    for (;;) {
        uintptr_t k = ember_records.slots[i].key;
        if (k == key) {
            return ember_records.slots[i].value;
        }
        if (k == 0) {
            return NULL;
        }
        i = (i + 1) & ember_records.mask;
    }
}

/* Whether events of sys.monitoring are set on `code` alone
 * (set_local_events): the interpreter, whose bytecode of it is instrumented
 * for them, must run it. Its instrumentation version does not say so. */
static inline __attribute__((always_inline)) int
ember_monitored_locally(PyCodeObject *code)
{
    if (LIKELY(code->_co_monitoring == NULL)) {
        return 0;
    }
    const uint8_t *tools = code->_co_monitoring->local_monitors.tools;
    uint8_t any = 0;
    for (int e = 0; e < _PY_MONITORING_LOCAL_EVENTS; e++) {
        any |= tools[e];
    }
    return any != 0;
}

/* Whether `code`, whose record is `d`, called at its first instruction,
 * would be entered by Ember's evaluator with nothing to do but count the
 * call and enter its compiled code (its common path, runtime/src/hook.rs,
 * decides the same way: a call count that would become a power of two,
 * stale instrumentation, a pending decision -- entry 0 -- all go to the
 * evaluator). The caller that enters counts the call (++*d->calls). */
static inline __attribute__((always_inline)) int
ember_direct_enterable(const ember_direct_entry *d, PyCodeObject *code)
{
    if (d->entry == 0 || code->_co_instrumentation_version != d->version || ember_monitored_locally(code)) {
        return 0;
    }
    uint64_t calls = *d->calls + 1;
    return (calls & (calls - 1)) != 0;
}

/* The same, the record found by probing the table. */
static inline __attribute__((always_inline)) ember_direct_entry *
ember_direct_call(PyThreadState *tstate, PyCodeObject *code)
{
    ember_direct_entry *d = ember_find_direct(tstate, code);
    return d != NULL && ember_direct_enterable(d, code) ? d : NULL;
}

/* Whether a frame may be entered one level deeper without the interpreter
 * raising RecursionError (Python depth and C stack). */
static inline __attribute__((always_inline)) int
ember_recursion_headroom(PyThreadState *tstate)
{
    return tstate->py_recursion_remaining > 0 && !_Py_ReachedRecursionLimit(tstate);
}

/* The interpreter's bookkeeping on entering a frame: one level deeper, and
 * the frame made current. */
static inline __attribute__((always_inline)) void
ember_make_current(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    tstate->py_recursion_remaining--;
    frame->previous = tstate->current_frame;
    tstate->current_frame = frame;
}

/* Run `frame` in compiled code starting at `entry` (the stencil for the
 * instruction at frame->instr_ptr). The same bookkeeping as the interpreter's
 * entry: recursion depth, and the frame made current. `hold_code`: take a
 * reference to the code object for the run. A function's frame may hold the
 * only one (a function rebound while it runs, whose frame owns the
 * function): clearing the frame at its return would free the code object,
 * and with it the compiled code still running that return. A generator's,
 * coroutine's or async generator's frame needs none: it keeps the reference
 * when it finishes (_PyFrame_ClearExceptCode), and the generator being run
 * is held by whoever resumes it. */
static inline __attribute__((always_inline)) PyObject *
ember_enter_compiled(PyThreadState *tstate, _PyInterpreterFrame *frame, ember_cont entry, int hold_code)
{
    if (!ember_recursion_headroom(tstate)) {
        /* Let the interpreter raise RecursionError exactly as it would. */
        return _PyEval_EvalFrameDefault(tstate, frame, 0);
    }
    ember_make_current(tstate, frame);
    if (!hold_code) {
        return entry(frame, frame->stackpointer, tstate);
    }
    PyObject *code = Py_NewRef((PyObject *)_PyFrame_GetCode(frame));
    PyObject *res = entry(frame, frame->stackpointer, tstate);
    Py_DECREF(code);
    return res;
}

/* ember_enter_compiled for any frame. */
static inline __attribute__((always_inline)) PyObject *
ember_run_compiled(PyThreadState *tstate, _PyInterpreterFrame *frame, ember_cont entry)
{
    return ember_enter_compiled(tstate, frame, entry, 1);
}

/* A suspended generator's or coroutine's frame being resumed (instr_ptr
 * past its start): counted and entered where its compiled code has an
 * entry, as the evaluator would; else run by the evaluator. `cache`: the
 * resuming site's memory of the code object's record, or NULL. */
static inline __attribute__((always_inline)) PyObject *
ember_resume_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, ember_send_cache *cache)
{
    PyCodeObject *code = _PyFrame_GetCode(frame);
    ember_direct_entry *d;
    if (cache != NULL && code->co_version == cache->code_version) {
        d = tstate->interp->eval_frame == ember_evaluator ? cache->direct : NULL;
    }
    else {
        d = ember_find_direct(tstate, code);
        if (cache != NULL && d != NULL && code->co_version != 0) {
            cache->code_version = code->co_version;
            cache->direct = d;
        }
    }
    if (d != NULL && d->entries != NULL && code->_co_instrumentation_version == d->version
        && !ember_monitored_locally(code)) {
        uint64_t index = (uint64_t)(frame->instr_ptr - _PyCode_CODE(code));
        if (index != 0 && index < d->n_entries && d->entries[index] != 0) {
            ++*d->resumes;
            return ember_enter_compiled(tstate, frame, (ember_cont)d->entries[index], 0);
        }
    }
    return _PyEval_EvalFrame(tstate, frame, 0);
}

/* osr.c: the interpreter's run of a frame compiled code handed over, which
 * may come back to compiled code at a back-edge. */
PyObject *ember_eval_handed_over(PyThreadState *tstate, _PyInterpreterFrame *frame);
/* gen.c: what ember_drained_arg and ember_call_draining need, made once. */
int ember_drain_init(void);
PyObject *ember_eval_interpreted(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag);

#endif
