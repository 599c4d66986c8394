/* On-stack replacement: a frame that the interpreter runs (a function
 * called once that loops, a benchmark's main function) moves to compiled
 * code at one of its loops' back-edges, without waiting for a next call.
 *
 * CPython's own way in is used: the JUMP_BACKWARD instructions of a code
 * object are replaced by ENTER_EXECUTOR, whose executor (an object laid out
 * as CPython's _PyExecutorObject, in the code object's co_executors) has
 * ember_osr_entry as its jit_code. The interpreter calls it at the back-edge
 * (after checking the eval breaker itself) with the frame and its stack
 * pointer, and dispatches at the instruction it returns, in
 * tstate->current_frame. Whatever reads the bytecode as the programmer
 * sees it (co_code, dis, code comparison, marshal) and whatever instruments
 * code (sys.monitoring, settrace) sees through ENTER_EXECUTOR or removes it
 * (_PyCode_Clear_Executors), as for CPython's own executors; ours are never
 * linked into the interpreter's list, so nothing else invalidates them.
 *
 * Only a frame that Ember's evaluator handed to the interpreter
 * (ember_eval_interpreted) moves: its caller is then the interpreter's entry
 * frame, whose next instruction returns from _PyEval_EvalFrameDefault. When
 * compiled code ends the frame, its result is pushed there; when the frame
 * ends with an exception, the exception is kept aside, a NULL result is
 * returned through that instruction, and ember_eval_interpreted raises it
 * again (going to the interpreter's error handling from the entry frame
 * would unwind a frame that has no code). */
#include "glue.h"
#include "pycore_optimizer.h"

typedef struct {
    _PyExecutorObject base;
    /* Where the JUMP_BACKWARD jumps: the interpreter goes on there when the
     * frame stays in the interpreter. */
    _Py_CODEUNIT *target;
    /* Taken out by Ember itself (osr_uninstall), not by CPython. */
    int uninstalled;
    /* Times taken while the code had no compiled entry. */
    uint32_t waiting;
} ember_osr_executor;

/* The decision (runtime/src/hook.rs): the compiled entry at code unit
 * `index` of the frame's code to continue the frame in, or 0, or
 * EMBER_OSR_NEVER: no frame of this code will be, take the entries out. */
#define EMBER_OSR_NEVER UINT64_MAX
#define EMBER_OSR_CHECK_EVERY 16
uint64_t (*ember_osr_policy)(PyThreadState *tstate, _PyInterpreterFrame *frame, uint64_t index, int handed_over) = NULL;

/* Frames moved to compiled code at a back-edge (ember.stats()). */
uint64_t ember_osr_entries = 0;

/* The frame the innermost ember_eval_interpreted runs, and the exception a
 * frame moved to compiled code ended with, on its way out. */
static __thread __attribute__((tls_model("initial-exec"))) _PyInterpreterFrame *osr_frame = NULL;
static __thread __attribute__((tls_model("initial-exec"))) PyObject *osr_exception = NULL;
/* The frame the innermost ember_eval_handed_over runs. */
static __thread __attribute__((tls_model("initial-exec"))) _PyInterpreterFrame *osr_handed_over = NULL;
/* Frames run from ember_osr_entry on this thread's native stack. A frame
 * that compiled code hands to the interpreter and that comes back at a
 * back-edge runs one level deeper (ember_handoff, the interpreter, this
 * entry): a frame going back and forth would grow the stack without end. */
static __thread __attribute__((tls_model("initial-exec"))) int osr_depth = 0;
#define EMBER_OSR_MAX_DEPTH 8

static PyObject *
osr_get_opcode(PyObject *self, PyObject *unused)
{
    return PyLong_FromLong(((ember_osr_executor *)self)->base.vm_data.opcode);
}

static PyObject *
osr_get_oparg(PyObject *self, PyObject *unused)
{
    return PyLong_FromLong(((ember_osr_executor *)self)->base.vm_data.oparg);
}

static PyObject *
osr_is_valid(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(((ember_osr_executor *)self)->base.vm_data.valid);
}

/* What dis (adaptive=True) asks of an executor. */
static PyMethodDef osr_methods[] = {
    {"get_opcode", osr_get_opcode, METH_NOARGS, NULL},
    {"get_oparg", osr_get_oparg, METH_NOARGS, NULL},
    {"is_valid", osr_is_valid, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static int
nothing_pending(void *unused)
{
    return 0;
}

/* CPython drops a code object's executors when it instruments the code
 * (sys.monitoring, settrace) and when the code dies. Instrumented for
 * events set on it alone, the code's compiled frames must go on in the
 * interpreter, and nothing else tells them: the eval breaker is set, and
 * their next check of it (ember_handle_pending) sees the events. */
static void
osr_dealloc(PyObject *self)
{
    if (!((ember_osr_executor *)self)->uninstalled) {
        (void)Py_AddPendingCall(nothing_pending, NULL);
    }
    PyObject_Free(self);
}

static PyTypeObject ember_osr_executor_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.osr_entry",
    .tp_basicsize = sizeof(ember_osr_executor),
    .tp_dealloc = osr_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = osr_methods,
};

_Py_CODEUNIT *ember_osr_entry(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, PyThreadState *tstate);

/* Put an executor at each of the `n` back-edges of `code` (not
 * instrumented, without executors of its own) at code units `sites`, whose
 * full opargs (EXTENDED_ARG prefixes included) are `opargs`; at most 256.
 * The number put, or -1 with an exception set. */
int
ember_osr_install(PyCodeObject *code, const uint32_t *sites, const uint32_t *opargs, int n)
{
    /* Not with CPython's JIT on (its JUMP_BACKWARD_JIT makes executors of
     * its own), nor on code instrumented once. */
    if (code->co_executors != NULL || code->_co_monitoring != NULL || n <= 0 || PyThreadState_Get()->interp->jit) {
        return 0;
    }
    if (!(ember_osr_executor_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&ember_osr_executor_type) < 0) {
        return -1;
    }
    /* The executor's number is ENTER_EXECUTOR's 8-bit oparg. */
    if (n > 256) {
        n = 256;
    }
    _PyExecutorArray *array = PyMem_Malloc(offsetof(_PyExecutorArray, executors) + n * sizeof(_PyExecutorObject *));
    if (array == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    array->size = 0;
    array->capacity = n;
    _Py_CODEUNIT *units = _PyCode_CODE(code);
    for (int k = 0; k < n; k++) {
        _Py_CODEUNIT *at = &units[sites[k]];
        ember_osr_executor *ex = PyObject_Malloc(sizeof(ember_osr_executor));
        if (ex == NULL) {
            break;
        }
        memset(ex, 0, sizeof(*ex));
        PyObject_Init((PyObject *)ex, &ember_osr_executor_type);
        /* JUMP_BACKWARD until it has run (dis shows the quickened
         * bytecode): ember_osr_entry, and the compiled JUMP_BACKWARD
         * stencil, then quicken it to JUMP_BACKWARD_NO_JIT as the
         * interpreter would (it does not rewrite an ENTER_EXECUTOR). */
        ex->base.vm_data.opcode = at->op.code;
        ex->base.vm_data.oparg = at->op.arg;
        ex->base.vm_data.valid = 1;
        ex->base.vm_data.index = (int)sites[k];
        ex->base.vm_data.code = code;
        ex->base.jit_code = (void *)ember_osr_entry;
        /* After the instruction and its one cache unit. */
        ex->target = at + 2 - opargs[k];
        int slot = array->size++;
        array->executors[slot] = &ex->base;
        at->op.code = EMBER_OP_ENTER_EXECUTOR;
        at->op.arg = (uint8_t)slot;
    }
    code->co_executors = array;
    return array->size;
}

/* The code unit an executor of ember_osr_install replaced: executor `slot`
 * of `code`, or 0 if it has none. */
uint32_t
ember_osr_replaced_unit(PyCodeObject *code, int slot)
{
    if (code->co_executors == NULL || slot >= code->co_executors->size || code->co_executors->executors[slot] == NULL) {
        return 0;
    }
    _PyExecutorObject *ex = code->co_executors->executors[slot];
    return (uint32_t)ex->vm_data.opcode | (uint32_t)ex->vm_data.oparg << 8;
}

/* Take the executors of ember_osr_install out of `code` again, its
 * back-edges as they were. */
static void
osr_uninstall(PyCodeObject *code)
{
    _PyExecutorArray *array = code->co_executors;
    if (array == NULL) {
        return;
    }
    for (int i = 0; i < array->size; i++) {
        _PyExecutorObject *ex = array->executors[i];
        if (ex == NULL || Py_TYPE(ex) != &ember_osr_executor_type) {
            /* Not only ours (CPython's JIT added some): leave them all. */
            return;
        }
    }
    _Py_CODEUNIT *units = _PyCode_CODE(code);
    for (int i = 0; i < array->size; i++) {
        _PyExecutorObject *ex = array->executors[i];
        _Py_CODEUNIT *at = &units[ex->vm_data.index];
        at->op.code = ex->vm_data.opcode;
        at->op.arg = ex->vm_data.oparg;
        array->executors[i] = NULL;
        ex->vm_data.code = NULL;
        ((ember_osr_executor *)ex)->uninstalled = 1;
        /* The interpreter may hold a reference while it runs this one. */
        Py_DECREF(ex);
    }
    code->co_executors = NULL;
    PyMem_Free(array);
}

/* ember_monitored_locally, for the runtime. */
int
ember_code_has_local_events(PyCodeObject *code)
{
    return ember_monitored_locally(code);
}

/* EMBER_OSR_CHECK_EVERY more back-edges taken in the interpreter by frames
 * of code `d` is the record of (or none), while it has no compiled entries:
 * what the policy counts as its loops' iterations (runtime/src/hook.rs,
 * `interpreted_back_edges`). */
static inline void
count_back_edges(ember_direct_entry *d)
{
    if (d != NULL && d->entries == NULL) {
        *d->interpreted_back_edges += EMBER_OSR_CHECK_EVERY;
    }
}

/* The interpreter's ENTER_EXECUTOR: continue `frame` (at the back-edge) in
 * compiled code if there is some to continue it in, else where the jump
 * goes. */
_Py_CODEUNIT *
ember_osr_entry(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, PyThreadState *tstate)
{
    PyCodeObject *code = _PyFrame_GetCode(frame);
    _Py_CODEUNIT *here = frame->instr_ptr;
    ember_osr_executor *ex = (ember_osr_executor *)code->co_executors->executors[here->op.arg];
    _PyInterpreterFrame *entry_frame = frame->previous;
    /* Stored first: deciding may compile, and free objects. */
    frame->stackpointer = stack_pointer;
    tstate->current_executor = NULL;
    if (ex->base.vm_data.opcode == EMBER_OP_JUMP_BACKWARD) {
        ex->base.vm_data.opcode = EMBER_OP_JUMP_BACKWARD_NO_JIT;
    }
    if (osr_frame == frame && osr_depth < EMBER_OSR_MAX_DEPTH && frame->owner == FRAME_OWNED_BY_THREAD && entry_frame != NULL
        && entry_frame->owner == FRAME_OWNED_BY_INTERPRETER && ember_osr_policy != NULL
        && tstate->interp->eval_frame == ember_evaluator) {
        /* While the code is not compiled, the policy looks at the time
         * every EMBER_OSR_CHECK_EVERY back-edges only. */
        ember_direct_entry *d = ember_find_direct(tstate, code);
        if (d == NULL || d->entries == NULL) {
            if (++ex->waiting % EMBER_OSR_CHECK_EVERY != 0) {
                return ex->target;
            }
            count_back_edges(d);
        }
        uint64_t index = (uint64_t)(here - _PyCode_CODE(code));
        uint64_t decided = ember_osr_policy(tstate, frame, index, osr_handed_over == frame);
        if (decided == EMBER_OSR_NEVER) {
            /* The policy will not move frames of this code: its back-edges
             * go back to costing the interpreter nothing. */
            _Py_CODEUNIT *target = ex->target;
            osr_uninstall(code);
            return target;
        }
        ember_cont entry = (ember_cont)decided;
        if (entry != NULL) {
            ember_osr_entries++;
            /* The interpreter has made the frame current and counted its
             * depth, as compiled code expects on entry. */
            PyObject *held = Py_NewRef((PyObject *)code);
            osr_depth++;
            PyObject *res = entry(frame, stack_pointer, tstate);
            osr_depth--;
            Py_DECREF(held);
            /* Compiled code has popped the frame: the entry frame is current. */
            _PyStackRef *sp = entry_frame->stackpointer;
            if (res == NULL) {
                osr_exception = _PyErr_GetRaisedException(tstate);
                /* Not PyStackRef_NULL (tagged): taking it as a result would
                 * increment a reference count at address 0. */
                sp[0] = (_PyStackRef){.bits = 0};
            }
            else {
                sp[0] = PyStackRef_FromPyObjectSteal(res);
            }
            entry_frame->stackpointer = sp + 1;
            return entry_frame->instr_ptr;
        }
    } else if (++ex->waiting % EMBER_OSR_CHECK_EVERY == 0) {
        /* A frame that cannot move (a generator's, one the evaluator did
         * not start): its loops' iterations count all the same. */
        count_back_edges(ember_find_direct(tstate, code));
    }
    return ex->target;
}

/* ember_eval_interpreted for a frame compiled code hands to the interpreter
 * (the policy knows it: with a threshold set such a frame stays there). */
PyObject *
ember_eval_handed_over(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    _PyInterpreterFrame *outer = osr_handed_over;
    osr_handed_over = frame;
    PyObject *res = ember_eval_interpreted(tstate, frame, 0);
    osr_handed_over = outer;
    return res;
}

/* _PyEval_EvalFrameDefault for a frame that Ember's evaluator leaves to the
 * interpreter, or that compiled code hands to it: the frame may move to
 * compiled code at a back-edge. */
PyObject *
ember_eval_interpreted(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    _PyInterpreterFrame *outer = osr_frame;
    osr_frame = frame;
    PyObject *res = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    osr_frame = outer;
    if (res == NULL && osr_exception != NULL) {
        PyObject *exc = osr_exception;
        osr_exception = NULL;
        _PyErr_SetRaisedException(tstate, exc);
    }
    return res;
}
