/* Slow paths of the name, closure, function, import, class and special-call
 * stencils (stencils/c/names.c).
 *
 * Helpers given a `base` consume the stack items from there up: the work is
 * done with the items still on the frame's stack, then frame->stackpointer
 * is lowered to `base` before any of them is closed, so that a finaliser
 * never sees a dead reference on the stack. When they fail before consuming
 * anything (the interpreter's ERROR_NO_POP), frame->stackpointer is left
 * alone. */
#include "../../stencils/c/ember_stencil.h"
#include "pycore_dict.h"
#include "pycore_runtime.h"

#define NAME_ERROR_MSG "name '%.200s' is not defined"

/* STORE_NAME: base[0] is the value, closed on every path. */
int
ember_store_name(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name, _PyStackRef *base)
{
    _PyStackRef v = base[0];
    PyObject *ns = frame->f_locals;
    int err;
    if (ns == NULL) {
        _PyErr_Format(tstate, PyExc_SystemError, "no locals found when storing %R", name);
        err = -1;
    }
    else if (PyDict_CheckExact(ns)) {
        err = PyDict_SetItem(ns, name, PyStackRef_AsPyObjectBorrow(v));
    }
    else {
        err = PyObject_SetItem(ns, name, PyStackRef_AsPyObjectBorrow(v));
    }
    frame->stackpointer = base;
    PyStackRef_CLOSE(v);
    return err;
}

int
ember_delete_name(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name)
{
    PyObject *ns = frame->f_locals;
    if (ns == NULL) {
        _PyErr_Format(tstate, PyExc_SystemError, "no locals when deleting %R", name);
        return -1;
    }
    if (PyObject_DelItem(ns, name) != 0) {
        _PyEval_FormatExcCheckArg(tstate, PyExc_NameError, NAME_ERROR_MSG, name);
        return -1;
    }
    return 0;
}

int
ember_delete_global(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name)
{
    int err = PyDict_Pop(frame->f_globals, name, NULL);
    if (err < 0) {
        return -1;
    }
    if (err == 0) {
        _PyEval_FormatExcCheckArg(tstate, PyExc_NameError, NAME_ERROR_MSG, name);
        return -1;
    }
    return 0;
}

/* LOAD_FROM_DICT_OR_GLOBALS: the mapping, then globals, then builtins. A new
 * reference, or NULL with an exception set. */
PyObject *
ember_load_from_dict_or_globals(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *dict, PyObject *name)
{
    PyObject *v;
    if (PyMapping_GetOptionalItem(dict, name, &v) < 0) {
        return NULL;
    }
    if (v != NULL) {
        return v;
    }
    PyObject *globals = frame->f_globals, *builtins = frame->f_builtins;
    if (PyDict_CheckExact(globals) && PyDict_CheckExact(builtins)) {
        v = _PyDict_LoadGlobal((PyDictObject *)globals, (PyDictObject *)builtins, name);
        if (v == NULL && !_PyErr_Occurred(tstate)) {
            _PyEval_FormatExcCheckArg(tstate, PyExc_NameError, NAME_ERROR_MSG, name);
        }
        return v;
    }
    if (PyMapping_GetOptionalItem(globals, name, &v) < 0) {
        return NULL;
    }
    if (v != NULL) {
        return v;
    }
    if (PyMapping_GetOptionalItem(builtins, name, &v) < 0) {
        return NULL;
    }
    if (v == NULL) {
        _PyEval_FormatExcCheckArg(tstate, PyExc_NameError, NAME_ERROR_MSG, name);
    }
    return v;
}

PyObject *
ember_load_build_class(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    PyObject *bc;
    if (PyMapping_GetOptionalItem(frame->f_builtins, &_Py_ID(__build_class__), &bc) < 0) {
        return NULL;
    }
    if (bc == NULL) {
        _PyErr_SetString(tstate, PyExc_NameError, "__build_class__ not found");
    }
    return bc;
}

int
ember_setup_annotations(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    PyObject *locals = frame->f_locals;
    if (locals == NULL) {
        _PyErr_Format(tstate, PyExc_SystemError, "no locals found when setting up annotations");
        return -1;
    }
    PyObject *ann;
    if (PyMapping_GetOptionalItem(locals, &_Py_ID(__annotations__), &ann) < 0) {
        return -1;
    }
    if (ann != NULL) {
        Py_DECREF(ann);
        return 0;
    }
    ann = PyDict_New();
    if (ann == NULL) {
        return -1;
    }
    int err = PyObject_SetItem(locals, &_Py_ID(__annotations__), ann);
    Py_DECREF(ann);
    return err;
}

/* SET_FUNCTION_ATTRIBUTE of an __annotate__ function: its qualname becomes
 * that of the function it annotates plus ".__annotate__" (3.14 compiles
 * them all as plain "__annotate__" and the interpreter renames them). */
int
ember_name_annotate(PyObject *func, PyObject *annotate)
{
    PyObject *qualname = PyUnicode_FromFormat("%U.__annotate__", ((PyFunctionObject *)func)->func_qualname);
    if (qualname == NULL) {
        return -1;
    }
    Py_SETREF(((PyFunctionObject *)annotate)->func_qualname, qualname);
    return 0;
}

/* LOAD_SPECIAL found no such special method on owner's type. */
void
ember_load_special_error(PyThreadState *tstate, _PyStackRef owner_ref, int oparg)
{
    PyObject *owner = PyStackRef_AsPyObjectBorrow(owner_ref);
    const char *fmt = _PyEval_SpecialMethodCanSuggest(owner, oparg)
        ? _Py_SpecialMethods[oparg].error_suggestion
        : _Py_SpecialMethods[oparg].error;
    _PyErr_Format(tstate, PyExc_TypeError, fmt, owner);
}

/* WITH_EXCEPT_START: top[-5] is __exit__ (a function when top[-4] is its
 * self, else a bound method), top[-1] the exception. */
PyObject *
ember_with_except_start(_PyStackRef *top)
{
    PyObject *exit_func = PyStackRef_AsPyObjectBorrow(top[-5]);
    _PyStackRef exit_self = top[-4];
    PyObject *val = PyStackRef_AsPyObjectBorrow(top[-1]);
    PyObject *tb = PyException_GetTraceback(val);
    PyObject *args[5] = {NULL, PyStackRef_AsPyObjectBorrow(exit_self), PyExceptionInstance_Class(val), val,
                         tb != NULL ? tb : Py_None};
    int has_self = !PyStackRef_IsNull(exit_self);
    PyObject *res = PyObject_Vectorcall(exit_func, args + 2 - has_self,
                                        (size_t)(3 + has_self) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(tb);
    return res;
}

/* CALL_FUNCTION_EX over (func, null, callargs, kwargs_or_null) at base. */
PyObject *
ember_call_function_ex(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base)
{
    PyObject *func = PyStackRef_AsPyObjectBorrow(base[0]);
    PyObject *callargs = PyStackRef_AsPyObjectBorrow(base[2]);
    if (!PyTuple_CheckExact(callargs)) {
        if (_Py_Check_ArgsIterable(tstate, func, callargs) < 0) {
            return NULL;
        }
        PyObject *tuple = PySequence_Tuple(callargs);
        if (tuple == NULL) {
            return NULL;
        }
        _PyStackRef old = base[2];
        base[2] = PyStackRef_FromPyObjectSteal(tuple);
        PyStackRef_CLOSE(old);
        callargs = tuple;
    }
    PyObject *kwargs = PyStackRef_IsNull(base[3]) ? NULL : PyStackRef_AsPyObjectBorrow(base[3]);
    PyObject *res = PyObject_Call(func, callargs, kwargs);
    frame->stackpointer = base;
    PyStackRef_XCLOSE(base[3]);
    PyStackRef_CLOSE(base[2]);
    PyStackRef_XCLOSE(base[1]);
    PyStackRef_CLOSE(base[0]);
    return res;
}

/* The generic LOAD_SUPER_ATTR over (global_super, class, self) at base. */
PyObject *
ember_super_attr(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, PyObject *name)
{
    PyObject *global_super = PyStackRef_AsPyObjectBorrow(base[0]);
    PyObject *args[2] = {PyStackRef_AsPyObjectBorrow(base[1]), PyStackRef_AsPyObjectBorrow(base[2])};
    PyObject *super = PyObject_Vectorcall(global_super, args, (size_t)(oparg & 2), NULL);
    frame->stackpointer = base;
    PyStackRef_CLOSE(base[2]);
    PyStackRef_CLOSE(base[1]);
    PyStackRef_CLOSE(base[0]);
    if (super == NULL) {
        return NULL;
    }
    PyObject *attr = PyObject_GetAttr(super, name);
    Py_DECREF(super);
    return attr;
}

/* CHECK_EG_MATCH over (exc_value, match_type) at base: on success base[0]
 * and base[1] hold (rest, match). */
int
ember_check_eg_match(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base)
{
    PyObject *exc_value = PyStackRef_AsPyObjectBorrow(base[0]);
    PyObject *match_type = PyStackRef_AsPyObjectBorrow(base[1]);
    PyObject *match = NULL, *rest = NULL;
    int res = -1;
    if (_PyEval_CheckExceptStarTypeValid(tstate, match_type) >= 0) {
        res = _PyEval_ExceptionGroupMatch(frame, exc_value, match_type, &match, &rest);
    }
    frame->stackpointer = base;
    PyStackRef_CLOSE(base[1]);
    PyStackRef_CLOSE(base[0]);
    if (res < 0 || match == NULL) {
        return -1;
    }
    if (!Py_IsNone(match)) {
        PyErr_SetHandledException(match);
    }
    base[0] = PyStackRef_FromPyObjectSteal(rest);
    base[1] = PyStackRef_FromPyObjectSteal(match);
    return 0;
}
