/* The smallest PEP 523 frame evaluator: it only calls CPython's own
 * _PyEval_EvalFrameDefault. regrtest.py's `pep523` configuration turns it on
 * in every process of a test run (REGRTEST_PEP523_BASELINE=1, through the
 * run's ember.pth), to tell the differences that any frame evaluator causes
 * in CPython 3.14 (CPython stops inlining Python-to-Python calls, stops some
 * specialisations, ...) from the ones that are Ember's own. Unlike Ember it
 * keeps no per-code state (no co_extra) and does nothing per frame.
 *
 * Built by regrtest.py with the system C compiler against the installed
 * CPython headers; not part of Ember. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
baseline_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

static PyObject *
enable(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current != _PyEval_EvalFrameDefault && current != baseline_eval) {
        PyErr_SetString(PyExc_RuntimeError, "another frame evaluator is installed");
        return NULL;
    }
    _PyInterpreterState_SetEvalFrameFunc(interp, baseline_eval);
    Py_RETURN_NONE;
}

static PyObject *
is_enabled(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(interp) == baseline_eval);
}

static PyMethodDef methods[] = {
    {"enable", enable, METH_NOARGS, "Install the pass-through frame evaluator."},
    {"is_enabled", is_enabled, METH_NOARGS, "True when it is the interpreter's evaluator."},
    {NULL, NULL, 0, NULL},
};

/* Multi-phase init, loadable in subinterpreters: the .pth line that turns
 * the baseline on also runs in subinterpreters that run `site`, and must not
 * fail there. */
static PyModuleDef_Slot slots[] = {
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_pep523_baseline",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__pep523_baseline(void)
{
    return PyModuleDef_Init(&module);
}
