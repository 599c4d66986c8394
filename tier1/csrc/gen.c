/* Run-time helpers of the generator stencils (stencils/c/gen.c). */
#include "../../stencils/c/ember_stencil.h"
#include "pycore_genobject.h"
#include "pycore_runtime.h"
#include "glue.h"

/* glue.c: resumption through `yield from`/`await` levels; 2 when not taken. */
int ember_resume_delegating(PyThreadState *tstate, PyGenObject *gen, PyObject *arg, PyObject **presult);

/* RETURN_GENERATOR: move `frame` (pushed by the call, owned by the thread)
 * into a new generator, coroutine or async generator, pop it, and return
 * the new object; its first resumption starts after this instruction. On
 * failure: NULL with the exception set, the frame untouched. */
PyObject *
ember_return_generator(_PyInterpreterFrame *frame, PyThreadState *tstate)
{
    PyFunctionObject *func = (PyFunctionObject *)PyStackRef_AsPyObjectBorrow(frame->f_funcobj);
    PyGenObject *gen = (PyGenObject *)_Py_MakeCoro(func);
    if (gen == NULL) {
        return NULL;
    }
    _PyInterpreterFrame *gen_frame = &gen->gi_iframe;
    frame->instr_ptr++;
    _PyFrame_Copy(frame, gen_frame);
    gen->gi_frame_state = FRAME_CREATED;
    gen_frame->owner = FRAME_OWNED_BY_GENERATOR;
    tstate->py_recursion_remaining++;
    tstate->current_frame = frame->previous;
    _PyThreadState_PopFrame(tstate, frame);
    return (PyObject *)gen;
}

/* gen_send_ex2's common case, for a generator or coroutine that has not
 * started (sent None) or is suspended: its frame is run by the installed
 * evaluator directly, which is all that PyGen_am_send would come to, minus
 * its state checks and two calls. Returns a PySendResult, or
 * EMBER_GEN_NOT_RUN when the generator is in any other state (running,
 * finished, or just started and sent a value): the caller then goes the
 * general way, which raises or returns as CPython does. */
#define EMBER_GEN_NOT_RUN 2
static inline __attribute__((always_inline)) int
ember_gen_resume(PyThreadState *tstate, PyGenObject *gen, PyObject *arg, PyObject **presult, ember_send_cache *cache)
{
    int8_t state = gen->gi_frame_state;
    if (state == FRAME_SUSPENDED_YIELD_FROM) {
        int status = ember_resume_delegating(tstate, gen, arg, presult);
        if (status != EMBER_GEN_NOT_RUN) {
            return status;
        }
    }
    if (!(FRAME_STATE_SUSPENDED(state) || (state == FRAME_CREATED && arg == Py_None))) {
        return EMBER_GEN_NOT_RUN;
    }
    _PyInterpreterFrame *gen_frame = &gen->gi_iframe;
    _PyFrame_StackPush(gen_frame, PyStackRef_FromPyObjectNew(arg));
    gen->gi_exc_state.previous_item = tstate->exc_info;
    tstate->exc_info = &gen->gi_exc_state;
    gen->gi_frame_state = FRAME_EXECUTING;
    PyObject *result = ember_resume_frame(tstate, gen_frame, cache);
    *presult = result;
    if (result == NULL) {
        return PYGEN_ERROR;
    }
    return FRAME_STATE_SUSPENDED(gen->gi_frame_state) ? PYGEN_NEXT : PYGEN_RETURN;
}

/* FOR_ITER's next(): a new reference; or NULL, either exhausted (no
 * exception, or StopIteration, which the caller clears) or failed (any
 * other exception). A generator's return value is dropped without making
 * the StopIteration that gen_iternext would make for FOR_ITER to discard. */
PyObject *
ember_iternext(PyThreadState *tstate, PyObject *it, void *site)
{
    if (Py_TYPE(it) == &PyGen_Type) {
        PyObject *res;
        switch (ember_gen_resume(tstate, (PyGenObject *)it, Py_None, &res, site)) {
        case PYGEN_NEXT:
            return res;
        case PYGEN_RETURN:
            Py_DECREF(res);
            return NULL;
        case PYGEN_ERROR:
            return NULL;
        default:
            break;
        }
    }
    return Py_TYPE(it)->tp_iternext(it);
}

/* Calls of a C function that runs an iterable argument to its end (or to
 * an error) and keeps no reference to it, with a generator there, as in
 * sum(x * x for x in xs): each item would be a call of the generator's
 * tp_iternext and a trip through the frame evaluator to its compiled code.
 * Compiled code makes these calls with the generator resumed directly, as
 * its own for loops resume one (ember_iternext), and the function otherwise
 * as it is: it is handed an iterator standing for the generator. Counted
 * (ember.stats(): tier1 generators_drained). */
uint64_t ember_generators_drained = 0;

/* The iterator handed to the function: it lives on the C stack of the call
 * and is immortal, so that the function's own references to it (which it
 * drops before returning: a condition of being in the list below) cost
 * nothing and never free it. Nothing else can reach it: it is not tracked
 * by the garbage collector, and no frame or Python object refers to it. */
typedef struct {
    PyObject_HEAD
    PyThreadState *tstate;
    PyObject *gen;
    ember_send_cache cache;
} ember_drain_iter;

static PyObject *
drain_iter_next(PyObject *self)
{
    ember_drain_iter *it = (ember_drain_iter *)self;
    return ember_iternext(it->tstate, it->gen, &it->cache);
}

static PyTypeObject ember_drain_iter_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.generator_iterator",
    .tp_basicsize = sizeof(ember_drain_iter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = drain_iter_next,
};

/* builtins' sum, min, max and sorted, and the join methods of str and
 * bytes, held (a deleted one must not be mistaken for an object later made
 * at its address); NULL before ember_drain_init, or if one was missing
 * then (a program may delete a builtin), which leaves it out. */
static PyObject *builtin_sum, *builtin_min, *builtin_max, *builtin_sorted, *str_join, *bytes_join;

int
ember_drain_init(void)
{
    if (PyType_Ready(&ember_drain_iter_type) < 0) {
        return -1;
    }
    PyObject *builtins = PyImport_ImportModule("builtins");
    if (builtins != NULL) {
        builtin_sum = PyObject_GetAttrString(builtins, "sum");
        builtin_min = PyObject_GetAttrString(builtins, "min");
        builtin_max = PyObject_GetAttrString(builtins, "max");
        builtin_sorted = PyObject_GetAttrString(builtins, "sorted");
        Py_DECREF(builtins);
    }
    str_join = PyObject_GetAttrString((PyObject *)&PyUnicode_Type, "join");
    bytes_join = PyObject_GetAttrString((PyObject *)&PyBytes_Type, "join");
    PyErr_Clear();
    return 0;
}

PyObject *
ember_call_draining(PyThreadState *tstate, PyObject *callable, PyObject *const *args, Py_ssize_t nargs, int index,
                    int direct)
{
    ember_generators_drained++;
    ember_drain_iter it = {PyObject_HEAD_INIT(&ember_drain_iter_type) tstate, args[index], {0}};
    PyObject *argv[2] = {args[0], nargs > 1 ? args[1] : NULL};
    argv[index] = (PyObject *)&it;
    if (!direct) {
        return PyObject_Vectorcall(callable, argv, (size_t)nargs, NULL);
    }
    /* As the specialised instructions call them: without the recursion
     * check of a vectorcall through the function object. */
    if (PyType_Check(callable)) {
        return ((PyTypeObject *)callable)->tp_vectorcall(callable, argv, (size_t)nargs, NULL);
    }
    if (PyCFunction_Check(callable)) {
        return _PyCFunctionFastWithKeywords_CAST(PyCFunction_GET_FUNCTION(callable))(PyCFunction_GET_SELF(callable),
                                                                                     argv, nargs, NULL);
    }
    return _PyCFunction_TrampolineCall(((PyMethodDescrObject *)callable)->d_method->ml_meth, argv[0], argv[1]);
}

int
ember_drained_arg(PyObject *callable, PyObject *const *args, Py_ssize_t nargs)
{
    int first = nargs >= 1 && Py_IS_TYPE(args[0], &PyGen_Type);
    /* One argument only; min(a, b) compares its arguments, generators or
     * not. */
    if (callable == (PyObject *)&PySet_Type || callable == (PyObject *)&PyFrozenSet_Type
        || callable == (PyObject *)&PyList_Type || callable == (PyObject *)&PyTuple_Type
        || callable == (PyObject *)&PyDict_Type || callable == builtin_sorted || callable == builtin_min
        || callable == builtin_max) {
        return first && nargs == 1 ? 0 : -1;
    }
    if (callable == builtin_sum) {
        return first && nargs <= 2 ? 0 : -1;
    }
    /* sep.join(gen) (a descriptor's call: self first); PySequence_Fast makes
     * a list of the items first. */
    if (nargs == 2 && Py_IS_TYPE(args[1], &PyGen_Type)
        && ((callable == str_join && PyUnicode_Check(args[0])) || (callable == bytes_join && PyBytes_Check(args[0])))) {
        return 1;
    }
    return -1;
}

/* SEND: PYGEN_NEXT with *result the value the receiver yielded,
 * PYGEN_RETURN with *result the value it returned, PYGEN_ERROR on error. The interpreter's own logic (an evaluator
 * is installed, so it never inlines a generator's frame), except that a
 * generator or coroutine receiver is sent to directly (am_send) rather
 * than through its `send` method or tp_iternext and a StopIteration.
 * `site`: the SEND's ember_send_cache, or NULL; with one, it keeps the
 * SEND's adaptive counter, and may return EMBER_SEND_HAND_OFF having touched
 * nothing. */
int
ember_send(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *receiver, PyObject *v,
           PyObject **result, void *site)
{
    PyTypeObject *type = Py_TYPE(receiver);
    if (type == &PyGen_Type || type == &PyCoro_Type) {
        int status = ember_gen_resume(tstate, (PyGenObject *)receiver, v, result, site);
        if (LIKELY(status != EMBER_GEN_NOT_RUN)) {
            return status;
        }
        return type->tp_as_async->am_send(receiver, v, result);
    }
    /* SEND's adaptive counter (a generator or coroutine receiver would
     * only back it off: CPython refuses to specialise for one while an
     * evaluator is installed). */
    if (site != NULL) {
        ADAPTIVE_COUNTER(frame->instr_ptr, EMBER_OP_SEND, 0, return EMBER_SEND_HAND_OFF);
    }
    PyObject *res;
    if (v == Py_None && PyIter_Check(receiver)) {
        res = type->tp_iternext(receiver);
    }
    else {
        res = PyObject_CallMethodOneArg(receiver, &_Py_ID(send), v);
    }
    if (res != NULL) {
        *result = res;
        return PYGEN_NEXT;
    }
    if (_PyErr_ExceptionMatches(tstate, PyExc_StopIteration)) {
        _PyEval_MonitorRaise(tstate, frame, frame->instr_ptr);
    }
    if (_PyGen_FetchStopIterationValue(result) == 0) {
        return PYGEN_RETURN;
    }
    return PYGEN_ERROR;
}

/* GET_AITER: obj.__aiter__(), checked as the interpreter does. New
 * reference, or NULL with the exception set. */
PyObject *
ember_get_aiter(PyThreadState *tstate, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    unaryfunc getter = type->tp_as_async != NULL ? type->tp_as_async->am_aiter : NULL;
    if (getter == NULL) {
        _PyErr_Format(tstate, PyExc_TypeError,
                      "'async for' requires an object with __aiter__ method, got %.100s",
                      type->tp_name);
        return NULL;
    }
    PyObject *iter = getter(obj);
    if (iter == NULL) {
        return NULL;
    }
    PyTypeObject *itype = Py_TYPE(iter);
    if (itype->tp_as_async == NULL || itype->tp_as_async->am_anext == NULL) {
        _PyErr_Format(tstate, PyExc_TypeError,
                      "'async for' received an object from __aiter__ that does not implement __anext__: %.100s",
                      itype->tp_name);
        Py_DECREF(iter);
        return NULL;
    }
    return iter;
}

/* GET_YIELD_FROM_ITER for anything but a generator: `iterable` itself
 * (borrowed, as it stays on the stack) for a coroutine in a coroutine and
 * for an iterator that is its own iterator (map, list_iterator, ...), else
 * a new iterator, or NULL with the exception set. */
PyObject *
ember_yield_from_iter(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *iterable)
{
    if (PyCoro_CheckExact(iterable)) {
        if (!(_PyFrame_GetCode(frame)->co_flags & (CO_COROUTINE | CO_ITERABLE_COROUTINE))) {
            _PyErr_SetString(tstate, PyExc_TypeError,
                             "cannot 'yield from' a coroutine object in a non-coroutine generator");
            return NULL;
        }
        return iterable;
    }
    if (PyGen_CheckExact(iterable)) {
        return iterable;
    }
    PyObject *iter = PyObject_GetIter(iterable);
    if (iter == iterable) {
        /* iter(it) is it, with a new reference; the stencil keeps the
         * stack's reference instead (the interpreter closes the iterable
         * and pushes this one: the same count). */
        Py_DECREF(iter);
    }
    return iter;
}

/* Generators, coroutines and async generators a call made without running
 * their code (ember.stats(): tier1 generators_made). */
uint64_t ember_generators_made = 0;

/* A call from compiled code (glue.c's ember_call_py, for a function that
 * simple_positional_shape accepts; CALL_PY_EXACT_ARGS) of a generator,
 * coroutine or async generator function whose code starts with
 * RETURN_GENERATOR (after COPY_FREE_VARS, if it has free variables): what
 * the call and those instructions come to (the frame
 * pushed, then copied into a new generator and popped), with the frame
 * initialised in the generator at once. NULL, having touched nothing,
 * where the evaluator would not just count the call and enter compiled
 * code (glue.h's ember_direct_call, as for any call), where the interpreter
 * would raise (RecursionError, or an error making the object), and where
 * making a coroutine reads the frame stack (origin tracking). `known`: the
 * code object's record when the caller has it (a call site's cache, which
 * has checked the evaluator), else NULL. */
PyObject *
ember_make_generator(PyThreadState *tstate, _PyStackRef func, _PyStackRef *args, int total,
                     ember_direct_entry *known)
{
    PyFunctionObject *f = (PyFunctionObject *)PyStackRef_AsPyObjectBorrow(func);
    PyCodeObject *code = (PyCodeObject *)f->func_code;
    /* The callers have checked co_flags (a generator-like function). Its
     * code starts with RETURN_GENERATOR, or, for one with free variables (a
     * generator expression using the caller's locals, as most do), with
     * COPY_FREE_VARS then RETURN_GENERATOR. */
    _Py_CODEUNIT *units = _PyCode_CODE(code);
    int copies_free_vars = units[0].op.code == EMBER_OP_COPY_FREE_VARS;
    if (units[copies_free_vars].op.code != EMBER_OP_RETURN_GENERATOR || tstate->coroutine_origin_tracking_depth != 0
        || (copies_free_vars && (units[0].op.arg != code->co_nfreevars || f->func_closure == NULL))) {
        return NULL;
    }
    ember_direct_entry *d = known != NULL ? (ember_direct_enterable(known, code) ? known : NULL)
                                          : ember_direct_call(tstate, code);
    if (d == NULL || !ember_recursion_headroom(tstate)) {
        return NULL;
    }
    PyGenObject *gen = (PyGenObject *)_Py_MakeCoro(f);
    if (gen == NULL) {
        /* The call the usual way raises it again, from the callee's frame. */
        PyErr_Clear();
        return NULL;
    }
    ++*d->calls;
    ember_generators_made++;
    /* As the pushed frame would be at RETURN_GENERATOR, and what
     * _PyFrame_Copy makes of it: owned references throughout. */
    _PyInterpreterFrame *gf = &gen->gi_iframe;
    int argcount = code->co_argcount;
    _PyFrame_Initialize(tstate, gf, PyStackRef_MakeHeapSafe(func), NULL, code, argcount, NULL);
    for (int i = 0; i < total; i++) {
        gf->localsplus[i] = PyStackRef_MakeHeapSafe(args[i]);
    }
    if (argcount > total) {
        PyObject *defaults = f->func_defaults;
        Py_ssize_t ndefaults = PyTuple_GET_SIZE(defaults);
        for (int i = total; i < argcount; i++) {
            gf->localsplus[i] = PyStackRef_FromPyObjectNew(PyTuple_GET_ITEM(defaults, ndefaults - argcount + i));
        }
    }
    if (copies_free_vars) {
        /* What COPY_FREE_VARS does: the closure's cells, after the locals. */
        int offset = code->co_nlocalsplus - code->co_nfreevars;
        for (int i = 0; i < code->co_nfreevars; i++) {
            gf->localsplus[offset + i] = PyStackRef_FromPyObjectNew(PyTuple_GET_ITEM(f->func_closure, i));
        }
    }
    /* Past RETURN_GENERATOR, as it leaves the frame. */
    gf->instr_ptr = units + copies_free_vars + 1;
    gf->owner = FRAME_OWNED_BY_GENERATOR;
    gen->gi_frame_state = FRAME_CREATED;
    return (PyObject *)gen;
}
