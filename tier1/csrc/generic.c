/* The generic (unspecialised) forms of the commonest specialisable
 * instructions, whole: adaptive counter, frame state, operation, stack;
 * and the same after a specialised form's guard failed. Their stencils
 * (GENERIC_RESULT in ember_stencil.h) are a call of one of these. Code
 * compiled before the interpreter ever ran it (code called once, or at its
 * first call) is mostly generic instructions, and as stencils of their own
 * they were half of its bytes and holes (LOAD_ATTR alone 449 bytes), all
 * of which tier 1 copies, patches and publishes per instruction; the miss
 * paths were most of the specialised stencils' rare parts, copied with
 * each. The call costs the instruction a few nanoseconds, against an
 * operation that calls into the object model anyway.
 *
 * Each returns the stack pointer after the instruction; NULL on an error,
 * frame->stackpointer being where the error leaves the stack; or
 * EMBER_GENERIC_HAND_OFF, having changed nothing, when the adaptive counter
 * says the interpreter should specialise the instruction now (ADAPTIVE and
 * ADAPTIVE_MISS in ember_stencil.h). */
#include "glue.h"

#define HAND_OFF return EMBER_GENERIC_HAND_OFF
/* The counters: the generic instruction's, or a specialised one's after a
 * miss. */
#define GENERIC_COUNTER(OP) ADAPTIVE_COUNTER(this_instr, EMBER_OP_##OP, 0, HAND_OFF)
#define MISS_COUNTER() ADAPTIVE_MISS_AT(this_instr, HAND_OFF)
/* ESCAPE() of a stencil. */
#define STORE_FRAME_STATE() (frame->instr_ptr = this_instr, frame->stackpointer = sp)

/* (owner -- attr, NULL or self if oparg & 1) */
static _PyStackRef *
load_attr(EMBER_HELPER_ARGS, int oparg)
{
    STORE_FRAME_STATE();
    _PyStackRef owner = sp[-1];
    PyObject *name = ember_name_at(frame, oparg >> 1);
    PyObject *attr;
    if (oparg & 1) {
        attr = NULL;
        if (_PyObject_GetMethod(PyStackRef_AsPyObjectBorrow(owner), name, &attr)) {
            /* The owner stays on the stack, as self. */
            sp[-1] = PyStackRef_FromPyObjectSteal(attr);
            sp[0] = owner;
            return sp + 1;
        }
    }
    else {
        attr = PyObject_GetAttr(PyStackRef_AsPyObjectBorrow(owner), name);
    }
    frame->stackpointer = sp - 1;
    PyStackRef_CLOSE(owner);
    if (attr == NULL) {
        return NULL;
    }
    sp[-1] = PyStackRef_FromPyObjectSteal(attr);
    if (oparg & 1) {
        sp[0] = PyStackRef_NULL;
    }
    return sp + (oparg & 1);
}

_PyStackRef *
ember_generic_load_attr(EMBER_HELPER_ARGS, int oparg)
{
    GENERIC_COUNTER(LOAD_ATTR);
    return load_attr(frame, sp, tstate, this_instr, oparg);
}

_PyStackRef *
ember_miss_load_attr(EMBER_HELPER_ARGS, int oparg)
{
    MISS_COUNTER();
    return load_attr(frame, sp, tstate, this_instr, oparg);
}

/* (value, owner --) */
static _PyStackRef *
store_attr(EMBER_HELPER_ARGS, int oparg)
{
    _PyStackRef value = sp[-2], owner = sp[-1];
    STORE_FRAME_STATE();
    int err = PyObject_SetAttr(PyStackRef_AsPyObjectBorrow(owner), ember_name_at(frame, oparg),
                               PyStackRef_AsPyObjectBorrow(value));
    sp -= 2;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(value);
    PyStackRef_CLOSE(owner);
    return err < 0 ? NULL : sp;
}

_PyStackRef *
ember_generic_store_attr(EMBER_HELPER_ARGS, int oparg)
{
    GENERIC_COUNTER(STORE_ATTR);
    return store_attr(frame, sp, tstate, this_instr, oparg);
}

_PyStackRef *
ember_miss_store_attr(EMBER_HELPER_ARGS, int oparg)
{
    MISS_COUNTER();
    return store_attr(frame, sp, tstate, this_instr, oparg);
}

/* (-- value, NULL if oparg & 1) */
static _PyStackRef *
load_global(EMBER_HELPER_ARGS, int oparg)
{
    PyObject *name = ember_name_at(frame, oparg >> 1);
    STORE_FRAME_STATE();
    _PyEval_LoadGlobalStackRef(frame->f_globals, frame->f_builtins, name, sp);
    if (PyStackRef_IsNull(sp[0])) {
        if (!_PyErr_Occurred(tstate)) {
            _PyEval_FormatExcCheckArg(tstate, PyExc_NameError, "name '%.200s' is not defined", name);
        }
        return NULL;
    }
    sp++;
    if (oparg & 1) {
        sp[0] = PyStackRef_NULL;
        sp++;
    }
    return sp;
}

_PyStackRef *
ember_generic_load_global(EMBER_HELPER_ARGS, int oparg)
{
    GENERIC_COUNTER(LOAD_GLOBAL);
    return load_global(frame, sp, tstate, this_instr, oparg);
}

_PyStackRef *
ember_miss_load_global(EMBER_HELPER_ARGS, int oparg)
{
    MISS_COUNTER();
    return load_global(frame, sp, tstate, this_instr, oparg);
}

/* (lhs, rhs -- res) for a result made from both (NULL: an error). The
 * operands stay on the stack, alive, while it is made. */
static _PyStackRef *
binary_result(_PyInterpreterFrame *frame, _PyStackRef *sp, PyObject *res)
{
    _PyStackRef lhs = sp[-2], rhs = sp[-1];
    sp -= 2;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(lhs);
    PyStackRef_CLOSE(rhs);
    if (res == NULL) {
        return NULL;
    }
    sp[0] = PyStackRef_FromPyObjectSteal(res);
    return sp + 1;
}

/* `op`: BINARY_OP's function for its oparg (its OPERAND0,
 * tier1/src/operands.rs). */
static _PyStackRef *
binary_op(EMBER_HELPER_ARGS, binaryfunc op)
{
    STORE_FRAME_STATE();
    return binary_result(frame, sp, op(PyStackRef_AsPyObjectBorrow(sp[-2]), PyStackRef_AsPyObjectBorrow(sp[-1])));
}

_PyStackRef *
ember_generic_binary_op(EMBER_HELPER_ARGS, binaryfunc op)
{
    GENERIC_COUNTER(BINARY_OP);
    return binary_op(frame, sp, tstate, this_instr, op);
}

_PyStackRef *
ember_miss_binary_op(EMBER_HELPER_ARGS, binaryfunc op)
{
    MISS_COUNTER();
    return binary_op(frame, sp, tstate, this_instr, op);
}

/* An exact int CPython converts to a float exactly (a compact one: under
 * 2**30), as float arithmetic with an int operand does. */
static inline int
is_small_exact_int(PyObject *o)
{
    return PyLong_CheckExact(o) && _PyLong_IsCompact((PyLongObject *)o);
}

_PyStackRef *
ember_miss_float_binop(EMBER_HELPER_ARGS, binaryfunc op, int kind)
{
    PyObject *l = PyStackRef_AsPyObjectBorrow(sp[-2]), *r = PyStackRef_AsPyObjectBorrow(sp[-1]);
    STORE_FRAME_STATE();
    if (PyFloat_CheckExact(l) ? is_small_exact_int(r) : PyFloat_CheckExact(r) && is_small_exact_int(l)) {
        double a = PyFloat_CheckExact(l) ? PyFloat_AS_DOUBLE(l) : (double)_PyLong_CompactValue((PyLongObject *)l);
        double b = PyFloat_CheckExact(r) ? PyFloat_AS_DOUBLE(r) : (double)_PyLong_CompactValue((PyLongObject *)r);
        double v = kind == EMBER_FLOAT_ADD ? a + b : kind == EMBER_FLOAT_SUBTRACT ? a - b : a * b;
        return binary_result(frame, sp, PyFloat_FromDouble(v));
    }
    MISS_COUNTER();
    return binary_op(frame, sp, tstate, this_instr, op);
}

/* (lhs, rhs -- res); oparg >> 5 is the comparison, oparg & 16 asks for a
 * bool. */
static _PyStackRef *
compare_op(EMBER_HELPER_ARGS, int oparg)
{
    _PyStackRef lhs = sp[-2], rhs = sp[-1];
    STORE_FRAME_STATE();
    PyObject *res = PyObject_RichCompare(PyStackRef_AsPyObjectBorrow(lhs), PyStackRef_AsPyObjectBorrow(rhs),
                                         oparg >> 5);
    sp -= 2;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(lhs);
    PyStackRef_CLOSE(rhs);
    if (res == NULL) {
        return NULL;
    }
    if (oparg & 16) {
        int truth = PyObject_IsTrue(res);
        Py_DECREF(res);
        if (truth < 0) {
            return NULL;
        }
        sp[0] = truth ? PyStackRef_True : PyStackRef_False;
    }
    else {
        sp[0] = PyStackRef_FromPyObjectSteal(res);
    }
    return sp + 1;
}

_PyStackRef *
ember_generic_compare_op(EMBER_HELPER_ARGS, int oparg)
{
    GENERIC_COUNTER(COMPARE_OP);
    return compare_op(frame, sp, tstate, this_instr, oparg);
}

_PyStackRef *
ember_miss_compare_op(EMBER_HELPER_ARGS, int oparg)
{
    MISS_COUNTER();
    return compare_op(frame, sp, tstate, this_instr, oparg);
}

/* (left, right -- bool): `left in right`, negated when oparg is 1. */
static _PyStackRef *
contains_op(EMBER_HELPER_ARGS, int oparg)
{
    _PyStackRef lhs = sp[-2], rhs = sp[-1];
    STORE_FRAME_STATE();
    int res = PySequence_Contains(PyStackRef_AsPyObjectBorrow(rhs), PyStackRef_AsPyObjectBorrow(lhs));
    sp -= 2;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(lhs);
    PyStackRef_CLOSE(rhs);
    if (res < 0) {
        return NULL;
    }
    sp[0] = (res ^ oparg) ? PyStackRef_True : PyStackRef_False;
    return sp + 1;
}

_PyStackRef *
ember_generic_contains_op(EMBER_HELPER_ARGS, int oparg)
{
    GENERIC_COUNTER(CONTAINS_OP);
    return contains_op(frame, sp, tstate, this_instr, oparg);
}

_PyStackRef *
ember_miss_contains_op(EMBER_HELPER_ARGS, int oparg)
{
    MISS_COUNTER();
    return contains_op(frame, sp, tstate, this_instr, oparg);
}

/* (value -- bool) */
static _PyStackRef *
to_bool(EMBER_HELPER_ARGS)
{
    _PyStackRef value = sp[-1];
    if (PyStackRef_IsTrue(value) || PyStackRef_IsFalse(value)) {
        return sp;
    }
    STORE_FRAME_STATE();
    int truth = PyObject_IsTrue(PyStackRef_AsPyObjectBorrow(value));
    sp--;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(value);
    if (truth < 0) {
        return NULL;
    }
    sp[0] = truth ? PyStackRef_True : PyStackRef_False;
    return sp + 1;
}

_PyStackRef *
ember_generic_to_bool(EMBER_HELPER_ARGS)
{
    GENERIC_COUNTER(TO_BOOL);
    return to_bool(frame, sp, tstate, this_instr);
}

/* Values whose truth the generic conversion finds without calling code of
 * the program: None, and instances of types without __bool__ or __len__
 * (the interpreter's TO_BOOL_ALWAYS_TRUE). A site that meets one of these
 * besides what it was specialised for (`if node.left:`, where a child is
 * None or a node) does not count it as a miss: the interpreter would
 * re-specialise it for the other kind every ~53 executions, and compiled
 * code would hand it a frame each time, to no gain. */
static inline int
truth_is_plain(PyObject *o)
{
    if (o == Py_None) {
        return 1;
    }
    PyTypeObject *tp = Py_TYPE(o);
    return (tp->tp_as_number == NULL || tp->tp_as_number->nb_bool == NULL)
           && (tp->tp_as_mapping == NULL || tp->tp_as_mapping->mp_length == NULL)
           && (tp->tp_as_sequence == NULL || tp->tp_as_sequence->sq_length == NULL);
}

_PyStackRef *
ember_miss_to_bool(EMBER_HELPER_ARGS)
{
    if (!truth_is_plain(PyStackRef_AsPyObjectBorrow(sp[-1]))) {
        MISS_COUNTER();
    }
    return to_bool(frame, sp, tstate, this_instr);
}

/* (value, container, key --) */
static _PyStackRef *
store_subscr(EMBER_HELPER_ARGS)
{
    _PyStackRef value = sp[-3], container = sp[-2], key = sp[-1];
    STORE_FRAME_STATE();
    int err = PyObject_SetItem(PyStackRef_AsPyObjectBorrow(container), PyStackRef_AsPyObjectBorrow(key),
                               PyStackRef_AsPyObjectBorrow(value));
    sp -= 3;
    frame->stackpointer = sp;
    PyStackRef_CLOSE(value);
    PyStackRef_CLOSE(container);
    PyStackRef_CLOSE(key);
    if (err < 0) {
        return NULL;
    }
    return sp;
}

_PyStackRef *
ember_generic_store_subscr(EMBER_HELPER_ARGS)
{
    GENERIC_COUNTER(STORE_SUBSCR);
    return store_subscr(frame, sp, tstate, this_instr);
}

_PyStackRef *
ember_miss_store_subscr(EMBER_HELPER_ARGS)
{
    MISS_COUNTER();
    return store_subscr(frame, sp, tstate, this_instr);
}
