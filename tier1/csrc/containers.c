/* Slow paths of the container, unpacking and formatting stencils
 * (stencils/c/containers.c).
 *
 * Helpers given (frame, items, n) consume the n stack items at `items` on
 * every path: the work is done with the items still on the frame's stack,
 * then frame->stackpointer is lowered to `items` before any of them is
 * closed, so that a finaliser never sees a dead reference on the stack. */
#include "../../stencils/c/ember_stencil.h"
#include "pycore_dict.h"
#include "pycore_interpolation.h"
#include "pycore_setobject.h"
#include "pycore_unicodeobject.h"

static void
close_items(_PyInterpreterFrame *frame, _PyStackRef *items, int n)
{
    frame->stackpointer = items;
    for (int i = n - 1; i >= 0; i--) {
        PyStackRef_CLOSE(items[i]);
    }
}

/* The items as borrowed PyObject pointers, in `small` when they fit. NULL
 * (MemoryError set) when a buffer cannot be had. */
#define SMALL_ITEMS 16

static PyObject **
borrow_items(_PyStackRef *items, int n, PyObject **small)
{
    PyObject **buf = small;
    if (n > SMALL_ITEMS) {
        buf = PyMem_Malloc((size_t)n * sizeof(PyObject *));
        if (buf == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        buf[i] = PyStackRef_AsPyObjectBorrow(items[i]);
    }
    return buf;
}

static void
release_items(PyObject **buf, PyObject **small)
{
    if (buf != small) {
        PyMem_Free(buf);
    }
}

/* BUILD_STRING: the pieces joined. */
PyObject *
ember_build_string(_PyInterpreterFrame *frame, _PyStackRef *items, int n)
{
    PyObject *small[SMALL_ITEMS];
    PyObject *res = NULL;
    PyObject **buf = borrow_items(items, n, small);
    if (buf != NULL) {
        res = _PyUnicode_JoinArray(Py_GetConstantBorrowed(Py_CONSTANT_EMPTY_STR), buf, n);
        release_items(buf, small);
    }
    close_items(frame, items, n);
    return res;
}

/* BUILD_MAP: n/2 key, value pairs. */
PyObject *
ember_build_map(_PyInterpreterFrame *frame, _PyStackRef *items, int n)
{
    PyObject *small[SMALL_ITEMS];
    PyObject *res = NULL;
    PyObject **buf = borrow_items(items, n, small);
    if (buf != NULL) {
        res = _PyDict_FromItems(buf, 2, buf + 1, 2, n / 2);
        release_items(buf, small);
    }
    close_items(frame, items, n);
    return res;
}

/* BUILD_SET: the items added in order; after a failure the rest are only
 * closed. */
PyObject *
ember_build_set(_PyInterpreterFrame *frame, _PyStackRef *items, int n)
{
    PyObject *set = PySet_New(NULL);
    if (set == NULL) {
        close_items(frame, items, n);
        return NULL;
    }
    frame->stackpointer = items;
    int err = 0;
    for (int i = 0; i < n; i++) {
        if (err == 0) {
            err = _PySet_AddTakeRef((PySetObject *)set, PyStackRef_AsPyObjectSteal(items[i]));
        }
        else {
            PyStackRef_CLOSE(items[i]);
        }
    }
    if (err) {
        Py_DECREF(set);
        return NULL;
    }
    return set;
}

/* BUILD_SLICE: start, stop and, with n == 3, step. */
PyObject *
ember_build_slice(_PyInterpreterFrame *frame, _PyStackRef *items, int n)
{
    PyObject *step = n == 3 ? PyStackRef_AsPyObjectBorrow(items[2]) : NULL;
    PyObject *res = PySlice_New(PyStackRef_AsPyObjectBorrow(items[0]), PyStackRef_AsPyObjectBorrow(items[1]), step);
    close_items(frame, items, n);
    return res;
}

/* BUILD_INTERPOLATION: value, the expression's text and, with oparg & 1,
 * the format spec; the conversion is oparg >> 2. */
PyObject *
ember_build_interpolation(_PyInterpreterFrame *frame, _PyStackRef *items, int oparg)
{
    int has_spec = oparg & 1;
    PyObject *spec = has_spec ? PyStackRef_AsPyObjectBorrow(items[2])
                              : Py_GetConstantBorrowed(Py_CONSTANT_EMPTY_STR);
    PyObject *res = _PyInterpolation_Build(PyStackRef_AsPyObjectBorrow(items[0]),
                                           PyStackRef_AsPyObjectBorrow(items[1]), oparg >> 2, spec);
    close_items(frame, items, 2 + has_spec);
    return res;
}

/* A slice bound of the common kinds: an exact int that fits a Py_ssize_t
 * (one digit), or None (`none`). 0 for any other. */
static inline int
plain_slice_bound(PyObject *bound, Py_ssize_t none, Py_ssize_t *out)
{
    if (bound == Py_None) {
        *out = none;
        return 1;
    }
    if (PyLong_CheckExact(bound) && _PyLong_IsCompact((PyLongObject *)bound)) {
        *out = _PyLong_CompactValue((PyLongObject *)bound);
        return 1;
    }
    return 0;
}

/* Slicing with the common bounds (plain_slice_bound). The bounds of such a
 * slice, adjusted to a sequence of `len` items as PySlice_Unpack and
 * PySlice_AdjustIndices would (step 1), and `hi` raised to `lo` when below
 * it (an empty slice); 0 for any other bound, which goes the general way (a
 * slice object, its bounds' __index__). */
static inline int
plain_slice_bounds(PyObject *start, PyObject *stop, Py_ssize_t len, Py_ssize_t *lo, Py_ssize_t *hi)
{
    if (!plain_slice_bound(start, 0, lo) || !plain_slice_bound(stop, PY_SSIZE_T_MAX, hi)) {
        return 0;
    }
    PySlice_AdjustIndices(len, lo, hi, 1);
    if (*hi < *lo) {
        *hi = *lo;
    }
    return 1;
}

/* container[start:stop] for an exact list, tuple or str and plain bounds:
 * what their subscript with a slice of step 1 comes to (the same new list;
 * the tuple or str itself when whole, the empty one when empty), without
 * making the slice. NULL with no exception set for any other operands. */
static PyObject *
plain_slice(PyObject *container, PyObject *start, PyObject *stop)
{
    Py_ssize_t lo, hi;
    PyTypeObject *type = Py_TYPE(container);
    if (type == &PyList_Type) {
        if (plain_slice_bounds(start, stop, PyList_GET_SIZE(container), &lo, &hi)) {
            return PyList_GetSlice(container, lo, hi);
        }
    }
    else if (type == &PyTuple_Type) {
        if (plain_slice_bounds(start, stop, PyTuple_GET_SIZE(container), &lo, &hi)) {
            return PyTuple_GetSlice(container, lo, hi);
        }
    }
    else if (type == &PyUnicode_Type) {
        if (plain_slice_bounds(start, stop, PyUnicode_GET_LENGTH(container), &lo, &hi)) {
            return PyUnicode_Substring(container, lo, hi);
        }
    }
    return NULL;
}

/* BINARY_SLICE: container[start:stop], of the three items at `items`,
 * which it closes with the frame's stack lowered below them. Out of line:
 * its two calls and three releases, inlined, were 260 bytes of code on the
 * common path of every function using it, for a saving of one call. */
PyObject *
ember_binary_slice(_PyInterpreterFrame *frame, _PyStackRef *items)
{
    _PyStackRef container = items[0], start = items[1], stop = items[2];
    PyObject *res = plain_slice(BORROW(container), BORROW(start), BORROW(stop));
    if (res == NULL && !PyErr_Occurred()) {
        PyObject *slice = PySlice_New(BORROW(start), BORROW(stop), NULL);
        if (slice != NULL) {
            res = PyObject_GetItem(BORROW(container), slice);
            Py_DECREF(slice);
        }
    }
    frame->stackpointer = items;
    PyStackRef_CLOSE(container);
    PyStackRef_CLOSE(start);
    PyStackRef_CLOSE(stop);
    return res;
}

/* STORE_SLICE: container[start:stop] = v, from (v, container, start, stop).
 * Returns -1 on error. The slice's bounds are released first, as when the
 * interpreter's slice (which took them over) dies. */
int
ember_store_slice(_PyInterpreterFrame *frame, _PyStackRef *items)
{
    int err = -1;
    PyObject *container = BORROW(items[1]);
    Py_ssize_t lo, hi;
    PyObject *value = BORROW(items[0]);
    if (Py_TYPE(container) == &PyList_Type && (PyList_CheckExact(value) || PyTuple_CheckExact(value))
        && plain_slice_bounds(BORROW(items[2]), BORROW(items[3]), PyList_GET_SIZE(container), &lo, &hi)) {
        /* What a list's item assignment with a slice of step 1 comes to,
         * for a value it takes as it is (another, the general way: its
         * message for one that is not iterable is the extended slice's). */
        err = PyList_SetSlice(container, lo, hi, value);
    }
    else {
        PyObject *slice = PySlice_New(BORROW(items[2]), BORROW(items[3]), NULL);
        if (slice != NULL) {
            err = PyObject_SetItem(container, slice, value);
            Py_DECREF(slice);
        }
    }
    frame->stackpointer = items;
    PyStackRef_CLOSE(items[2]);
    PyStackRef_CLOSE(items[3]);
    PyStackRef_CLOSE(items[0]);
    PyStackRef_CLOSE(items[1]);
    return err < 0 ? -1 : 0;
}

/* LIST_EXTEND: list.extend(iterable), with the message of `[*x]`. */
int
ember_list_extend(PyThreadState *tstate, PyObject *list, PyObject *iterable)
{
    PyObject *none = _PyList_Extend((PyListObject *)list, iterable);
    if (none != NULL) {
        Py_DECREF(none);
        return 0;
    }
    if (_PyErr_ExceptionMatches(tstate, PyExc_TypeError)
        && Py_TYPE(iterable)->tp_iter == NULL && !PySequence_Check(iterable)) {
        _PyErr_Clear(tstate);
        _PyErr_Format(tstate, PyExc_TypeError, "Value after * must be an iterable, not %.200s",
                      Py_TYPE(iterable)->tp_name);
    }
    return -1;
}

/* DICT_UPDATE: dict.update(update), with the message of `{**x}`. */
int
ember_dict_update(PyThreadState *tstate, PyObject *dict, PyObject *update)
{
    if (PyDict_Update(dict, update) >= 0) {
        return 0;
    }
    if (_PyErr_ExceptionMatches(tstate, PyExc_AttributeError)) {
        _PyErr_Format(tstate, PyExc_TypeError, "'%.200s' object is not a mapping", Py_TYPE(update)->tp_name);
    }
    return -1;
}

/* DICT_MERGE: the `**kwargs` of a call to `callable`; duplicate keywords
 * are errors. */
int
ember_dict_merge(PyThreadState *tstate, PyObject *callable, PyObject *dict, PyObject *update)
{
    if (_PyDict_MergeEx(dict, update, 2) >= 0) {
        return 0;
    }
    _PyEval_FormatKwargsError(tstate, callable, update);
    return -1;
}

/* BINARY_OP_INPLACE_ADD_UNICODE: *target = *target + right, where left is
 * (a reference to) *target; consumes left and right. When the local holds
 * the only other reference, the string grows in place. NULL on error (the
 * local is then unbound, as in the interpreter). */
PyObject *
ember_inplace_add_unicode(_PyStackRef *target, _PyStackRef left, _PyStackRef right)
{
    PyStackRef_CLOSE(left);
    PyObject *s = PyStackRef_AsPyObjectSteal(*target);
    *target = PyStackRef_NULL;
    PyObject *r = PyStackRef_AsPyObjectSteal(right);
    PyUnicode_Append(&s, r);
    Py_DECREF(r);
    if (s == NULL) {
        return NULL;
    }
    *target = PyStackRef_FromPyObjectSteal(s);
    return s;
}

/* A store of the unpacking's stores: the top item into `local`, an old
 * value freed with instr_ptr at the store's instruction `at`. */
static inline __attribute__((always_inline)) _PyStackRef *
store_popped(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, int local, _Py_CODEUNIT *at)
{
    _PyStackRef *slot = &GETLOCAL(local);
    _PyStackRef old = *slot;
    *slot = stack_pointer[-1];
    stack_pointer--;
    if (!PyStackRef_IsNull(old) && PyStackRef_RefcountOnObject(old)) {
        DECREF_MORTAL_THEN(BITS_TO_PTR(old), {
            frame->instr_ptr = at;
            frame->stackpointer = stack_pointer;
        });
    }
    return stack_pointer;
}

/* The unpacking of `seq_o`, if an exact tuple or list of n items, onto
 * `out` (the last item lowest), then the n stores after the unpacking
 * `this_instr`: ember_unpack_stores. NULL, with nothing done, for any other
 * sequence. `seq`: the stack's reference to seq_o, closed after the items
 * are pushed (a borrowed one for the folded load, which has none). */
static inline __attribute__((always_inline)) _PyStackRef *
unpack_then_store(_PyInterpreterFrame *frame, _PyStackRef *out, _PyStackRef seq, _Py_CODEUNIT *this_instr)
{
    PyObject *seq_o = BORROW(seq);
    int n = this_instr->op.arg;
    PyObject **items;
    if (Py_IS_TYPE(seq_o, &PyTuple_Type) && Py_SIZE(seq_o) == n) {
        items = _PyTuple_ITEMS(seq_o);
    }
    else if (Py_IS_TYPE(seq_o, &PyList_Type) && Py_SIZE(seq_o) == n) {
        items = _PyList_ITEMS(seq_o);
    }
    else {
        return NULL;
    }
    for (int i = n; --i >= 0;) {
        *out++ = ember_new_ref(items[i]);
    }
    _PyStackRef *stack_pointer = out;
    if (PyStackRef_RefcountOnObject(seq)) {
        DECREF_MORTAL_THEN(BITS_TO_PTR(seq), {
            frame->instr_ptr = this_instr;
            frame->stackpointer = stack_pointer;
        });
    }
    /* STORE_FAST_STORE_FASTs, one code unit each (compile.rs checks), the
     * first local in the oparg's high nibble; then a STORE_FAST for an odd
     * count. */
    _Py_CODEUNIT *stores = this_instr + 1 + INLINE_CACHE_ENTRIES_UNPACK_SEQUENCE;
    for (int u = 0; u < n >> 1; u++) {
        int arg = stores[u].op.arg;
        stack_pointer = store_popped(frame, stack_pointer, arg >> 4, stores + u);
        stack_pointer = store_popped(frame, stack_pointer, arg & 15, stores + u);
    }
    if (n & 1) {
        stack_pointer = store_popped(frame, stack_pointer, stores[n >> 1].op.arg, stores + (n >> 1));
    }
    return stack_pointer;
}

/* UNPACK_SEQUENCE*__STORES, generic or specialised (stencils/c/containers.c): the
 * unpacking of the exact tuple or list of n items on top of the stack, and
 * the n stores after it (the STORE_FAST_STORE_FASTs and STORE_FAST at
 * this_instr's next code units, which name the locals). NULL, with nothing
 * done, when the sequence is not one of those; otherwise the stack pointer
 * after the stores. Out of line: one copy of this code serves every such
 * statement, where code unrolled in each (a few hundred bytes) runs a
 * function of many of them from the L2 cache. Every step leaves the frame
 * as the instructions' own would: the items pushed first (the last one
 * lowest), the sequence closed with instr_ptr at the unpacking, then each
 * store pops one item, and a store that frees a local's old value does so
 * with instr_ptr at its own instruction (store j's is the (j / 2)th after
 * the unpacking's cache). */
_PyStackRef *
ember_unpack_stores(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, _Py_CODEUNIT *this_instr)
{
    return unpack_then_store(frame, stack_pointer - 1, stack_pointer[-1], this_instr);
}

/* UNPACK_SEQUENCE_{TUPLE,LIST}__LOAD_STORES: the same for the sequence that
 * the LOAD_FAST_BORROW right before this_instr (one code unit) would push,
 * read from its local: pushed and closed, a borrowed reference comes to
 * nothing. */
_PyStackRef *
ember_unpack_local_stores(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, _Py_CODEUNIT *this_instr)
{
    _PyStackRef seq = PyStackRef_Borrow(GETLOCAL(this_instr[-1].op.arg));
    return unpack_then_store(frame, stack_pointer, seq, this_instr);
}
