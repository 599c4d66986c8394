/* Tier 1's run-time helpers: entering compiled code, handing a frame to the
 * interpreter, exception unwinding, and the slow paths stencils call.
 * Compiled into the ember module with clang (preserve_none), against
 * CPython 3.14's headers. Stencils reach these through Symbol holes. */
#include "../../stencils/c/ember_stencil.h"
#include "glue.h"
#include "pycore_function.h"
#include "pycore_genobject.h"

PyObject *
ember_run(PyThreadState *tstate, _PyInterpreterFrame *frame, ember_cont entry)
{
    return ember_run_compiled(tstate, frame, entry);
}

/* ember_run for a frame being resumed: a generator's, coroutine's or async
 * generator's needs no hold on its code object (ember_enter_compiled). */
PyObject *
ember_resume(PyThreadState *tstate, _PyInterpreterFrame *frame, ember_cont entry)
{
    return ember_enter_compiled(tstate, frame, entry, frame->owner != FRAME_OWNED_BY_GENERATOR);
}

/* Told of every hand-off, with the frame's code object (set by the
 * runtime: the interpreter may specialise that code now, which compiled code
 * picks up by recompiling). */
void (*ember_handoff_observer)(PyObject *code) = NULL;

/* The interpreter takes over the frame at frame->instr_ptr and runs it to
 * its end. */
PyObject *
ember_handoff(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, PyThreadState *tstate)
{
    if (ember_handoff_observer != NULL) {
        ember_handoff_observer((PyObject *)_PyFrame_GetCode(frame));
    }
    frame->stackpointer = stack_pointer;
    tstate->current_frame = frame->previous;
    tstate->py_recursion_remaining++;
    return ember_eval_handed_over(tstate, frame);
}

/* Decides for ember_may_respecialise, with the frame's code object and
 * the reason (EMBER_RETRY_*; set by the runtime; without it, always yes). */
int (*ember_respecialise_policy)(PyObject *code, int why) = NULL;

int
ember_may_respecialise(_PyInterpreterFrame *frame, int why)
{
    if (ember_respecialise_policy == NULL) {
        return 1;
    }
    return ember_respecialise_policy((PyObject *)_PyFrame_GetCode(frame), why);
}

void
ember_decref_last(PyObject *o)
{
    PyTypeObject *type = Py_TYPE(o);
    if (type == &PyFloat_Type) {
        Py_DECREF_MORTAL_SPECIALIZED(o, _PyFloat_ExactDealloc);
    }
    else if (type == &PyLong_Type) {
        Py_DECREF_MORTAL_SPECIALIZED(o, _PyLong_ExactDealloc);
    }
    else {
        Py_DECREF_MORTAL(o);
    }
}

void
ember_dealloc_zero(PyObject *o)
{
    PyTypeObject *type = Py_TYPE(o);
    if (type == &PyFloat_Type) {
        _PyReftracerTrack(o, PyRefTracer_DESTROY);
        _PyFloat_ExactDealloc(o);
    }
    else if (type == &PyLong_Type) {
        _PyReftracerTrack(o, PyRefTracer_DESTROY);
        _PyLong_ExactDealloc(o);
    }
    else {
        _Py_Dealloc(o);
    }
}

/* The eval breaker's pending work, at a back-edge of compiled code: -1 on
 * an error, 1 if the frame must go on in the interpreter because events
 * are now set on its code alone (a hand-off: its compiled code does not
 * report them), else 0. */
int
ember_handle_pending(PyThreadState *tstate)
{
    if (_Py_HandlePending(tstate) < 0) {
        return -1;
    }
    return ember_monitored_locally(_PyFrame_GetCode(tstate->current_frame));
}

/* The exception table's varint: 6 bits a byte, bit 6 says more follow. */
static const unsigned char *
read_varint(const unsigned char *p, int *out)
{
    int val = *p & 63;
    while (*p & 64) {
        p++;
        val = (val << 6) | (*p & 63);
    }
    *out = val;
    return p + 1;
}

/* Entries are (start, size, target, depth<<1|lasti), in code units, sorted
 * by start; the first byte of an entry has bit 7 set. */
static int
find_handler(PyCodeObject *code, int index, int *level, int *handler, int *lasti)
{
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(code->co_exceptiontable);
    const unsigned char *end = p + PyBytes_GET_SIZE(code->co_exceptiontable);
    while (p < end) {
        int start, size, target, depth_lasti;
        p = read_varint(p, &start);
        p = read_varint(p, &size);
        p = read_varint(p, &target);
        p = read_varint(p, &depth_lasti);
        if (start > index) {
            return 0;
        }
        if (index < start + size) {
            *handler = target;
            *level = depth_lasti >> 1;
            *lasti = depth_lasti & 1;
            return 1;
        }
    }
    return 0;
}

int
ember_unwind(_PyInterpreterFrame *frame, _PyStackRef **stack_pointer_p, PyThreadState *tstate,
             int index, int add_traceback)
{
    _PyStackRef *sp = *stack_pointer_p;
    frame->stackpointer = sp;
    if (add_traceback) {
        if (!_PyFrame_IsIncomplete(frame)) {
            PyFrameObject *f = frame->frame_obj;
            if (f != NULL) {
                PyTraceBack_Here(f);
            }
            else {
                /* This frame is tstate's current one while compiled code
                 * runs. Making its frame object can fail: the interpreter
                 * then raises that MemoryError instead, but
                 * PyThreadState_GetFrame clears it, so raise it again. */
                f = PyThreadState_GetFrame(tstate);
                if (f != NULL) {
                    PyTraceBack_Here(f);
                    Py_DECREF(f);
                }
                else if (!_PyErr_Occurred(tstate)) {
                    PyErr_NoMemory();
                }
            }
        }
        _PyEval_MonitorRaise(tstate, frame, frame->instr_ptr);
    }
    PyCodeObject *code = _PyFrame_GetCode(frame);
    _PyStackRef *base = _PyFrame_Stackbase(frame);
    int level, handler, lasti;
    for (;;) {
        if (!find_handler(code, index, &level, &handler, &lasti)) {
            while (sp > base) {
                sp--;
                frame->stackpointer = sp;
                PyStackRef_XCLOSE(*sp);
            }
            tstate->py_recursion_remaining++;
            tstate->current_frame = frame->previous;
            _PyEval_FrameClearAndPop(tstate, frame);
            return -1;
        }
        _PyStackRef *new_top = base + level;
        while (sp > new_top) {
            sp--;
            frame->stackpointer = sp;
            PyStackRef_XCLOSE(*sp);
        }
        if (lasti) {
            /* A tagged int, as the interpreter pushes it: a frame unwound
             * here may re-raise in the interpreter and the reverse
             * (generators suspend inside handlers; throw() runs there). */
            *sp++ = PyStackRef_TagInt(_PyInterpreterFrame_LASTI(frame));
        }
        PyObject *exc = _PyErr_GetRaisedException(tstate);
        *sp++ = PyStackRef_FromPyObjectSteal(exc);
        frame->stackpointer = sp;
        frame->instr_ptr = _PyFrame_GetBytecode(frame) + handler;
        *stack_pointer_p = sp;
        return handler;
    }
}

int
ember_do_raise(PyThreadState *tstate, PyObject *exc, PyObject *cause)
{
    PyObject *type = NULL, *value = NULL;
    if (exc == NULL) {
        PyObject *handled = PyErr_GetHandledException();
        if (handled == NULL || handled == Py_None) {
            Py_XDECREF(handled);
            _PyErr_SetString(tstate, PyExc_RuntimeError, "No active exception to reraise");
            return 0;
        }
        _PyErr_SetRaisedException(tstate, handled);
        return 1;
    }
    if (PyExceptionClass_Check(exc)) {
        type = exc;
        value = PyObject_CallNoArgs(exc);
        if (value == NULL) {
            goto fail;
        }
        if (!PyExceptionInstance_Check(value)) {
            _PyErr_Format(tstate, PyExc_TypeError,
                          "calling %R should have returned an instance of BaseException, not %R",
                          type, Py_TYPE(value));
            goto fail;
        }
    }
    else if (PyExceptionInstance_Check(exc)) {
        value = exc;
        type = Py_NewRef(PyExceptionInstance_Class(exc));
    }
    else {
        Py_DECREF(exc);
        _PyErr_SetString(tstate, PyExc_TypeError, "exceptions must derive from BaseException");
        goto fail;
    }
    if (cause != NULL) {
        PyObject *fixed_cause;
        if (PyExceptionClass_Check(cause)) {
            fixed_cause = PyObject_CallNoArgs(cause);
            if (fixed_cause == NULL) {
                goto fail;
            }
            if (!PyExceptionInstance_Check(fixed_cause)) {
                _PyErr_Format(tstate, PyExc_TypeError,
                              "calling %R should have returned an instance of BaseException, not %R",
                              cause, Py_TYPE(fixed_cause));
                Py_DECREF(fixed_cause);
                goto fail;
            }
            Py_DECREF(cause);
        }
        else if (PyExceptionInstance_Check(cause)) {
            fixed_cause = cause;
        }
        else if (Py_IsNone(cause)) {
            Py_DECREF(cause);
            fixed_cause = NULL;
        }
        else {
            _PyErr_SetString(tstate, PyExc_TypeError, "exception causes must derive from BaseException");
            goto fail;
        }
        cause = NULL;
        PyException_SetCause(value, fixed_cause);
    }
    PyErr_SetObject(type, value);
    Py_DECREF(value);
    Py_DECREF(type);
    return 0;
fail:
    Py_XDECREF(value);
    Py_XDECREF(type);
    Py_XDECREF(cause);
    return 0;
}

/* Every Python function's vectorcall unless replaced (PyFunction_SetVectorcall):
 * CPython's _PyFunction_Vectorcall, which it does not export, so learnt from
 * a function made at start-up (ember_glue_init). NULL before that, which
 * turns the fast path below off. */
static vectorcallfunc ember_function_vectorcall = NULL;
/* The tp_init of every class whose __init__ is written in Python
 * (typeobject.c's slot_tp_init, not exported either); NULL turns the
 * instantiation fast path off. */
static initproc ember_slot_tp_init = NULL;

int
ember_glue_init(void)
{
    /* A function and a class with a Python __init__, made without the
     * compiler (running source through it cost ~0.3M instructions of every
     * EMBER=1 process's start-up): an empty code object suffices, as
     * neither is ever called. */
    int ok = -1;
    PyObject *globals = NULL, *func = NULL, *cls = NULL;
    PyCodeObject *code = PyCode_NewEmpty("<ember>", "__init__", 0);
    if (code == NULL) {
        goto done;
    }
    globals = PyDict_New();
    if (globals == NULL) {
        goto done;
    }
    func = PyFunction_New((PyObject *)code, globals);
    if (func == NULL) {
        goto done;
    }
    cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s()N", "C", Py_BuildValue("{sO}", "__init__", func));
    if (cls == NULL) {
        goto done;
    }
    ember_function_vectorcall = ((PyFunctionObject *)func)->vectorcall;
    ember_slot_tp_init = ((PyTypeObject *)cls)->tp_init;
    ok = ember_drain_init();
done:
    Py_XDECREF(cls);
    Py_XDECREF(func);
    Py_XDECREF(globals);
    Py_XDECREF(code);
    return ok;
}

/* A Python function whose vectorcall is CPython's own (not replaced through
 * PyFunction_SetVectorcall): a call may push its frame directly. */
static inline __attribute__((always_inline)) int
plain_function(PyObject *f)
{
    return Py_TYPE(f) == &PyFunction_Type && ((PyFunctionObject *)f)->vectorcall == ember_function_vectorcall;
}

/* The plain function `f` can be entered with `total` positional arguments
 * by moving them into its frame (and its defaults after them). */
static inline __attribute__((always_inline)) int
simple_positional_shape(PyThreadState *tstate, PyFunctionObject *f, int total)
{
    PyCodeObject *code = (PyCodeObject *)f->func_code;
    PyObject *defaults = f->func_defaults;
    int argcount = code->co_argcount;
    return (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS | CO_OPTIMIZED)) == CO_OPTIMIZED
        && code->co_kwonlyargcount == 0 && total <= argcount
        && (total == argcount || (defaults != NULL && argcount - total <= PyTuple_GET_SIZE(defaults)))
        && _PyThreadState_HasStackSpace(tstate, code->co_framesize);
}

/* Move `n` arguments into a callee's locals. Most calls pass few: copied
 * one by one, without the generic loop's set-up (clang vectorises and
 * unrolls it: about 15 instructions before the first argument moves). */
static inline __attribute__((always_inline)) void
move_args(_PyStackRef *to, const _PyStackRef *from, int n)
{
    switch (n) {
    case 4:
        to[3] = from[3];
        /* fall through */
    case 3:
        to[2] = from[2];
        /* fall through */
    case 2:
        to[1] = from[1];
        /* fall through */
    case 1:
        to[0] = from[0];
        /* fall through */
    case 0:
        return;
    default:
        for (int i = 0; i < n; i++) {
            to[i] = from[i];
        }
    }
}

/* Push the frame of `func` (stolen), checked by simple_positional_shape,
 * moving the `total` arguments at `args` into it. */
static inline __attribute__((always_inline)) _PyInterpreterFrame *
push_simple(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef func, _PyStackRef *args, int total)
{
    PyFunctionObject *f = (PyFunctionObject *)PyStackRef_AsPyObjectBorrow(func);
    int argcount = ((PyCodeObject *)f->func_code)->co_argcount;
    _PyInterpreterFrame *callee = _PyFrame_PushUnchecked(tstate, func, argcount, frame);
    move_args(callee->localsplus, args, total);
    int missing = argcount - total;
    if (missing > 0) {
        PyObject *defaults = f->func_defaults;
        Py_ssize_t ndefaults = PyTuple_GET_SIZE(defaults);
        for (int i = 0; i < missing; i++) {
            callee->localsplus[total + i] =
                PyStackRef_FromPyObjectNew(PyTuple_GET_ITEM(defaults, ndefaults - missing + i));
        }
    }
    return callee;
}

/* The records and the evaluator, as glue.h describes them. */
struct ember_records ember_records;
_PyFrameEvalFunction ember_evaluator = NULL;

void
ember_set_records(const void *slots, uintptr_t mask, uint32_t shift)
{
    ember_records.slots = slots;
    ember_records.mask = mask;
    ember_records.shift = shift;
}

void
ember_set_evaluator(_PyFrameEvalFunction evaluator)
{
    ember_evaluator = evaluator;
}

/* Run a frame just pushed for a call, `d` its code's record (NULL: none):
 * what _PyEval_EvalFrame would do, but entering the callee's compiled code
 * directly where Ember's evaluator would do only that (glue.h,
 * ember_direct_enterable). */
static inline __attribute__((always_inline)) PyObject *
enter_pushed_with(PyThreadState *tstate, _PyInterpreterFrame *callee, ember_direct_entry *d)
{
    if (d != NULL && ember_direct_enterable(d, _PyFrame_GetCode(callee))) {
        ++*d->calls;
        return ember_run_compiled(tstate, callee, (ember_cont)d->entry);
    }
    return _PyEval_EvalFrame(tstate, callee, 0);
}

/* The same, the callee's record found by probing the table. */
static inline __attribute__((always_inline)) PyObject *
enter_pushed(PyThreadState *tstate, _PyInterpreterFrame *callee)
{
    return enter_pushed_with(tstate, callee, ember_find_direct(tstate, _PyFrame_GetCode(callee)));
}

/* --- Resuming through `yield from` / `await` ------------------------------
 *
 * A generator or coroutine suspended in a `yield from`/`await` loop (SEND,
 * YIELD_VALUE 1, RESUME, JUMP_BACKWARD_NO_INTERRUPT back to the SEND) whose
 * delegate is itself a generator or coroutine does nothing when resumed but
 * pass the sent value down to its delegate and, when that yields, yield the
 * same value up. Its compiled code would do that through a native call per
 * level (the SEND's, then the delegate's entry); instead the levels are
 * made current one after the other, as resuming each and running it up to
 * its SEND does (generator state, exception state, frame chain, recursion
 * depth, instr_ptr at the SEND), the innermost delegate is sent the value,
 * and on a yield each level is suspended again as its YIELD_VALUE does. A
 * level whose delegate returned or raised goes on in its compiled code from
 * its SEND's outcome (the END_SEND, or the SEND's exception handling), as
 * the SEND stencil would. A level is passed through only when its compiled
 * code is what would run it: compiled and valid for the current
 * instrumentation version (whose RESUME after a yield-from has nothing else
 * to do), with an entry where it would resume. */

#define EMBER_CHAIN_MAX 64

/* Levels passed through so far (ember.stats(): tier1 delegations). */
uint64_t ember_delegations_passed = 0;

/* The generator found at each depth of the last chain passed. Only a
 * prediction, never dereferenced unless the level above holds it (its
 * delegate is the same pointer, so it is alive): finding level k+1 from
 * level k is a chain of dependent loads (the frame's stack top, then its
 * type), which a walk from the prediction does not wait for, as the
 * levels of a chain resumed again and again are mostly the same. */
static PyGenObject *chain_seen[EMBER_CHAIN_MAX + 1];

/* Code units from a `yield from`/`await` loop's SEND (and its cache) over
 * the YIELD_VALUE to the RESUME a level is suspended at. */
#define SEND_TO_RESUME (1 + INLINE_CACHE_ENTRIES_SEND + 1)

/* The SEND of the `yield from`/`await` loop `frame` is suspended in (at the
 * RESUME after its YIELD_VALUE), or NULL when the code there is not that
 * loop as the compiler emits it. */
static _Py_CODEUNIT *
delegating_send(_PyInterpreterFrame *frame)
{
    _Py_CODEUNIT *first = _PyFrame_GetBytecode(frame);
    _Py_CODEUNIT *ip = frame->instr_ptr;
    if (ip - first < 4) {
        return NULL;
    }
    int resume = ip[0].op.code;
    if ((resume != EMBER_OP_RESUME && resume != EMBER_OP_RESUME_CHECK)
        || (ip[0].op.arg & RESUME_OPARG_LOCATION_MASK) < RESUME_AFTER_YIELD_FROM) {
        return NULL;
    }
    /* JUMP_BACKWARD_NO_INTERRUPT 5: from after itself back to the SEND. */
    if (ip[-1].op.code != EMBER_OP_YIELD_VALUE || ip[-1].op.arg != 1 || ip[1].op.code != EMBER_OP_JUMP_BACKWARD_NO_INTERRUPT
        || ip[1].op.arg != 5) {
        return NULL;
    }
    _Py_CODEUNIT *send = ip - SEND_TO_RESUME;
    if ((send[0].op.code != EMBER_OP_SEND && send[0].op.code != EMBER_OP_SEND_GEN) || send[-1].op.code == EMBER_OP_EXTENDED_ARG) {
        return NULL;
    }
    return send;
}

/* The level whose SEND got `status` (PYGEN_RETURN: the delegate returned
 * *presult; PYGEN_ERROR: it raised) goes on in its compiled code, as its
 * SEND stencil would: a PySendResult for what it does next. */
static int
continue_after_send(PyThreadState *tstate, PyGenObject *gen, const uint64_t *entries, _Py_CODEUNIT *send, int status,
                    PyObject **presult)
{
    _PyInterpreterFrame *frame = &gen->gi_iframe;
    _PyStackRef *sp = frame->stackpointer;
    int index = (int)(send - _PyFrame_GetBytecode(frame));
    ember_cont entry;
    if (status == PYGEN_RETURN) {
        /* (receiver -- receiver, retval), on to the END_SEND. */
        *sp++ = PyStackRef_FromPyObjectSteal(*presult);
        entry = (ember_cont)entries[index + 1 + INLINE_CACHE_ENTRIES_SEND + send->op.arg];
    }
    else {
        int handler = ember_unwind(frame, &sp, tstate, index, 1);
        if (handler < 0) {
            *presult = NULL;
            return PYGEN_ERROR;
        }
        entry = (ember_cont)entries[handler];
    }
    /* The generator's code object outlives the run (ember_enter_compiled). */
    PyObject *res = entry(frame, sp, tstate);
    *presult = res;
    if (res == NULL) {
        return PYGEN_ERROR;
    }
    return FRAME_STATE_SUSPENDED(gen->gi_frame_state) ? PYGEN_NEXT : PYGEN_RETURN;
}

int ember_send(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *receiver, PyObject *v,
               PyObject **result, void *site);

/* Resume `gen` (suspended in a `yield from`/`await`) with `arg` through
 * the levels that can be passed (see above). A PySendResult, or 2 when not
 * even `gen` can be: the caller then resumes it the usual way. */
int
ember_resume_delegating(PyThreadState *tstate, PyGenObject *gen, PyObject *arg, PyObject **presult)
{
    struct {
        PyGenObject *gen;
        const uint64_t *entries;
        _Py_CODEUNIT *send;
    } level[EMBER_CHAIN_MAX];
    int n = 0;
    uintptr_t version = _Py_atomic_load_uintptr_relaxed(&tstate->eval_breaker) & ~(uintptr_t)_PY_EVAL_EVENTS_MASK;
    PyGenObject *g = gen;
    /* The C stack does not grow while the levels are passed. */
    if (_Py_ReachedRecursionLimit(tstate)) {
        return 2;
    }
    /* The levels of a recursive generator share their code object, and
     * are suspended at one of its few `yield from`s (a tree's: left and
     * right): the checks of a resumption point (the same instr_ptr, so the
     * same code object) hold for every level suspended there. The last two
     * points checked are kept; which of them a level is at is a select,
     * not a branch: a tree's levels are at its left or right `yield from`
     * as the path to the current leaf goes, which no predictor learns. */
    _Py_CODEUNIT *checked_at = NULL, *checked_before = NULL;
    ember_direct_entry *d_at = NULL, *d_before = NULL;
    PyCodeObject *probed = NULL;
    ember_direct_entry *probed_d = NULL;
    _PyErr_StackItem *exc_info = tstate->exc_info;
    int recursion_remaining = tstate->py_recursion_remaining;
    _PyInterpreterFrame *current_frame = tstate->current_frame;
    while (n < EMBER_CHAIN_MAX && g->gi_frame_state == FRAME_SUSPENDED_YIELD_FROM) {
        _PyInterpreterFrame *f = &g->gi_iframe;
        _Py_CODEUNIT *ip = f->instr_ptr;
        ember_direct_entry *d;
        if (LIKELY((ip == checked_at) | (ip == checked_before))) {
            d = ip == checked_at ? d_at : d_before;
        }
        else {
            PyCodeObject *code = _PyFrame_GetCode(f);
            if (code != probed) {
                probed_d = ember_find_direct(tstate, code);
                probed = code;
            }
            d = probed_d;
            if (d == NULL || d->entries == NULL || d->version != version
                || code->_co_instrumentation_version != version || ember_monitored_locally(code)) {
                break;
            }
            _Py_CODEUNIT *ip_send = delegating_send(f);
            if (ip_send == NULL) {
                break;
            }
            uint64_t at = (uint64_t)(ip - _PyFrame_GetBytecode(f));
            uint64_t end_send =
                (uint64_t)(ip_send - _PyFrame_GetBytecode(f)) + 1 + INLINE_CACHE_ENTRIES_SEND + ip_send->op.arg;
            if (end_send >= d->n_entries || d->entries[at] == 0 || d->entries[end_send] == 0) {
                break;
            }
            checked_before = checked_at;
            d_before = d_at;
            checked_at = ip;
            d_at = d;
        }
        /* Where delegating_send found it, for a point that passed. */
        _Py_CODEUNIT *send = ip - SEND_TO_RESUME;
        PyGenObject *delegate = (PyGenObject *)PyStackRef_AsPyObjectBorrow(f->stackpointer[-1]);
        PyGenObject *next = chain_seen[n + 1];
        if (__builtin_expect(next != delegate, 0)) {
            chain_seen[n + 1] = delegate;
            next = delegate;
        }
        else {
            /* The same pointer, but the compiler must not know it: the next
             * level is then found without waiting for `delegate`'s load. */
            __asm__("" : "+r"(next));
        }
        if (Py_TYPE(next) != &PyGen_Type && Py_TYPE(next) != &PyCoro_Type) {
            break;
        }
        if (recursion_remaining <= 0) {
            break;
        }
        /* Resumed (ember_gen_resume, ember_run_compiled) and run up to its
         * SEND; the thread state's fields follow in locals, stored below. */
        g->gi_exc_state.previous_item = exc_info;
        exc_info = &g->gi_exc_state;
        g->gi_frame_state = FRAME_EXECUTING;
        ++*d->resumes;
        recursion_remaining--;
        f->previous = current_frame;
        current_frame = f;
        f->instr_ptr = send;
        level[n].gen = g;
        level[n].entries = d->entries;
        level[n].send = send;
        n++;
        g = next;
    }
    if (n == 0) {
        return 2;
    }
    tstate->exc_info = exc_info;
    tstate->py_recursion_remaining = recursion_remaining;
    tstate->current_frame = current_frame;
    ember_delegations_passed += (uint64_t)n;
    PyObject *result;
    int status = ember_send(tstate, &level[n - 1].gen->gi_iframe, (PyObject *)g, arg, &result, NULL);
    while (n > 0) {
        n--;
        PyGenObject *lg = level[n].gen;
        if (status == PYGEN_NEXT) {
            /* Its YIELD_VALUE: suspended again where it was. */
            _PyInterpreterFrame *f = &lg->gi_iframe;
            f->instr_ptr = level[n].send + SEND_TO_RESUME;
            lg->gi_frame_state = FRAME_SUSPENDED_YIELD_FROM;
            tstate->exc_info = lg->gi_exc_state.previous_item;
            lg->gi_exc_state.previous_item = NULL;
            tstate->py_recursion_remaining++;
            tstate->current_frame = f->previous;
            f->previous = NULL;
            continue;
        }
        status = continue_after_send(tstate, lg, level[n].entries, level[n].send, status, &result);
    }
    *presult = result;
    return status;
}

/* C(args) for a class C of metaclass `type` with object's __new__ and a
 * Python __init__ taking them positionally: what type_call does (tp_alloc,
 * then __init__ through slot_tp_init, whose result must be None), with
 * __init__'s frame pushed from the caller's stack as for any Python call.
 * The interpreter's CALL_ALLOC_AND_ENTER_INIT does the same inline. */
/* call_class's rare paths, out of line: the function stays small enough
 * for clang to inline CPython's frame push into it. */
static __attribute__((noinline, cold)) PyObject *
class_alloc_failed(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, PyObject *init)
{
    Py_DECREF(init);
    for (_PyStackRef *p = base + 2 + oparg; p > base;) {
        p--;
        frame->stackpointer = p;
        PyStackRef_XCLOSE(*p);
    }
    return NULL;
}

static __attribute__((noinline, cold)) PyObject *
init_returned_not_none(PyObject *r, PyObject *self)
{
    PyErr_Format(PyExc_TypeError, "__init__() should return None, not '%.200s'", Py_TYPE(r)->tp_name);
    Py_DECREF(r);
    Py_DECREF(self);
    return NULL;
}

static int
call_class(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg, PyObject **res)
{
    PyTypeObject *tp = (PyTypeObject *)PyStackRef_AsPyObjectBorrow(base[0]);
    if (tp->tp_new != PyBaseObject_Type.tp_new || tp->tp_init != ember_slot_tp_init || ember_slot_tp_init == NULL
        || (tp->tp_flags & Py_TPFLAGS_IS_ABSTRACT)) {
        return 0;
    }
    PyObject *init = _PyType_Lookup(tp, &_Py_ID(__init__));
    if (init == NULL || !plain_function(init) || !simple_positional_shape(tstate, (PyFunctionObject *)init, oparg + 1)) {
        return 0;
    }
    /* Held across the allocation, which may run a collection. */
    Py_INCREF(init);
    PyObject *self = tp->tp_alloc(tp, 0);
    if (self == NULL) {
        *res = class_alloc_failed(frame, base, oparg, init);
        return 1;
    }
    /* (class, NULL, args) -> (__init__, self, args); the class lives on in
     * self's type. */
    _PyStackRef cls = base[0];
    base[0] = PyStackRef_FromPyObjectSteal(init);
    base[1] = PyStackRef_FromPyObjectNew(self);
    PyStackRef_CLOSE(cls);
    frame->stackpointer = base;
    _PyInterpreterFrame *callee = push_simple(tstate, frame, base[0], base + 1, oparg + 1);
    PyObject *r = enter_pushed(tstate, callee);
    if (r == NULL) {
        Py_DECREF(self);
        *res = NULL;
        return 1;
    }
    if (r != Py_None) {
        *res = init_returned_not_none(r, self);
        return 1;
    }
    *res = self;
    return 1;
}

/* A call of a plain Python function (or of a bound method of one), run as
 * the interpreter runs CALL_PY_GENERAL, CALL_BOUND_METHOD_GENERAL and
 * CALL_KW_PY: the callee's frame is pushed and initialised straight from the
 * caller's stack, which it steals, and run by the installed evaluator. With
 * an evaluator installed the interpreter never specialises calls to Python
 * functions, so every such call would otherwise marshal its arguments
 * through vectorcall and _PyEval_Vector. Returns 0, having touched nothing,
 * for any other callable. A function whose vectorcall was replaced is not
 * plain: its vectorcall must run. */
static int
ember_call_py(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int has_kwnames,
              PyObject **res)
{
    PyObject *callable = PyStackRef_AsPyObjectBorrow(base[0]);
    PyTypeObject *type = Py_TYPE(callable);
    /* A function first: the common case, one test. */
    if (LIKELY(type == &PyFunction_Type)) {
        if (!plain_function(callable)) {
            return 0;
        }
    }
    else if (type == &PyMethod_Type && PyStackRef_IsNull(base[1])) {
        PyObject *func = ((PyMethodObject *)callable)->im_func;
        if (!plain_function(func)) {
            return 0;
        }
        /* (method, NULL) -> (function, self), as the interpreter's CALL does. */
        base[1] = PyStackRef_FromPyObjectNew(((PyMethodObject *)callable)->im_self);
        _PyStackRef method = base[0];
        base[0] = PyStackRef_FromPyObjectNew(func);
        frame->stackpointer = base + 2 + oparg + has_kwnames;
        PyStackRef_CLOSE(method);
        callable = func;
    }
    else if (type == &PyType_Type) {
        return !has_kwnames && PyStackRef_IsNull(base[1]) && call_class(tstate, frame, base, oparg, res);
    }
    else {
        return 0;
    }
    int has_self = !PyStackRef_IsNull(base[1]);
    _PyStackRef *args = base + 2 - has_self;
    int total = oparg + has_self;
    if (!has_kwnames && simple_positional_shape(tstate, (PyFunctionObject *)callable, total)) {
        /* Positional arguments only, for positional parameters only: what
         * initialize_locals would do comes down to moving them, and the
         * defaults of the parameters they leave out. */
        frame->stackpointer = base;
        /* Returns early rather than joining the push below: joined, clang
         * stopped inlining CPython's frame push here (a call per call). */
        if (UNLIKELY(((PyCodeObject *)PyFunction_GET_CODE(callable))->co_flags
                     & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
            PyObject *gen = ember_make_generator(tstate, base[0], args, total, NULL);
            if (gen != NULL) {
                *res = gen;
                return 1;
            }
        }
        *res = enter_pushed(tstate, push_simple(tstate, frame, base[0], args, total));
        return 1;
    }
    PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(callable);
    PyObject *kwnames = has_kwnames ? PyStackRef_AsPyObjectSteal(base[2 + oparg]) : NULL;
    int positional = total - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *locals = (code->co_flags & CO_OPTIMIZED)
        ? NULL : Py_NewRef(PyFunction_GET_GLOBALS(callable));
    /* The callable and the arguments now belong to the callee's frame. */
    frame->stackpointer = base;
    _PyInterpreterFrame *callee = _PyEvalFramePushAndInit(tstate, base[0], locals, args, (size_t)positional,
                                                          kwnames, frame);
    Py_XDECREF(kwnames);
    *res = callee == NULL ? NULL : enter_pushed(tstate, callee);
    return 1;
}

/* Any other callable: through vectorcall, with the arguments as an array.
 * Out of line: its array would make every call's stack frame bigger. */
static __attribute__((noinline)) PyObject *
call_vectorcall(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int has_kwnames)
{
    PyObject *callable = PyStackRef_AsPyObjectBorrow(base[0]);
    int has_self = !PyStackRef_IsNull(base[1]);
    _PyStackRef *args = base + 2 - has_self;
    int total = oparg + has_self;
    PyObject *kwnames = has_kwnames ? PyStackRef_AsPyObjectBorrow(base[2 + oparg]) : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *small[1 + 16];
    PyObject **buf = small;
    PyObject *res = NULL;
    if (total + 1 > (int)(sizeof(small) / sizeof(small[0]))) {
        buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (buf == NULL) {
            PyErr_NoMemory();
            goto close;
        }
    }
    for (int i = 0; i < total; i++) {
        buf[1 + i] = PyStackRef_AsPyObjectBorrow(args[i]);
    }
    int drained = nkw == 0 && ember_maybe_drained(buf + 1, total) ? ember_drained_arg(callable, buf + 1, total) : -1;
    if (drained >= 0) {
        /* As the specialised calls' (fast.c, ember_call_cfast). */
        res = ember_call_draining(PyThreadState_Get(), callable, buf + 1, total, drained, 0);
    }
    else {
        res = PyObject_Vectorcall(callable, buf + 1, (size_t)(total - nkw) | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    }
    if (buf != small) {
        PyMem_Free(buf);
    }
close:
    frame->stackpointer = base;
    for (_PyStackRef *p = base + 2 + oparg + has_kwnames; p > base;) {
        p--;
        PyStackRef_XCLOSE(*p);
    }
    return res;
}

/* A call at the site missed its cache: fill it with `f` when the direct
 * push (or ember_make_generator) takes `f` with exactly its parameters
 * (ember_call_py) -- at the first miss and every EMBER_CALL_CACHE_RELEARN-th
 * after. Out of line: kept small, the site's common path gets CPython's
 * frame push inlined. */
static __attribute__((noinline)) void
learn_call(PyThreadState *tstate, ember_call_cache *cache, PyFunctionObject *f, int total)
{
    if ((cache->misses++ & (EMBER_CALL_CACHE_RELEARN - 1)) != 0) {
        return;
    }
    if (!_PyFunction_IsVersionValid(f->func_version) || !plain_function((PyObject *)f) || total >= UINT16_MAX) {
        return;
    }
    PyCodeObject *code = (PyCodeObject *)f->func_code;
    if (total == code->co_argcount && simple_positional_shape(tstate, f, total)) {
        ember_direct_entry *d = ember_find_direct(tstate, code);
        if (d != NULL) {
            cache->func_version = f->func_version;
            cache->args_plus_one = (uint16_t)(total + 1);
            cache->generator = (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
            cache->direct = d;
        }
    }
}

PyObject *
ember_call_site(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg, void *site)
{
    ember_call_cache *cache = site;
    PyObject *callable = PyStackRef_AsPyObjectBorrow(base[0]);
    int has_self = !PyStackRef_IsNull(base[1]);
    int total = oparg + has_self;
    /* LIKELY throughout: clang inlines less into a path it thinks rare, and
     * left CPython's frame push out of line here. */
    if (LIKELY(Py_TYPE(callable) == &PyFunction_Type)) {
        PyFunctionObject *f = (PyFunctionObject *)callable;
        if (LIKELY(f->func_version == cache->func_version && (uint32_t)total + 1 == cache->args_plus_one)) {
            /* The function's shape is known (see ember_call_cache); what
             * depends on the thread is checked as always. */
            if (LIKELY(tstate->interp->eval_frame == ember_evaluator
                       && _PyThreadState_HasStackSpace(tstate, ((PyCodeObject *)f->func_code)->co_framesize))) {
                frame->stackpointer = base;
                if (UNLIKELY(cache->generator)) {
                    PyObject *gen = ember_make_generator(tstate, base[0], base + 2 - has_self, total, cache->direct);
                    if (gen != NULL) {
                        return gen;
                    }
                    /* Untouched: the usual way (ember_call_py). */
                    return ember_call(tstate, frame, base, oparg, 0);
                }
                _PyInterpreterFrame *callee = push_simple(tstate, frame, base[0], base + 2 - has_self, total);
                return enter_pushed_with(tstate, callee, cache->direct);
            }
        }
        else {
            learn_call(tstate, cache, f, total);
        }
    }
    /* The generic CALL's adaptive counter, for every call that is not a
     * cached one: those call Python functions, which CPython's specialiser
     * refuses while an evaluator is installed (it would back the counter
     * off). */
    ADAPTIVE_COUNTER(frame->instr_ptr, EMBER_OP_CALL, PyFunction_Check(callable) || PyMethod_Check(callable),
                     return EMBER_CALL_HAND_OFF);
    return ember_call(tstate, frame, base, oparg, 0);
}

PyObject *
ember_call(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int has_kwnames)
{
    PyObject *py_res;
    if (ember_call_py(tstate, frame, base, oparg, has_kwnames, &py_res)) {
        return py_res;
    }
    return call_vectorcall(frame, base, oparg, has_kwnames);
}

PyObject *
ember_build_tuple(_PyStackRef *items, int n)
{
    PyObject *t = _PyTuple_FromStackRefStealOnSuccess(items, n);
    if (t == NULL) {
        for (int i = n - 1; i >= 0; i--) {
            PyStackRef_CLOSE(items[i]);
        }
    }
    return t;
}

PyObject *
ember_build_list(_PyStackRef *items, int n)
{
    PyObject *l = _PyList_FromStackRefStealOnSuccess(items, n);
    if (l == NULL) {
        for (int i = n - 1; i >= 0; i--) {
            PyStackRef_CLOSE(items[i]);
        }
    }
    return l;
}

void
ember_clear_cache(char *start, char *end)
{
    __builtin___clear_cache(start, end);
}
