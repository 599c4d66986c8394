/* Arithmetic, comparisons, truth, attributes, globals, iteration, calls. */
#include "ember_stencil.h"

/* Replace the two operands on top of the stack by a result (NULL: error).
 * The operands stay on the stack, alive, during the call. */
#define BINARY_EPILOGUE(res_o)                          \
    do {                                                \
        stack_pointer -= 2;                             \
        SYNC_SP();                                      \
        CLOSE(lhs);                          \
        CLOSE(rhs);                          \
        if (UNLIKELY((res_o) == NULL)) {                \
            ERROR();                                    \
        }                                               \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res_o); \
        stack_pointer++;                                \
        CONTINUE();                                     \
    } while (0)

/* The generic instructions are calls (tier1/csrc/generic.c, GENERIC_RESULT).
 * OPERAND0: the binaryfunc for this oparg (_PyEval_BinaryOps[oparg]). */
EMBER_STENCIL(BINARY_OP)
{
    GENERIC_RESULT(ember_generic_binary_op(frame, stack_pointer, tstate, THIS_INSTR, (binaryfunc)OPERAND0));
}

/* The miss path of the specialised BINARY_OPs: the generic operation
 * (OPERAND0, the binaryfunc for the oparg). */
MISS_HELPER(binary_op_miss)
{
    GENERIC_RESULT(ember_miss_binary_op(frame, stack_pointer, tstate, THIS_INSTR, (binaryfunc)OPERAND0));
}

/* Exact ints: the operands closed by their type's deallocator, as the
 * interpreter does (an int's deallocation runs no code of the program, so the
 * stack pointer need not be stored first). Two compact ints (under 2**30,
 * the common case) are combined here, and a result from -5 to 256 is
 * CPython's cached small int, with no call at all; any other result is made
 * by NAME##_general (FAST, what the interpreter calls, makes the same
 * objects), out of line so that the common path makes no call. */
#define INT_BINOP(NAME, FAST, OP)                                              \
    MISS_HELPER(NAME##_general)                                                \
    {                                                                          \
        _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];          \
        PyObject *l = BORROW(lhs), *r = BORROW(rhs);                           \
        PyObject *res;                                                         \
        ESCAPE();                                                              \
        if (_PyLong_BothAreCompact((PyLongObject *)l, (PyLongObject *)r)) {    \
            res = PyLong_FromSsize_t(_PyLong_CompactValue((PyLongObject *)l)   \
                                     OP _PyLong_CompactValue((PyLongObject *)r)); \
        }                                                                      \
        else {                                                                 \
            res = FAST((PyLongObject *)l, (PyLongObject *)r);                  \
        }                                                                      \
        stack_pointer -= 2;                                                    \
        CLOSE_EXACT(lhs, _PyLong_ExactDealloc);                                \
        CLOSE_EXACT(rhs, _PyLong_ExactDealloc);                                \
        if (UNLIKELY(res == NULL)) {                                           \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);                  \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    }                                                                          \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];          \
        PyObject *l = BORROW(lhs), *r = BORROW(rhs);                           \
        if (LIKELY(PyLong_CheckExact(l) && PyLong_CheckExact(r))) {            \
            if (LIKELY(_PyLong_BothAreCompact((PyLongObject *)l, (PyLongObject *)r))) { \
                Py_ssize_t z = _PyLong_CompactValue((PyLongObject *)l)         \
                               OP _PyLong_CompactValue((PyLongObject *)r);     \
                if (LIKELY(_PY_IS_SMALL_INT(z))) {                             \
                    stack_pointer -= 2;                                        \
                    CLOSE_EXACT(lhs, _PyLong_ExactDealloc);                    \
                    CLOSE_EXACT(rhs, _PyLong_ExactDealloc);                    \
                    stack_pointer[0] = PyStackRef_FromPyObjectImmortal(        \
                        (PyObject *)&_PyLong_SMALL_INTS[_PY_NSMALLNEGINTS + z]); \
                    stack_pointer++;                                           \
                    CONTINUE();                                                \
                }                                                              \
            }                                                                  \
            MISS(NAME##_general);                                              \
        }                                                                      \
        MISS(binary_op_miss);                                                  \
    }

INT_BINOP(BINARY_OP_ADD_INT, _PyLong_Add, +)
INT_BINOP(BINARY_OP_SUBTRACT_INT, _PyLong_Subtract, -)
INT_BINOP(BINARY_OP_MULTIPLY_INT, _PyLong_Multiply, *)

/* The float in REF holds the result VALUE if the stack's reference is its
 * only one (a temporary: `dx * dx + dy * dy`): nothing else can see it
 * change, and no float is freed and made again. */
#define FLOAT_REUSE(REF, VALUE)                                                  \
    (PyStackRef_RefcountOnObject(REF) && BITS_TO_PTR(REF)->ob_refcnt == 1        \
     && (((PyFloatObject *)BITS_TO_PTR(REF))->ob_fval = (VALUE), 1))

/* FLOAT_BINOP's rare paths: a small int on one side, or a miss
 * (tier1/csrc/generic.c). */
#define FLOAT_BINOP_MISS(NAME, KIND)                                           \
    MISS_HELPER(NAME##_miss)                                                   \
    {                                                                          \
        GENERIC_RESULT(ember_miss_float_binop(frame, stack_pointer, tstate, THIS_INSTR, \
                                              (binaryfunc)OPERAND0, KIND));    \
    }

/* Exact floats: the result goes into an operand that only the stack holds,
 * else the operands are closed before the result is made, by their type's
 * deallocator, as the interpreter does (_PyFloat_FromDouble_ConsumeInputs):
 * a float freed here is the one the result reuses. The frame state is
 * stored only for the allocation (freeing a float runs no program code),
 * and the result, a float with one reference, is mortal. A small int on one
 * side (a sum that starts at 0) gives the same float as the generic path,
 * and is not counted as a miss: the interpreter would re-specialise for it every
 * ~53 times, and compiled code in a loop would hand frames over for that. */
#define FLOAT_BINOP(NAME, OP, KIND)                                            \
    FLOAT_BINOP_MISS(NAME, KIND)                                               \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];          \
        PyObject *l = BORROW(lhs), *r = BORROW(rhs);                           \
        PyObject *res;                                                         \
        if (LIKELY(PyFloat_CheckExact(l) && PyFloat_CheckExact(r))) {          \
            double value = PyFloat_AS_DOUBLE(l) OP PyFloat_AS_DOUBLE(r);       \
            stack_pointer -= 2;                                                \
            if (FLOAT_REUSE(lhs, value)) {                                     \
                CLOSE_EXACT(rhs, _PyFloat_ExactDealloc);                       \
                res = l;                                                       \
            }                                                                  \
            else if (FLOAT_REUSE(rhs, value)) {                                \
                CLOSE_EXACT(lhs, _PyFloat_ExactDealloc);                       \
                res = r;                                                       \
            }                                                                  \
            else {                                                             \
                CLOSE_EXACT(lhs, _PyFloat_ExactDealloc);                       \
                CLOSE_EXACT(rhs, _PyFloat_ExactDealloc);                       \
                ESCAPE();                                                      \
                res = PyFloat_FromDouble(value);                               \
                if (UNLIKELY(res == NULL)) {                                   \
                    ERROR();                                                   \
                }                                                              \
            }                                                                  \
            stack_pointer[0] = PyStackRef_FromPyObjectStealMortal(res);        \
            stack_pointer++;                                                   \
            CONTINUE();                                                        \
        }                                                                      \
        MISS(NAME##_miss);                                                     \
    }

FLOAT_BINOP(BINARY_OP_ADD_FLOAT, +, EMBER_FLOAT_ADD)
FLOAT_BINOP(BINARY_OP_SUBTRACT_FLOAT, -, EMBER_FLOAT_SUBTRACT)
FLOAT_BINOP(BINARY_OP_MULTIPLY_FLOAT, *, EMBER_FLOAT_MULTIPLY)

/* OPERAND1: the specialisation descriptor the interpreter chose (from the
 * inline cache): its guard and action, e.g. for int/float mixes. */
EMBER_STENCIL(BINARY_OP_EXTEND)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    _PyBinaryOpSpecializationDescr *d = (_PyBinaryOpSpecializationDescr *)OPERAND1;
    if (UNLIKELY(!d->guard(l, r))) {
        MISS(binary_op_miss);
    }
    ESCAPE();
    PyObject *res = d->action(l, r);
    BINARY_EPILOGUE(res);
}

EMBER_STENCIL(BINARY_OP_SUBSCR_LIST_INT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyList_CheckExact(l) && PyLong_CheckExact(r) && _PyLong_IsNonNegativeCompact((PyLongObject *)r)
               && (Py_ssize_t)_PyLong_CompactValue((PyLongObject *)r) < PyList_GET_SIZE(l))) {
        SUBSCR_ITEM_RESULT(PyList_GET_ITEM(l, _PyLong_CompactValue((PyLongObject *)r)), lhs, rhs);
    }
    MISS(binary_op_miss);
}

/* COMPARE_OP: oparg >> 5 is the comparison; bit 16 asks for a bool. */
EMBER_STENCIL(COMPARE_OP)
{
    GENERIC_RESULT(ember_generic_compare_op(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* The generic comparison after a miss. */
MISS_HELPER(compare_op_miss)
{
    GENERIC_RESULT(ember_miss_compare_op(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* Specialised int comparison: both compact ints; OPERAND1 = mask of
 * outcomes (1: less, 2: equal, 4: greater) that mean true, computed by tier 1
 * (operands.rs compare_mask): a shift picks the outcome's bit. */
EMBER_STENCIL(COMPARE_OP_INT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyLong_CheckExact(l) && PyLong_CheckExact(r)
               && _PyLong_IsCompact((PyLongObject *)l) && _PyLong_IsCompact((PyLongObject *)r))) {
        Py_ssize_t a = _PyLong_CompactValue((PyLongObject *)l);
        Py_ssize_t b = _PyLong_CompactValue((PyLongObject *)r);
        /* The outcome's bit: 0 less, 1 equal, 2 greater. */
        int truth = (OPERAND1_U32 >> (1 + (a > b) - (a < b))) & 1;
        /* The result stored first (freeing an int runs no program code):
         * nothing but the operands is then live across a deallocation. */
        stack_pointer[-2] = truth ? PyStackRef_True : PyStackRef_False;
        stack_pointer--;
        CLOSE_EXACT(lhs, _PyLong_ExactDealloc);
        CLOSE_EXACT(rhs, _PyLong_ExactDealloc);
        CONTINUE();
    }
    MISS(compare_op_miss);
}

EMBER_STENCIL(TO_BOOL)
{
    GENERIC_RESULT(ember_generic_to_bool(frame, stack_pointer, tstate, THIS_INSTR));
}

EMBER_STENCIL(UNARY_NOT)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer[-1] = PyStackRef_IsFalse(value) ? PyStackRef_True : PyStackRef_False;
    CONTINUE();
}

#define UNARY(NAME, FUNC)                                 \
    EMBER_STENCIL(NAME)                                   \
    {                                                     \
        _PyStackRef value = stack_pointer[-1];            \
        ESCAPE();                                         \
        PyObject *res = FUNC(BORROW(value));              \
        stack_pointer--;                                  \
        SYNC_SP();                                        \
        CLOSE(value);                          \
        if (UNLIKELY(res == NULL)) {                      \
            ERROR();                                      \
        }                                                 \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res); \
        stack_pointer++;                                  \
        CONTINUE();                                       \
    }

UNARY(UNARY_NEGATIVE, PyNumber_Negative)
UNARY(UNARY_INVERT, PyNumber_Invert)

EMBER_STENCIL(IS_OP)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    int res = (BORROW(lhs) == BORROW(rhs)) ^ OPARG;
    stack_pointer -= 2;
    CLOSE_ESCAPING(lhs);
    CLOSE_ESCAPING(rhs);
    stack_pointer[0] = res ? PyStackRef_True : PyStackRef_False;
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(CONTAINS_OP)
{
    GENERIC_RESULT(ember_generic_contains_op(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* Pushes the value, then NULL when oparg & 1. */
EMBER_STENCIL(LOAD_GLOBAL)
{
    GENERIC_RESULT(ember_generic_load_global(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* With oparg & 1, loads a method for CALL:
 * (owner -- method, self) or (owner -- attr, NULL). */
EMBER_STENCIL(LOAD_ATTR)
{
    GENERIC_RESULT(ember_generic_load_attr(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* (value, owner --) */
EMBER_STENCIL(STORE_ATTR)
{
    GENERIC_RESULT(ember_generic_store_attr(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

/* (value, container, key --) */
EMBER_STENCIL(STORE_SUBSCR)
{
    GENERIC_RESULT(ember_generic_store_subscr(frame, stack_pointer, tstate, THIS_INSTR));
}

EMBER_STENCIL(GET_ITER)
{
    _PyStackRef iterable = stack_pointer[-1];
    ESCAPE();
    PyObject *iter = PyObject_GetIter(BORROW(iterable));
    stack_pointer--;
    SYNC_SP();
    CLOSE(iterable);
    if (UNLIKELY(iter == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(iter);
    stack_pointer++;
    CONTINUE();
}

/* (iter -- iter, next). When exhausted, the iterator stays and control goes
 * to the POP_ITER after the loop's END_FOR (tier 1 points JUMP there). */
EMBER_STENCIL(FOR_ITER)
{
    _PyStackRef iter = stack_pointer[-1];
    PyObject *it = BORROW(iter);
    ADAPTIVE_UNLESS_FAILS(FOR_ITER, Py_TYPE(it) == &PyGen_Type && OPARG <= SHRT_MAX);
    ESCAPE();
    iternextfunc iternext = Py_TYPE(it)->tp_iternext;
    if (UNLIKELY(iternext == NULL)) {
        /* A generator expression's `.0` replaced through gi_frame.f_locals. */
        _PyErr_Format(tstate, PyExc_TypeError, "'%.100s' object is not an iterator", Py_TYPE(it)->tp_name);
        ERROR();
    }
    PyObject *next = ember_iternext(tstate, it, SITE);
    if (next == NULL) {
        if (_PyErr_Occurred(tstate)) {
            if (!_PyErr_ExceptionMatches(tstate, PyExc_StopIteration)) {
                ERROR();
            }
            _PyErr_Clear(tstate);
        }
        JUMP();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(next);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(POP_ITER)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer--;
    CLOSE_ESCAPING(value);
    CONTINUE();
}

/* After a call, as the interpreter does: handle pending events, and if the
 * call switched monitoring or tracing on, continue in the interpreter.
 * OPERAND0: the instrumentation version compiled for. */
#define AFTER_CALL()                                                   \
    do {                                                               \
        if (UNLIKELY(BREAKER_DIFFERS())) {   \
            if (ember_instrumentation_changed(tstate, OPERAND0_U32)) { \
                frame->instr_ptr = NEXT_INSTR;                         \
                DEOPT();                                               \
            }                                                          \
            SYNC_SP();                                                 \
            HANDLE_PENDING(NEXT_INSTR);                                \
        }                                                              \
    } while (0)

/* (callable, self_or_null, args[oparg] -- res). SITE: the site's call
 * cache. The adaptive counter is kept by ember_call_site, off the stencil's
 * common path. */
EMBER_STENCIL(CALL)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    ESCAPE();
    PyObject *res = ember_call_site(tstate, frame, base, oparg, SITE);
    if (UNLIKELY((uintptr_t)res <= (uintptr_t)EMBER_CALL_HAND_OFF)) {
        if (res == EMBER_CALL_HAND_OFF) {
            DEOPT_HERE();
        }
        stack_pointer = base;
        ERROR();
    }
    stack_pointer = base;
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    AFTER_CALL();
    CONTINUE();
}

/* (callable, self_or_null, args[oparg], kwnames -- res) */
EMBER_STENCIL(CALL_KW)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 3;
    ADAPTIVE_UNLESS_FAILS(CALL_KW, PyFunction_Check(BORROW(base[0])) || PyMethod_Check(BORROW(base[0])));
    ESCAPE();
    PyObject *res = ember_call(tstate, frame, base, oparg, 1);
    stack_pointer = base;
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    AFTER_CALL();
    CONTINUE();
}

#define BUILD_SEQ(NAME, MAKE)                                                  \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        int oparg = OPARG;                                                     \
        _PyStackRef *items = stack_pointer - oparg;                            \
        ESCAPE();                                                              \
        PyObject *seq = MAKE(items, oparg);                                    \
        stack_pointer = items;                                                 \
        if (UNLIKELY(seq == NULL)) {                                           \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(seq);                  \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    }

BUILD_SEQ(BUILD_TUPLE, ember_build_tuple)
BUILD_SEQ(BUILD_LIST, ember_build_list)

/* (container, start, stop -- res); out of line (glue.c). */
EMBER_STENCIL(BINARY_SLICE)
{
    ESCAPE();
    PyObject *res = ember_binary_slice(frame, stack_pointer - 3);
    stack_pointer -= 3;
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* (list, unused[oparg-1], v -- list, unused[oparg-1]) */
/* As the interpreter: the item's reference moves into the list, stored in
 * place while the list has room (a comprehension's common case). */
EMBER_STENCIL(LIST_APPEND)
{
    _PyStackRef v = stack_pointer[-1];
    PyObject *list = BORROW(stack_pointer[-1 - OPARG]);
    stack_pointer--;
    int err = _PyList_AppendTakeRef((PyListObject *)list, PyStackRef_AsPyObjectSteal(v));
    if (UNLIKELY(err < 0)) {
        ESCAPE();
        ERROR();
    }
    CONTINUE();
}

/* (exc -- prev_exc, new_exc) */
EMBER_STENCIL(PUSH_EXC_INFO)
{
    _PyStackRef exc = stack_pointer[-1];
    _PyErr_StackItem *exc_info = tstate->exc_info;
    _PyStackRef prev;
    if (exc_info->exc_value != NULL) {
        prev = PyStackRef_FromPyObjectSteal(exc_info->exc_value);
    }
    else {
        prev = PyStackRef_None;
    }
    exc_info->exc_value = Py_NewRef(BORROW(exc));
    stack_pointer[-1] = prev;
    stack_pointer[0] = exc;
    stack_pointer++;
    CONTINUE();
}

/* (exc_value --) */
EMBER_STENCIL(POP_EXCEPT)
{
    _PyStackRef exc_value = stack_pointer[-1];
    stack_pointer--;
    ESCAPE();
    _PyErr_StackItem *exc_info = tstate->exc_info;
    PyObject *value = PyStackRef_IsNone(exc_value) ? NULL : PyStackRef_AsPyObjectSteal(exc_value);
    Py_XSETREF(exc_info->exc_value, value);
    CONTINUE();
}

/* (left, right -- left, b) */
EMBER_STENCIL(CHECK_EXC_MATCH)
{
    _PyStackRef left = stack_pointer[-2], right = stack_pointer[-1];
    ESCAPE();
    if (UNLIKELY(_PyEval_CheckExceptTypeValid(tstate, BORROW(right)) < 0)) {
        ERROR();
    }
    int res = PyErr_GivenExceptionMatches(BORROW(left), BORROW(right));
    stack_pointer--;
    SYNC_SP();
    CLOSE(right);
    stack_pointer[0] = res ? PyStackRef_True : PyStackRef_False;
    stack_pointer++;
    CONTINUE();
}

/* (args[oparg] --): raise, raise exc, raise exc from cause. A bare
 * re-raise unwinds without a new traceback entry: tier 1 points this
 * stencil's JUMP at the code object's RERAISE_EXIT. */
EMBER_STENCIL(RAISE_VARARGS)
{
    int oparg = OPARG;
    PyObject *exc = NULL, *cause = NULL;
    if (oparg >= 1) {
        exc = PyStackRef_AsPyObjectSteal(stack_pointer[-oparg]);
    }
    if (oparg == 2) {
        cause = PyStackRef_AsPyObjectSteal(stack_pointer[-1]);
    }
    stack_pointer -= oparg;
    ESCAPE();
    if (ember_do_raise(tstate, exc, cause)) {
        JUMP();
    }
    ERROR();
}

/* (values[oparg], exc --): re-raise; with oparg, values[0] is the lasti
 * to report. Unwinds from this instruction without a new traceback entry.
 * OPERAND1: the code object's entry table. */
EMBER_STENCIL(RERAISE)
{
    int oparg = OPARG;
    _PyStackRef exc = stack_pointer[-1];
    stack_pointer--;
    ESCAPE();
    int here = (int)(THIS_INSTR - _PyFrame_GetBytecode(frame));
    if (oparg) {
        /* The lasti the unwinder pushed: a tagged int (ember_unwind does
         * as the interpreter). */
        frame->instr_ptr = _PyFrame_GetBytecode(frame) + PyStackRef_UntagInt(stack_pointer[-oparg]);
    }
    _PyErr_SetRaisedException(tstate, PyStackRef_AsPyObjectSteal(exc));
    int handler = ember_unwind(frame, &stack_pointer, tstate, here, 0);
    if (handler < 0) {
        return NULL;
    }
    __attribute__((musttail)) return ((ember_cont *)OPERAND1)[handler](frame, stack_pointer, tstate);
}

/* Python-to-Python calls without C-level argument marshalling: the callee's
 * frame is pushed on the thread's data stack, the arguments moved into it,
 * and the frame handed to Ember's evaluator (which runs it compiled or in the
 * interpreter) -- what the interpreter does inline when no PEP 523 evaluator
 * is installed (a generator function's call makes the generator without
 * running its code where tier1/csrc/gen.c's ember_make_generator can).
 * Guards as CPython's CALL_PY_EXACT_ARGS: the function version
 * from the inline cache (OPERAND1), the exact argument count, room on the
 * data stack, recursion headroom; otherwise the generic call. */
static inline __attribute__((always_inline)) PyObject *
ember_push_and_run(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base,
                   _PyStackRef func, _PyStackRef *args, int total)
{
    PyCodeObject *code = (PyCodeObject *)((PyFunctionObject *)BORROW(func))->func_code;
    if (UNLIKELY(code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
        PyObject *gen = ember_make_generator(tstate, func, args, total, NULL);
        if (gen != NULL) {
            frame->stackpointer = base;
            return gen;
        }
    }
    _PyInterpreterFrame *callee = _PyFrame_PushUnchecked(tstate, func, total, frame);
    for (int i = 0; i < total; i++) {
        callee->localsplus[i] = args[i];
    }
    /* The arguments and the callable now belong to the callee's frame. */
    frame->stackpointer = base;
    return ember_eval_frame(tstate, callee, 0);
}

#define PY_EXACT_CALL_TAIL(res)                              \
    do {                                                     \
        stack_pointer = base;                                \
        if (UNLIKELY((res) == NULL)) {                       \
            ERROR();                                         \
        }                                                    \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res); \
        stack_pointer++;                                     \
        AFTER_CALL();                                        \
        CONTINUE();                                          \
    } while (0)

static inline __attribute__((always_inline)) int
ember_exact_args_ok(PyThreadState *tstate, PyObject *callable, uint32_t version, int total)
{
    if (!PyFunction_Check(callable) || ((PyFunctionObject *)callable)->func_version != version) {
        return 0;
    }
    PyCodeObject *code = (PyCodeObject *)((PyFunctionObject *)callable)->func_code;
    return code->co_argcount == total && _PyThreadState_HasStackSpace(tstate, code->co_framesize)
        && tstate->py_recursion_remaining > 1;
}

/* (callable, self_or_null, args[oparg] -- res); OPERAND0: instrumentation
 * version; OPERAND1: function version. */
EMBER_STENCIL(CALL_PY_EXACT_ARGS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    ESCAPE();
    PyObject *res;
    if (LIKELY(ember_exact_args_ok(tstate, BORROW(base[0]), (uint32_t)OPERAND1, oparg + has_self))) {
        res = ember_push_and_run(tstate, frame, base, base[0], base + 2 - has_self, oparg + has_self);
    }
    else {
        res = ember_call(tstate, frame, base, oparg, 0);
    }
    PY_EXACT_CALL_TAIL(res);
}

/* A bound method called with its arguments: the function runs with the
 * method's self first. */
EMBER_STENCIL(CALL_BOUND_METHOD_EXACT_ARGS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    PyObject *callable = BORROW(base[0]);
    ESCAPE();
    PyObject *res;
    if (LIKELY(PyStackRef_IsNull(base[1]) && Py_TYPE(callable) == &PyMethod_Type
               && ember_exact_args_ok(tstate, ((PyMethodObject *)callable)->im_func, (uint32_t)OPERAND1, oparg + 1))) {
        /* Replace (method, NULL) by (function, self), as the interpreter does. */
        PyObject *self = ((PyMethodObject *)callable)->im_self;
        PyObject *func = ((PyMethodObject *)callable)->im_func;
        base[1] = PyStackRef_FromPyObjectNew(self);
        _PyStackRef method = base[0];
        base[0] = PyStackRef_FromPyObjectNew(func);
        CLOSE(method);
        res = ember_push_and_run(tstate, frame, base, base[0], base + 1, oparg + 1);
    }
    else {
        res = ember_call(tstate, frame, base, oparg, 0);
    }
    PY_EXACT_CALL_TAIL(res);
}
