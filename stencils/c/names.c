/* Names, closures, functions, imports, classes, special calls and pattern
 * matching (whose stencils are in containers.c).
 *
 * OPERAND0 of the name instructions is the name (an item of co_names, or of
 * co_localsplusnames for LOAD_FROM_DICT_OR_DEREF), kept alive by the code
 * object; see tier1/src/operands.rs. Slow and rare paths are in
 * tier1/csrc/names.c. */
#include "ember_stencil.h"
#include "pycore_cell.h"
#include "pycore_function.h"
#include "pycore_intrinsics.h"
#include "pycore_opcode_utils.h"
#include "pycore_runtime.h"
#include "pycore_typeobject.h"

/* Helpers in tier1/csrc/names.c. Those given a `base` consume the stack
 * items from there up: they lower frame->stackpointer to `base` before
 * closing any of them, and leave it where the interpreter's error label
 * would have it when they fail. */
void ember_load_special_error(PyThreadState *tstate, _PyStackRef owner, int oparg);
PyObject *ember_with_except_start(_PyStackRef *top);
PyObject *ember_call_function_ex(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base);
PyObject *ember_super_attr(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, PyObject *name);
int ember_check_eg_match(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base);
int ember_store_name(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name, _PyStackRef *base);
int ember_delete_name(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name);
int ember_delete_global(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *name);
PyObject *ember_load_from_dict_or_globals(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *dict,
                                          PyObject *name);
PyObject *ember_load_build_class(PyThreadState *tstate, _PyInterpreterFrame *frame);
int ember_setup_annotations(PyThreadState *tstate, _PyInterpreterFrame *frame);
int ember_name_annotate(PyObject *func, PyObject *annotate);

/* After a call, as CALL does (stencils/c/ops.c): pending events, and the
 * interpreter takes over if the call switched instrumentation on.
 * OPERAND0: the instrumentation version compiled for. */
#define NAMES_AFTER_CALL()                                             \
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

#define PUSH(ref)                 \
    do {                          \
        stack_pointer[0] = (ref); \
        stack_pointer++;          \
    } while (0)

/* ---- Cells and free variables ----------------------------------------- */

/* The local (an argument, or NULL) moves into a new cell. */
EMBER_STENCIL(MAKE_CELL)
{
    int oparg = OPARG;
    ESCAPE();
    PyObject *cell = PyCell_New(BORROW(GETLOCAL(oparg)));
    if (UNLIKELY(cell == NULL)) {
        ERROR();
    }
    _PyStackRef old = GETLOCAL(oparg);
    GETLOCAL(oparg) = PyStackRef_FromPyObjectSteal(cell);
    /* The cell holds its own reference: this cannot free the value. */
    PyStackRef_XCLOSE(old);
    CONTINUE();
}

/* The function's closure cells into the last oparg locals. */
EMBER_STENCIL(COPY_FREE_VARS)
{
    int n = OPARG;
    PyObject *closure = ((PyFunctionObject *)BORROW(frame->f_funcobj))->func_closure;
    _PyStackRef *dst = frame->localsplus + (CODE()->co_nlocalsplus - n);
    for (int i = 0; i < n; i++) {
        dst[i] = PyStackRef_FromPyObjectNew(PyTuple_GET_ITEM(closure, i));
    }
    CONTINUE();
}

EMBER_STENCIL(LOAD_DEREF)
{
    int oparg = OPARG;
    _PyStackRef value = _PyCell_GetStackRef((PyCellObject *)BORROW(GETLOCAL(oparg)));
    if (UNLIKELY(PyStackRef_IsNull(value))) {
        ESCAPE();
        _PyEval_FormatExcUnbound(tstate, CODE(), oparg);
        ERROR();
    }
    PUSH(value);
    CONTINUE();
}

/* (v --); the old contents are released after the store. */
EMBER_STENCIL(STORE_DEREF)
{
    _PyStackRef v = stack_pointer[-1];
    stack_pointer--;
    ESCAPE();
    PyCell_SetTakeRef((PyCellObject *)BORROW(GETLOCAL(OPARG)), PyStackRef_AsPyObjectSteal(v));
    CONTINUE();
}

EMBER_STENCIL(DELETE_DEREF)
{
    int oparg = OPARG;
    PyObject *old = PyCell_SwapTakeRef((PyCellObject *)BORROW(GETLOCAL(oparg)), NULL);
    ESCAPE();
    if (UNLIKELY(old == NULL)) {
        _PyEval_FormatExcUnbound(tstate, CODE(), oparg);
        ERROR();
    }
    Py_DECREF(old);
    CONTINUE();
}

/* (class_dict -- value): the class namespace first, then the cell.
 * OPERAND0: the variable's name. */
EMBER_STENCIL(LOAD_FROM_DICT_OR_DEREF)
{
    int oparg = OPARG;
    _PyStackRef class_dict = stack_pointer[-1];
    PyObject *value;
    ESCAPE();
    int err = PyMapping_GetOptionalItem(BORROW(class_dict), (PyObject *)OPERAND0, &value);
    if (UNLIKELY(err < 0)) {
        ERROR();
    }
    if (value == NULL) {
        value = PyCell_GetRef((PyCellObject *)BORROW(GETLOCAL(oparg)));
        if (UNLIKELY(value == NULL)) {
            _PyEval_FormatExcUnbound(tstate, CODE(), oparg);
            ERROR();
        }
    }
    stack_pointer--;
    SYNC_SP();
    CLOSE(class_dict);
    PUSH(PyStackRef_FromPyObjectSteal(value));
    CONTINUE();
}

/* ---- Names in namespaces (module and class bodies, globals) ----------- */

/* OPERAND0: the name. */
EMBER_STENCIL(LOAD_NAME)
{
    ESCAPE();
    PyObject *v = _PyEval_LoadName(tstate, frame, (PyObject *)OPERAND0);
    if (UNLIKELY(v == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(v));
    CONTINUE();
}

/* (v --); OPERAND0: the name. */
EMBER_STENCIL(STORE_NAME)
{
    _PyStackRef *base = stack_pointer - 1;
    ESCAPE();
    int err = ember_store_name(tstate, frame, (PyObject *)OPERAND0, base);
    stack_pointer = base;
    if (UNLIKELY(err != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* OPERAND0: the name. */
EMBER_STENCIL(DELETE_NAME)
{
    ESCAPE();
    if (UNLIKELY(ember_delete_name(tstate, frame, (PyObject *)OPERAND0) != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (v --); OPERAND0: the name. */
EMBER_STENCIL(STORE_GLOBAL)
{
    _PyStackRef v = stack_pointer[-1];
    ESCAPE();
    int err = PyDict_SetItem(frame->f_globals, (PyObject *)OPERAND0, BORROW(v));
    stack_pointer--;
    SYNC_SP();
    CLOSE(v);
    if (UNLIKELY(err != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* OPERAND0: the name. */
EMBER_STENCIL(DELETE_GLOBAL)
{
    ESCAPE();
    if (UNLIKELY(ember_delete_global(tstate, frame, (PyObject *)OPERAND0) != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (mod_or_class_dict -- v); OPERAND0: the name. */
EMBER_STENCIL(LOAD_FROM_DICT_OR_GLOBALS)
{
    _PyStackRef dict = stack_pointer[-1];
    ESCAPE();
    PyObject *v = ember_load_from_dict_or_globals(tstate, frame, BORROW(dict), (PyObject *)OPERAND0);
    if (UNLIKELY(v == NULL)) {
        ERROR();
    }
    stack_pointer--;
    SYNC_SP();
    CLOSE(dict);
    PUSH(PyStackRef_FromPyObjectSteal(v));
    CONTINUE();
}

EMBER_STENCIL(LOAD_LOCALS)
{
    PyObject *locals = frame->f_locals;
    if (UNLIKELY(locals == NULL)) {
        ESCAPE();
        _PyErr_SetString(tstate, PyExc_SystemError, "no locals found");
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectNew(locals));
    CONTINUE();
}

EMBER_STENCIL(LOAD_BUILD_CLASS)
{
    ESCAPE();
    PyObject *bc = ember_load_build_class(tstate, frame);
    if (UNLIKELY(bc == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(bc));
    CONTINUE();
}

EMBER_STENCIL(SETUP_ANNOTATIONS)
{
    ESCAPE();
    if (UNLIKELY(ember_setup_annotations(tstate, frame) != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* AssertionError, NotImplementedError, tuple, all, any: the interpreter's
 * table of them. */
EMBER_STENCIL(LOAD_COMMON_CONSTANT)
{
    PUSH(PyStackRef_FromPyObjectNew(tstate->interp->common_consts[OPARG]));
    CONTINUE();
}

/* ---- Imports ----------------------------------------------------------- */

/* (level, fromlist -- module); OPERAND0: the module name. */
EMBER_STENCIL(IMPORT_NAME)
{
    _PyStackRef level = stack_pointer[-2], fromlist = stack_pointer[-1];
    ESCAPE();
    PyObject *res = _PyEval_ImportName(tstate, frame, (PyObject *)OPERAND0, BORROW(fromlist), BORROW(level));
    stack_pointer -= 2;
    SYNC_SP();
    CLOSE(fromlist);
    CLOSE(level);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(res));
    CONTINUE();
}

/* (from -- from, value); OPERAND0: the name. */
EMBER_STENCIL(IMPORT_FROM)
{
    ESCAPE();
    PyObject *res = _PyEval_ImportFrom(tstate, BORROW(stack_pointer[-1]), (PyObject *)OPERAND0);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(res));
    CONTINUE();
}

/* ---- Functions --------------------------------------------------------- */

/* (code -- func) */
EMBER_STENCIL(MAKE_FUNCTION)
{
    _PyStackRef codeobj = stack_pointer[-1];
    PyCodeObject *code = (PyCodeObject *)BORROW(codeobj);
    uint32_t version = code->co_version;
    ESCAPE();
    PyObject *func = PyFunction_New((PyObject *)code, frame->f_globals);
    stack_pointer--;
    SYNC_SP();
    CLOSE(codeobj);
    if (UNLIKELY(func == NULL)) {
        ERROR();
    }
    _PyFunction_SetVersion((PyFunctionObject *)func, version);
    PUSH(PyStackRef_FromPyObjectSteal(func));
    CONTINUE();
}

/* (attr, func -- func): oparg is the MAKE_FUNCTION_* flag of the slot, which
 * the new function has empty; attr is stolen. As 3.14's interpreter does, an
 * __annotate__ function is renamed "<func's qualname>.__annotate__". */
EMBER_STENCIL(SET_FUNCTION_ATTRIBUTE)
{
    int oparg = OPARG;
    _PyStackRef attr = stack_pointer[-2], func = stack_pointer[-1];
    PyObject *attr_o = PyStackRef_AsPyObjectSteal(attr);
    PyObject **slot = (PyObject **)((char *)BORROW(func) + _Py_FunctionAttributeOffsets[oparg]);
    *slot = attr_o;
    stack_pointer[-2] = func;
    stack_pointer--;
    if (oparg == MAKE_FUNCTION_ANNOTATE && Py_IS_TYPE(attr_o, &PyFunction_Type)) {
        ESCAPE();
        if (UNLIKELY(ember_name_annotate(BORROW(func), attr_o) < 0)) {
            ERROR();
        }
    }
    CONTINUE();
}

/* (func, null, callargs, kwargs_or_null -- result) */
EMBER_STENCIL(CALL_FUNCTION_EX)
{
    ESCAPE();
    PyObject *res = ember_call_function_ex(tstate, frame, stack_pointer - 4);
    stack_pointer = frame->stackpointer;
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(res));
    NAMES_AFTER_CALL();
    CONTINUE();
}

/* __init__'s result, in the shim frame of CALL_ALLOC_AND_ENTER_INIT. */
EMBER_STENCIL(EXIT_INIT_CHECK)
{
    _PyStackRef should_be_none = stack_pointer[-1];
    if (UNLIKELY(!PyStackRef_IsNone(should_be_none))) {
        ESCAPE();
        PyErr_Format(PyExc_TypeError, "__init__() should return None, not '%.200s'",
                     Py_TYPE(BORROW(should_be_none))->tp_name);
        ERROR();
    }
    stack_pointer--;
    CONTINUE();
}

/* CALL_INTRINSIC_1 is in gen.c. */

/* (value2, value1 -- res) */
EMBER_STENCIL(CALL_INTRINSIC_2)
{
    _PyStackRef value2 = stack_pointer[-2], value1 = stack_pointer[-1];
    ESCAPE();
    PyObject *res = _PyIntrinsics_BinaryFunctions[OPARG].func(tstate, BORROW(value2), BORROW(value1));
    stack_pointer -= 2;
    SYNC_SP();
    CLOSE(value1);
    CLOSE(value2);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(res));
    CONTINUE();
}

/* ---- Attributes and super() -------------------------------------------- */

/* (owner --); OPERAND0: the name. */
EMBER_STENCIL(DELETE_ATTR)
{
    _PyStackRef owner = stack_pointer[-1];
    ESCAPE();
    int err = PyObject_DelAttr(BORROW(owner), (PyObject *)OPERAND0);
    stack_pointer--;
    SYNC_SP();
    CLOSE(owner);
    if (UNLIKELY(err != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (global_super, class, self -- attr, null if oparg & 1): super() called
 * with oparg & 2 arguments, then the attribute. OPERAND0: the name. */
EMBER_STENCIL(LOAD_SUPER_ATTR)
{
    ADAPTIVE(LOAD_SUPER_ATTR);
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - 3;
    ESCAPE();
    PyObject *attr = ember_super_attr(frame, base, oparg, (PyObject *)OPERAND0);
    stack_pointer = base;
    if (UNLIKELY(attr == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(attr));
    if (oparg & 1) {
        PUSH(PyStackRef_NULL);
    }
    CONTINUE();
}

/* The specialisations: the built-in super and a class, looked up without
 * making the super object; otherwise the generic instruction. */
EMBER_STENCIL(LOAD_SUPER_ATTR_ATTR)
{
    _PyStackRef global_super = stack_pointer[-3], class = stack_pointer[-2], self = stack_pointer[-1];
    PyObject *name = (PyObject *)OPERAND0;
    _PyStackRef *base = stack_pointer - 3;
    ESCAPE();
    PyObject *attr;
    if (LIKELY(BORROW(global_super) == (PyObject *)&PySuper_Type && PyType_Check(BORROW(class)))) {
        attr = _PySuper_Lookup((PyTypeObject *)BORROW(class), BORROW(self), name, NULL);
        stack_pointer = base;
        SYNC_SP();
        CLOSE(self);
        CLOSE(class);
        CLOSE(global_super);
    }
    else {
        ADAPTIVE_MISS();
        attr = ember_super_attr(frame, base, OPARG, name);
        stack_pointer = base;
    }
    if (UNLIKELY(attr == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(attr));
    CONTINUE();
}

/* (global_super, class, self -- attr, self_or_null) */
EMBER_STENCIL(LOAD_SUPER_ATTR_METHOD)
{
    _PyStackRef global_super = stack_pointer[-3], class = stack_pointer[-2], self = stack_pointer[-1];
    PyObject *name = (PyObject *)OPERAND0;
    _PyStackRef *base = stack_pointer - 3;
    ESCAPE();
    if (UNLIKELY(BORROW(global_super) != (PyObject *)&PySuper_Type || !PyType_Check(BORROW(class)))) {
        ADAPTIVE_MISS();
        PyObject *attr = ember_super_attr(frame, base, OPARG, name);
        stack_pointer = base;
        if (UNLIKELY(attr == NULL)) {
            ERROR();
        }
        PUSH(PyStackRef_FromPyObjectSteal(attr));
        PUSH(PyStackRef_NULL);
        CONTINUE();
    }
    PyObject *self_o = BORROW(self);
    int method_found = 0;
    PyObject *attr = _PySuper_Lookup((PyTypeObject *)BORROW(class), self_o, name,
                                     Py_TYPE(self_o)->tp_getattro == PyObject_GenericGetAttr ? &method_found : NULL);
    if (UNLIKELY(attr == NULL)) {
        ERROR();
    }
    /* attr, then self (method_found) or NULL, over the three inputs. */
    stack_pointer = base;
    SYNC_SP();
    CLOSE(class);
    CLOSE(global_super);
    base[0] = PyStackRef_FromPyObjectSteal(attr);
    if (method_found) {
        base[1] = self;
        stack_pointer = base + 2;
    }
    else {
        base[1] = PyStackRef_NULL;
        stack_pointer = base + 2;
        SYNC_SP();
        CLOSE(self);
    }
    CONTINUE();
}

/* ---- with-statements ---------------------------------------------------- */

/* (owner -- method, self_or_null): the special method _Py_SpecialMethods[oparg]
 * looked up on the type. */
EMBER_STENCIL(LOAD_SPECIAL)
{
    int oparg = OPARG;
    _PyStackRef owner = stack_pointer[-1];
    stack_pointer[-1] = PyStackRef_NULL;
    stack_pointer[0] = owner;
    stack_pointer++;
    ESCAPE();
    int found = _PyObject_LookupSpecialMethod(_Py_SpecialMethods[oparg].name, stack_pointer - 2);
    if (UNLIKELY(found <= 0)) {
        if (found == 0) {
            ember_load_special_error(tstate, stack_pointer[-1], oparg);
        }
        ERROR();
    }
    CONTINUE();
}

/* (exit_func, exit_self, lasti, prev_exc, val -- the same, res):
 * __exit__(type, value, traceback) of the exception being handled. */
EMBER_STENCIL(WITH_EXCEPT_START)
{
    ESCAPE();
    PyObject *res = ember_with_except_start(stack_pointer);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    PUSH(PyStackRef_FromPyObjectSteal(res));
    CONTINUE();
}

/* (exc_value, match_type -- rest, match): except* matching. */
EMBER_STENCIL(CHECK_EG_MATCH)
{
    _PyStackRef *base = stack_pointer - 2;
    ESCAPE();
    int err = ember_check_eg_match(tstate, frame, base);
    stack_pointer = base;
    if (UNLIKELY(err < 0)) {
        ERROR();
    }
    stack_pointer += 2;
    CONTINUE();
}

/* GET_LEN and MATCH_CLASS, MATCH_KEYS, MATCH_MAPPING, MATCH_SEQUENCE are in
 * containers.c. */
