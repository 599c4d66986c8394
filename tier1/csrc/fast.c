/* Slow paths of the specialised stencils (stencils/c/fast.c): what the
 * interpreter would cache for a site, and the calls that need an argument
 * array (the generic instruction after a failed guard is generic.c's). The
 * stencil has set frame->instr_ptr and frame->stackpointer; a
 * helper that consumes stack items lowers frame->stackpointer before
 * closing any of them. */
#include "glue.h"
#include "pycore_dict.h"

/* The index of `name` in a type's shared keys, -2 if it is not there, -1
 * on an error (none is possible for a str name with a cached hash). */
static Py_ssize_t
shared_key_index(PyDictKeysObject *keys, PyObject *name)
{
    PyDictUnicodeEntry *entries = DK_UNICODE_ENTRIES(keys);
    Py_hash_t hash = PyObject_Hash(name);
    if (hash == -1) {
        PyErr_Clear();
        return -1;
    }
    for (Py_ssize_t i = 0; i < keys->dk_nentries; i++) {
        PyObject *key = entries[i].me_key;
        if (key == name || (key != NULL && PyObject_Hash(key) == hash && PyUnicode_Compare(key, name) == 0)) {
            return i;
        }
    }
    return -2;
}

/* The shared keys' version, assigned now if they have none, as
 * _PyDictKeys_GetVersionForCurrentState (not exported) does where the
 * specialiser asks for one; 0 once the interpreter's versions run out. */
static uint32_t
keys_version_for_current_state(PyDictKeysObject *keys)
{
    if (keys->dk_version != 0) {
        return keys->dk_version;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (interp->dict_state.next_keys_version == 0) {
        return 0;
    }
    keys->dk_version = interp->dict_state.next_keys_version++;
    return keys->dk_version;
}

/* Specialize.c's classify_descriptor, as far as the two entries below
 * need it: what `descr` (the class attribute, or NULL) is. */
enum { CLASS_ATTR_ABSENT, CLASS_ATTR_METHOD, CLASS_ATTR_PLAIN, CLASS_ATTR_OTHER };

static int
classify_class_attr(PyObject *descr)
{
    if (descr == NULL) {
        return CLASS_ATTR_ABSENT;
    }
    PyTypeObject *t = Py_TYPE(descr);
    if (!(t->tp_flags & Py_TPFLAGS_IMMUTABLETYPE) || t->tp_descr_set != NULL) {
        return CLASS_ATTR_OTHER;
    }
    if (t->tp_descr_get != NULL) {
        return (t->tp_flags & Py_TPFLAGS_METHOD_DESCRIPTOR) ? CLASS_ATTR_METHOD : CLASS_ATTR_OTHER;
    }
    return CLASS_ATTR_PLAIN;
}

/* What both entries start from: the owner's type still at `version`,
 * with inline values and generic attribute lookup; the load's name, what
 * it finds on the type (*descr, NULL if nothing) and the type's split
 * shared keys, returned (NULL if any of this fails). */
static PyDictKeysObject *
instance_load(_PyInterpreterFrame *frame, PyObject *owner, int oparg, uint32_t version, PyObject **name,
              PyObject **descr)
{
    PyTypeObject *tp = Py_TYPE(owner);
    if (version == 0 || tp->tp_version_tag != version
        || (tp->tp_flags & (Py_TPFLAGS_INLINE_VALUES | Py_TPFLAGS_MANAGED_DICT))
               != (Py_TPFLAGS_INLINE_VALUES | Py_TPFLAGS_MANAGED_DICT)
        || tp->tp_getattro != PyObject_GenericGetAttr) {
        return NULL;
    }
    *name = ember_name_at(frame, oparg >> 1);
    *descr = _PyType_Lookup(tp, *name);
    PyDictKeysObject *keys = ((PyHeapTypeObject *)tp)->ht_cached_keys;
    if (tp->tp_version_tag != version || keys == NULL || keys->dk_kind != DICT_KEYS_SPLIT) {
        return NULL;
    }
    return keys;
}

/* What the interpreter's specialiser would cache for LOAD_ATTR (with a
 * method load's oparg) at `owner` now if it made it LOAD_ATTR_METHOD_WITH_VALUES
 * (Python/specialize.c: analyze_descriptor_load's METHOD,
 * instance_has_key, specialize_attr_loadclassattr): a method found on a
 * type with inline values, generic attribute lookup, and no instance
 * attribute of that name in the type's shared keys (whose version, assigned
 * if they have none, says so later). 1 with *keys_version and *descr set, else 0. The stencil's
 * guards are the interpreter's: the type version, valid inline values, the
 * shared keys' version. A polymorphic site in a frame that stays in
 * compiled code learns its other types here rather than only from the
 * interpreter's inline cache, which holds one type at a time and which
 * that frame's running never updates. */
int
ember_method_with_values_entry(_PyInterpreterFrame *frame, PyObject *owner, int oparg, uint32_t version,
                               uint32_t *keys_version, PyObject **descr)
{
    PyObject *name, *d;
    PyDictKeysObject *keys = instance_load(frame, owner, oparg, version, &name, &d);
    if (keys == NULL || classify_class_attr(d) != CLASS_ATTR_METHOD || shared_key_index(keys, name) != -2) {
        return 0;
    }
    uint32_t v = keys_version_for_current_state(keys);
    if (v == 0) {
        return 0;
    }
    *keys_version = v;
    *descr = d;
    return 1;
}

/* The byte offset from an instance of its inline value `name` where the
 * interpreter's specialiser would make LOAD_ATTR (not a method load)
 * LOAD_ATTR_INSTANCE_VALUE for the owner's type now (specialize.c:
 * do_specialize_instance_load_attr, specialize_dict_access_inline): generic
 * attribute lookup, nothing of that name on the type but a method or a
 * plain attribute (which an instance value shadows), the name in the
 * type's shared keys; else 0. The stencil's guards are the interpreter's:
 * the type version and valid inline values. The same use as
 * ember_method_with_values_entry. */
uint32_t
ember_instance_value_offset(_PyInterpreterFrame *frame, PyObject *owner, int oparg, uint32_t version)
{
    PyObject *name, *d;
    if (oparg & 1) {
        return 0;
    }
    PyDictKeysObject *keys = instance_load(frame, owner, oparg, version, &name, &d);
    if (keys == NULL || PyUnicode_CompareWithASCIIString(name, "__class__") == 0
        || classify_class_attr(d) == CLASS_ATTR_OTHER) {
        return 0;
    }
    Py_ssize_t index = shared_key_index(keys, name);
    if (index < 0) {
        return 0;
    }
    Py_ssize_t offset = (char *)&_PyObject_InlineValues(owner)->values[index] - (char *)owner;
    return offset == (uint16_t)offset ? (uint32_t)offset : 0;
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
    if (UNLIKELY(ember_maybe_drained(argv, total)) && (kind == CFAST_CLASS || kind == CFAST_BUILTIN_KW)) {
        /* set(<generator expression>), sum(...), ...: resumed directly. */
        int d = ember_drained_arg(callable, argv, total);
        if (d >= 0) {
            res = ember_call_draining(PyThreadState_Get(), callable, argv, total, d, 1);
            goto done;
        }
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
done:
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
