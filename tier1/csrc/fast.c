/* Slow paths of the specialised stencils (stencils/c/fast.c): the generic
 * instruction, for when a guard fails, and the calls that need an argument
 * array. The stencil has set frame->instr_ptr and frame->stackpointer; a
 * helper that consumes stack items lowers frame->stackpointer before
 * closing any of them. */
#include "../../stencils/c/ember_stencil.h"

static inline PyObject *
name_at(_PyInterpreterFrame *frame, int i)
{
    return PyTuple_GET_ITEM(_PyFrame_GetCode(frame)->co_names, i);
}

/* LOAD_ATTR: (owner -- attr, self_or_null if oparg & 1). */
int
ember_load_attr_slow(_PyInterpreterFrame *frame, _PyStackRef *sp, int oparg)
{
    _PyStackRef owner = sp[-1];
    PyObject *name = name_at(frame, oparg >> 1);
    PyObject *attr;
    if (oparg & 1) {
        attr = NULL;
        if (_PyObject_GetMethod(PyStackRef_AsPyObjectBorrow(owner), name, &attr)) {
            /* The owner stays on the stack, as self. */
            sp[-1] = PyStackRef_FromPyObjectSteal(attr);
            sp[0] = owner;
            return 0;
        }
    }
    else {
        attr = PyObject_GetAttr(PyStackRef_AsPyObjectBorrow(owner), name);
    }
    frame->stackpointer = sp - 1;
    PyStackRef_CLOSE(owner);
    if (attr == NULL) {
        return -1;
    }
    sp[-1] = PyStackRef_FromPyObjectSteal(attr);
    if (oparg & 1) {
        sp[0] = PyStackRef_NULL;
    }
    return 0;
}

/* STORE_ATTR: (value, owner --). */
int
ember_store_attr_slow(_PyInterpreterFrame *frame, _PyStackRef *sp, int oparg)
{
    _PyStackRef value = sp[-2], owner = sp[-1];
    int err = PyObject_SetAttr(PyStackRef_AsPyObjectBorrow(owner), name_at(frame, oparg),
                               PyStackRef_AsPyObjectBorrow(value));
    frame->stackpointer = sp - 2;
    PyStackRef_CLOSE(value);
    PyStackRef_CLOSE(owner);
    return err < 0 ? -1 : 0;
}

/* COMPARE_OP: (lhs, rhs -- res); oparg >> 5 is the comparison, oparg & 16
 * asks for a bool. */
int
ember_compare_slow(_PyInterpreterFrame *frame, _PyStackRef *sp, int oparg)
{
    _PyStackRef lhs = sp[-2], rhs = sp[-1];
    PyObject *res = PyObject_RichCompare(PyStackRef_AsPyObjectBorrow(lhs), PyStackRef_AsPyObjectBorrow(rhs),
                                         oparg >> 5);
    frame->stackpointer = sp - 2;
    PyStackRef_CLOSE(lhs);
    PyStackRef_CLOSE(rhs);
    if (res == NULL) {
        return -1;
    }
    if (oparg & 16) {
        int truth = PyObject_IsTrue(res);
        Py_DECREF(res);
        if (truth < 0) {
            return -1;
        }
        sp[-2] = truth ? PyStackRef_True : PyStackRef_False;
    }
    else {
        sp[-2] = PyStackRef_FromPyObjectSteal(res);
    }
    return 0;
}

/* The specialised calls that take an argument array (the kinds are those
 * of stencils/c/fast.c): base[0] is
 *   CFAST_BUILTIN, CFAST_BUILTIN_KW: a METH_FASTCALL (| METH_KEYWORDS)
 *       PyCFunction, called with its m_self and every argument;
 *   CFAST_DESCR, CFAST_DESCR_KW: a METH_FASTCALL (| METH_KEYWORDS) method
 *       descriptor, called with the first argument as self and the rest;
 *   CFAST_CLASS: a type with tp_vectorcall, called with every argument.
 * Closes every input, after lowering frame->stackpointer to base. */
enum { CFAST_BUILTIN, CFAST_DESCR, CFAST_BUILTIN_KW, CFAST_DESCR_KW, CFAST_CLASS };

PyObject *
ember_call_cfast(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int kind)
{
    PyObject *callable = PyStackRef_AsPyObjectBorrow(base[0]);
    int has_self = !PyStackRef_IsNull(base[1]);
    _PyStackRef *args = base + 2 - has_self;
    int total = oparg + has_self;
    PyObject *small[16];
    PyObject **argv = small;
    PyObject *res = NULL;
    if (total > (int)(sizeof(small) / sizeof(small[0]))) {
        argv = PyMem_Malloc((size_t)total * sizeof(PyObject *));
        if (argv == NULL) {
            PyErr_NoMemory();
            goto close;
        }
    }
    for (int i = 0; i < total; i++) {
        argv[i] = PyStackRef_AsPyObjectBorrow(args[i]);
    }
    switch (kind) {
    case CFAST_BUILTIN:
        res = _PyCFunctionFast_CAST(PyCFunction_GET_FUNCTION(callable))(PyCFunction_GET_SELF(callable), argv, total);
        break;
    case CFAST_BUILTIN_KW:
        res = _PyCFunctionFastWithKeywords_CAST(PyCFunction_GET_FUNCTION(callable))(
            PyCFunction_GET_SELF(callable), argv, total, NULL);
        break;
    case CFAST_DESCR:
        res = _PyCFunctionFast_CAST(((PyMethodDescrObject *)callable)->d_method->ml_meth)(argv[0], argv + 1,
                                                                                       total - 1);
        break;
    case CFAST_DESCR_KW:
        res = _PyCFunctionFastWithKeywords_CAST(((PyMethodDescrObject *)callable)->d_method->ml_meth)(
            argv[0], argv + 1, total - 1, NULL);
        break;
    default:
        res = ((PyTypeObject *)callable)->tp_vectorcall(callable, argv, (size_t)total, NULL);
        break;
    }
    if (argv != small) {
        PyMem_Free(argv);
    }
close:
    frame->stackpointer = base;
    for (_PyStackRef *p = base + 2 + oparg; p > base;) {
        p--;
        PyStackRef_XCLOSE(*p);
    }
    return res;
}
