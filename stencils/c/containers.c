/* Containers, unpacking, formatting, slicing; the TO_BOOL and BINARY_OP
 * specialisations over built-in containers and strings.
 *
 * Every specialised stencil checks its own guard and otherwise does the
 * generic instruction's work, as the interpreter would after deoptimising. */
#include "ember_stencil.h"
#include "pycore_dict.h"
#include "pycore_interpolation.h"
#include "pycore_setobject.h"
#include "pycore_template.h"
#include "pycore_unicodeobject.h"

/* Helpers in tier1/csrc/containers.c. Those taking (frame, items, n) consume
 * the n stack items at `items`, on success and on failure, after lowering
 * frame->stackpointer to `items`. */
PyObject *ember_build_string(_PyInterpreterFrame *frame, _PyStackRef *items, int n);
PyObject *ember_build_set(_PyInterpreterFrame *frame, _PyStackRef *items, int n);
PyObject *ember_build_map(_PyInterpreterFrame *frame, _PyStackRef *items, int n);
PyObject *ember_build_slice(_PyInterpreterFrame *frame, _PyStackRef *items, int n);
PyObject *ember_build_interpolation(_PyInterpreterFrame *frame, _PyStackRef *items, int oparg);
int ember_store_slice(_PyInterpreterFrame *frame, _PyStackRef *items);
int ember_list_extend(PyThreadState *tstate, PyObject *list, PyObject *iterable);
int ember_dict_update(PyThreadState *tstate, PyObject *dict, PyObject *update);
int ember_dict_merge(PyThreadState *tstate, PyObject *callable, PyObject *dict, PyObject *update);
PyObject *ember_inplace_add_unicode(_PyStackRef *target, _PyStackRef left, _PyStackRef right);

/* ---- Building containers and strings ---------------------------------- */

/* (items[n] -- result): n is the oparg times `per_item`. */
#define BUILD_FROM_ITEMS(NAME, HELPER, PER_ITEM)                               \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        int n = OPARG * (PER_ITEM);                                            \
        _PyStackRef *items = stack_pointer - n;                                \
        ESCAPE();                                                              \
        PyObject *res = HELPER(frame, items, n);                               \
        stack_pointer = items;                                                 \
        if (UNLIKELY(res == NULL)) {                                           \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);                  \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    }

BUILD_FROM_ITEMS(BUILD_STRING, ember_build_string, 1)
BUILD_FROM_ITEMS(BUILD_SET, ember_build_set, 1)
BUILD_FROM_ITEMS(BUILD_MAP, ember_build_map, 2)
/* (start, stop[, step] -- slice) */
BUILD_FROM_ITEMS(BUILD_SLICE, ember_build_slice, 1)

/* (value, str, format[oparg & 1] -- interpolation) */
EMBER_STENCIL(BUILD_INTERPOLATION)
{
    int oparg = OPARG;
    _PyStackRef *items = stack_pointer - 2 - (oparg & 1);
    ESCAPE();
    PyObject *res = ember_build_interpolation(frame, items, oparg);
    stack_pointer = items;
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* (strings, interpolations -- template) */
EMBER_STENCIL(BUILD_TEMPLATE)
{
    _PyStackRef strings = stack_pointer[-2], interpolations = stack_pointer[-1];
    ESCAPE();
    PyObject *res = _PyTemplate_Build(BORROW(strings), BORROW(interpolations));
    stack_pointer -= 2;
    SYNC_SP();
    CLOSE(interpolations);
    CLOSE(strings);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* (container, unused[oparg-1], iterable -- container, unused[oparg-1]) */
#define UPDATE_CONTAINER(NAME, CALL)                                           \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        _PyStackRef iterable = stack_pointer[-1];                              \
        PyObject *container = BORROW(stack_pointer[-1 - OPARG]);               \
        ESCAPE();                                                              \
        int err = CALL;                                                        \
        stack_pointer--;                                                       \
        SYNC_SP();                                                             \
        CLOSE(iterable);                                            \
        if (UNLIKELY(err < 0)) {                                               \
            ERROR();                                                           \
        }                                                                      \
        CONTINUE();                                                            \
    }

UPDATE_CONTAINER(LIST_EXTEND, ember_list_extend(tstate, container, BORROW(iterable)))
UPDATE_CONTAINER(SET_UPDATE, _PySet_Update(container, BORROW(iterable)))
UPDATE_CONTAINER(DICT_UPDATE, ember_dict_update(tstate, container, BORROW(iterable)))

/* (callable, unused, unused, dict, unused[oparg-1], update -- the same
 * without update) */
EMBER_STENCIL(DICT_MERGE)
{
    int oparg = OPARG;
    _PyStackRef update = stack_pointer[-1];
    PyObject *dict = BORROW(stack_pointer[-1 - oparg]);
    PyObject *callable = BORROW(stack_pointer[-4 - oparg]);
    ESCAPE();
    int err = ember_dict_merge(tstate, callable, dict, BORROW(update));
    stack_pointer--;
    SYNC_SP();
    CLOSE(update);
    if (UNLIKELY(err < 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (set, unused[oparg-1], v -- set, unused[oparg-1]); v is stolen. */
EMBER_STENCIL(SET_ADD)
{
    _PyStackRef v = stack_pointer[-1];
    PyObject *set = BORROW(stack_pointer[-1 - OPARG]);
    stack_pointer--;
    ESCAPE();
    /* Code can rebind __conditional_annotations__ (the set module-level
     * annotations are added to) to anything: 3.14.10 checks (gh-154902). */
    if (UNLIKELY(!PySet_CheckExact(set))) {
        _PyErr_Format(tstate, PyExc_TypeError, "'%.200s' object is not a set", Py_TYPE(set)->tp_name);
        CLOSE(v);
        ERROR();
    }
    if (UNLIKELY(_PySet_AddTakeRef((PySetObject *)set, PyStackRef_AsPyObjectSteal(v)) != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (dict, unused[oparg-1], key, value -- dict, unused[oparg-1]); key and
 * value are stolen. */
EMBER_STENCIL(MAP_ADD)
{
    _PyStackRef key = stack_pointer[-2], value = stack_pointer[-1];
    PyObject *dict = BORROW(stack_pointer[-2 - OPARG]);
    stack_pointer -= 2;
    ESCAPE();
    if (UNLIKELY(_PyDict_SetItem_Take2((PyDictObject *)dict, PyStackRef_AsPyObjectSteal(key),
                                       PyStackRef_AsPyObjectSteal(value)) != 0)) {
        ERROR();
    }
    CONTINUE();
}

/* ---- Unpacking -------------------------------------------------------- */

/* The generic unpacking: seq is taken off the stack, the n + 1 + after
 * outputs (after < 0: exactly n) written below `top`, first item on top;
 * then NEXT (CONTINUE(), or JUMP() to stores placed apart). */
#define UNPACK_GENERIC(N, AFTER, TOTAL) UNPACK_GENERIC_THEN(N, AFTER, TOTAL, CONTINUE())
#define UNPACK_GENERIC_THEN(N, AFTER, TOTAL, NEXT)                             \
    do {                                                                       \
        _PyStackRef *top = stack_pointer - 1 + (TOTAL);                        \
        PyObject *seq_o = PyStackRef_AsPyObjectSteal(stack_pointer[-1]);       \
        stack_pointer--;                                                       \
        ESCAPE();                                                              \
        int ok = _PyEval_UnpackIterableStackRef(tstate, seq_o, (N), (AFTER), top); \
        Py_DECREF(seq_o);                                                      \
        if (UNLIKELY(!ok)) {                                                   \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer += (TOTAL);                                              \
        NEXT;                                                                  \
    } while (0)


/* (seq -- before[oparg & 0xFF], rest, after[oparg >> 8]) */
EMBER_STENCIL(UNPACK_EX)
{
    int oparg = OPARG;
    int before = oparg & 0xFF, after = oparg >> 8;
    UNPACK_GENERIC(before, after, before + 1 + after);
}

/* Specialised: an exact tuple or list of exactly oparg items; its items
 * are pushed last first, so that item 0 ends on top. The specialised
 * form only says which of the two is tried first: the other is copied
 * the same way, without counting a miss. Code that unpacks both (one
 * function called with either) would otherwise miss on every other
 * call, where the interpreter's own copies differ only in the type they
 * test first. */
#define UNPACK_FAST(NAME, PRE, GENERIC, FIRST, COUNT)                          \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        PRE;                                                                   \
        int oparg = COUNT;                                                     \
        _PyStackRef seq = stack_pointer[-1];                                   \
        PyObject *seq_o = BORROW(seq);                                         \
        PyObject **items;                                                      \
        if (LIKELY(Py_IS_TYPE(seq_o, &FIRST##_Type) && Py_SIZE(seq_o) == oparg)) { \
            items = UNPACK_ITEMS_##FIRST(seq_o);                               \
        }                                                                      \
        else if (Py_IS_TYPE(seq_o, &UNPACK_OTHER_##FIRST##_Type) && Py_SIZE(seq_o) == oparg) { \
            items = UNPACK_ITEMS_OTHER_##FIRST(seq_o);                         \
        }                                                                      \
        else {                                                                 \
            MISS(GENERIC);                                                     \
        }                                                                      \
        _PyStackRef *out = stack_pointer - 1;                                  \
        for (int i = oparg; --i >= 0;) {                                       \
            *out++ = PyStackRef_FromPyObjectNew(items[i]);                     \
        }                                                                      \
        stack_pointer = out;                                                   \
        CLOSE_ESCAPING(seq);                                                   \
        CONTINUE();                                                            \
    }

#define UNPACK_ITEMS_PyTuple(o) _PyTuple_ITEMS(o)
#define UNPACK_ITEMS_PyList(o) _PyList_ITEMS(o)
#define UNPACK_OTHER_PyTuple_Type PyList_Type
#define UNPACK_OTHER_PyList_Type PyTuple_Type
#define UNPACK_ITEMS_OTHER_PyTuple(o) _PyList_ITEMS(o)
#define UNPACK_ITEMS_OTHER_PyList(o) _PyTuple_ITEMS(o)

/* (seq -- values[oparg]). Not yet specialised (tier 1 compiled the code
 * before the interpreter ran it): exact tuples and lists still take the
 * fast path. */
/* The other sequences: the generic unpacking of OPARG items (after PRE: a
 * miss counted when the instruction is specialised), then NEXT. */
#define UNPACK_GENERIC_HELPER(NAME, PRE, NEXT)                                 \
    MISS_HELPER(NAME)                                                          \
    {                                                                          \
        PRE;                                                                   \
        int oparg = OPARG;                                                     \
        UNPACK_GENERIC_THEN(oparg, -1, oparg, NEXT);                           \
    }
UNPACK_GENERIC_HELPER(unpack_generic, (void)0, CONTINUE())
UNPACK_GENERIC_HELPER(unpack_miss, ADAPTIVE_MISS(), CONTINUE())
/* UNPACK_SEQUENCE_TWO_TUPLE's oparg is 2 as well. */
UNPACK_FAST(UNPACK_SEQUENCE, ADAPTIVE(UNPACK_SEQUENCE), unpack_generic, PyTuple, OPARG)
UNPACK_FAST(UNPACK_SEQUENCE_TWO_TUPLE, (void)0, unpack_miss, PyTuple, 2)
UNPACK_FAST(UNPACK_SEQUENCE_TUPLE, (void)0, unpack_miss, PyTuple, OPARG)
UNPACK_FAST(UNPACK_SEQUENCE_LIST, (void)0, unpack_miss, PyList, OPARG)

/* UNPACK_SEQUENCE (generic or specialised for a tuple or a list) followed by
 * the STORE_FAST_STORE_FASTs (and a last STORE_FAST when oparg is odd) that
 * store its oparg items, on one line, none a jump target
 * (tier1/src/compile.rs chooses this form): the unpacking and the stores are
 * done by ember_unpack_stores (tier1/csrc/containers.c), which reads the
 * locals from the stores' opargs, and the code goes on with what follows
 * the stores, placed next. The stores' own code is placed with the rare
 * paths: a sequence that is not an exact tuple or list of oparg items is
 * unpacked the generic way (out of line), then JUMP goes to the stores. */
UNPACK_GENERIC_HELPER(unpack_generic_then_stores, (void)0, JUMP())
UNPACK_GENERIC_HELPER(unpack_miss_then_stores, ADAPTIVE_MISS(), JUMP())

#define UNPACK_STORES(NAME, PRE, GENERIC)                                      \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        PRE;                                                                   \
        _PyStackRef *sp = ember_unpack_stores(frame, stack_pointer, THIS_INSTR); \
        if (LIKELY(sp != NULL)) {                                              \
            stack_pointer = sp;                                                \
            CONTINUE();                                                        \
        }                                                                      \
        MISS(GENERIC);                                                         \
    }

UNPACK_STORES(UNPACK_SEQUENCE__STORES, ADAPTIVE(UNPACK_SEQUENCE), unpack_generic_then_stores)
UNPACK_STORES(UNPACK_SEQUENCE_TUPLE__STORES, (void)0, unpack_miss_then_stores)
UNPACK_STORES(UNPACK_SEQUENCE_LIST__STORES, (void)0, unpack_miss_then_stores)

/* The same with the LOAD_FAST_BORROW of the sequence right before the
 * unpacking folded in (tier1/src/compile.rs places no code for it): the
 * sequence is read from that local, and pushed as the load would have
 * pushed it only for the generic way. */
#define UNPACK_LOAD_STORES(NAME)                                               \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        _PyStackRef *sp = ember_unpack_local_stores(frame, stack_pointer, THIS_INSTR); \
        if (LIKELY(sp != NULL)) {                                              \
            stack_pointer = sp;                                                \
            CONTINUE();                                                        \
        }                                                                      \
        stack_pointer[0] = PyStackRef_Borrow(GETLOCAL(THIS_INSTR[-1].op.arg)); \
        stack_pointer++;                                                       \
        MISS(unpack_miss_then_stores);                                         \
    }

UNPACK_LOAD_STORES(UNPACK_SEQUENCE_TUPLE__LOAD_STORES)
UNPACK_LOAD_STORES(UNPACK_SEQUENCE_LIST__LOAD_STORES)

/* ---- Formatting ------------------------------------------------------- */

/* (value -- result): str(), repr() or ascii() by oparg. */
EMBER_STENCIL(CONVERT_VALUE)
{
    _PyStackRef value = stack_pointer[-1];
    ESCAPE();
    PyObject *res = _PyEval_ConversionFuncs[OPARG](BORROW(value));
    stack_pointer--;
    SYNC_SP();
    CLOSE(value);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* (value -- res): an exact str is its own format. */
EMBER_STENCIL(FORMAT_SIMPLE)
{
    _PyStackRef value = stack_pointer[-1];
    PyObject *value_o = BORROW(value);
    if (PyUnicode_CheckExact(value_o)) {
        CONTINUE();
    }
    ESCAPE();
    PyObject *res = PyObject_Format(value_o, NULL);
    stack_pointer--;
    SYNC_SP();
    CLOSE(value);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* (value, fmt_spec -- res) */
EMBER_STENCIL(FORMAT_WITH_SPEC)
{
    _PyStackRef value = stack_pointer[-2], spec = stack_pointer[-1];
    ESCAPE();
    PyObject *res = PyObject_Format(BORROW(value), BORROW(spec));
    stack_pointer -= 2;
    SYNC_SP();
    CLOSE(value);
    CLOSE(spec);
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CONTINUE();
}

/* ---- Subscripts, slices, lengths -------------------------------------- */

/* (v, container, start, stop --) */
EMBER_STENCIL(STORE_SLICE)
{
    _PyStackRef *items = stack_pointer - 4;
    ESCAPE();
    int err = ember_store_slice(frame, items);
    stack_pointer = items;
    if (UNLIKELY(err < 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (container, sub --) */
EMBER_STENCIL(DELETE_SUBSCR)
{
    _PyStackRef container = stack_pointer[-2], sub = stack_pointer[-1];
    ESCAPE();
    int err = PyObject_DelItem(BORROW(container), BORROW(sub));
    stack_pointer -= 2;
    SYNC_SP();
    CLOSE(container);
    CLOSE(sub);
    if (UNLIKELY(err < 0)) {
        ERROR();
    }
    CONTINUE();
}

/* (obj -- obj, len) */
EMBER_STENCIL(GET_LEN)
{
    ESCAPE();
    Py_ssize_t len = PyObject_Length(BORROW(stack_pointer[-1]));
    if (UNLIKELY(len < 0)) {
        ERROR();
    }
    PyObject *len_o = PyLong_FromSsize_t(len);
    if (UNLIKELY(len_o == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(len_o);
    stack_pointer++;
    CONTINUE();
}

/* ---- TO_BOOL specialisations: (value -- res) --------------------------- */

/* The generic conversion, for a value the guard did not expect. */
MISS_HELPER(to_bool_miss)
{
    GENERIC_RESULT(ember_miss_to_bool(frame, stack_pointer, tstate, THIS_INSTR));
}

/* One type test (bool has no subclasses), where comparing with True and
 * False took two 10-byte addresses and twice the instructions. */
EMBER_STENCIL(TO_BOOL_BOOL)
{
    _PyStackRef value = stack_pointer[-1];
    if (LIKELY(Py_IS_TYPE(BORROW(value), &PyBool_Type))) {
        CONTINUE();
    }
    MISS(to_bool_miss);
}

EMBER_STENCIL(TO_BOOL_NONE)
{
    _PyStackRef value = stack_pointer[-1];
    if (LIKELY(PyStackRef_IsNone(value))) {
        stack_pointer[-1] = PyStackRef_False;
        CONTINUE();
    }
    MISS(to_bool_miss);
}

EMBER_STENCIL(TO_BOOL_INT)
{
    _PyStackRef value = stack_pointer[-1];
    PyObject *value_o = BORROW(value);
    if (LIKELY(PyLong_CheckExact(value_o))) {
        int truth = !_PyLong_IsZero((PyLongObject *)value_o);
        CLOSE_EXACT(value, _PyLong_ExactDealloc);
        stack_pointer[-1] = truth ? PyStackRef_True : PyStackRef_False;
        CONTINUE();
    }
    MISS(to_bool_miss);
}

EMBER_STENCIL(TO_BOOL_STR)
{
    _PyStackRef value = stack_pointer[-1];
    PyObject *value_o = BORROW(value);
    if (LIKELY(PyUnicode_CheckExact(value_o))) {
        int truth = PyUnicode_GET_LENGTH(value_o) != 0;
        CLOSE_EXACT(value, _PyUnicode_ExactDealloc);
        stack_pointer[-1] = truth ? PyStackRef_True : PyStackRef_False;
        CONTINUE();
    }
    MISS(to_bool_miss);
}

/* A list's last reference may free items with finalisers. */
EMBER_STENCIL(TO_BOOL_LIST)
{
    _PyStackRef value = stack_pointer[-1];
    PyObject *value_o = BORROW(value);
    if (LIKELY(PyList_CheckExact(value_o))) {
        int truth = PyList_GET_SIZE(value_o) != 0;
        stack_pointer--;
        CLOSE_ESCAPING(value);
        stack_pointer[0] = truth ? PyStackRef_True : PyStackRef_False;
        stack_pointer++;
        CONTINUE();
    }
    MISS(to_bool_miss);
}

/* OPERAND0: the type version (tp_version_tag) the interpreter cached for a
 * type without __bool__ or __len__. */
EMBER_STENCIL(TO_BOOL_ALWAYS_TRUE)
{
    _PyStackRef value = stack_pointer[-1];
    uint32_t version = (uint32_t)OPERAND0;
    if (LIKELY(Py_TYPE(BORROW(value))->tp_version_tag == version && version != 0)) {
        stack_pointer--;
        CLOSE_ESCAPING(value);
        stack_pointer[0] = PyStackRef_True;
        stack_pointer++;
        CONTINUE();
    }
    MISS(to_bool_miss);
}

/* ---- BINARY_OP specialisations: (lhs, rhs -- res) ---------------------- */

/* OPERAND0 (all of them): the generic binaryfunc for the oparg. */
#define BINOP_FINISH(res_o)                                                    \
    do {                                                                       \
        stack_pointer -= 2;                                                    \
        SYNC_SP();                                                             \
        CLOSE(lhs);                                                 \
        CLOSE(rhs);                                                 \
        if (UNLIKELY((res_o) == NULL)) {                                       \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res_o);                \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    } while (0)

MISS_HELPER(binop_miss)
{
    GENERIC_RESULT(ember_miss_binary_op(frame, stack_pointer, tstate, THIS_INSTR, (binaryfunc)OPERAND0));
}
#define BINOP_GENERIC() MISS(binop_miss)

static inline __attribute__((always_inline)) int
ember_compact_index(PyObject *sub, Py_ssize_t size, Py_ssize_t *index)
{
    if (!PyLong_CheckExact(sub) || !_PyLong_IsNonNegativeCompact((PyLongObject *)sub)) {
        return 0;
    }
    *index = (Py_ssize_t)_PyLong_CompactValue((PyLongObject *)sub);
    return *index < size;
}

EMBER_STENCIL(BINARY_OP_SUBSCR_TUPLE_INT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    /* The guards spelt out as BINARY_OP_SUBSCR_LIST_INT's: through
     * ember_compact_index, clang laid the generic path out before the
     * item's. */
    if (LIKELY(PyTuple_CheckExact(l) && PyLong_CheckExact(r) && _PyLong_IsNonNegativeCompact((PyLongObject *)r)
               && (Py_ssize_t)_PyLong_CompactValue((PyLongObject *)r) < PyTuple_GET_SIZE(l))) {
        SUBSCR_ITEM_RESULT(PyTuple_GET_ITEM(l, _PyLong_CompactValue((PyLongObject *)r)), lhs, rhs);
    }
    BINOP_GENERIC();
}

EMBER_STENCIL(BINARY_OP_SUBSCR_STR_INT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs);
    Py_ssize_t index;
    if (LIKELY(PyUnicode_CheckExact(l) && ember_compact_index(BORROW(rhs), PyUnicode_GET_LENGTH(l), &index))) {
        Py_UCS4 c = PyUnicode_READ_CHAR(l, index);
        if (LIKELY(c < 128)) {
            /* The cached one-character strings are immortal. */
            PyObject *res = (PyObject *)&_Py_SINGLETON(strings).ascii[c];
            stack_pointer -= 2;
            CLOSE(lhs);
            CLOSE(rhs);
            stack_pointer[0] = PyStackRef_FromPyObjectBorrow(res);
            stack_pointer++;
            CONTINUE();
        }
    }
    BINOP_GENERIC();
}

/* The KeyError of a missing key is the one dict's __getitem__ raises. */
EMBER_STENCIL(BINARY_OP_SUBSCR_DICT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs);
    if (LIKELY(PyDict_CheckExact(l))) {
        PyObject *res;
        ESCAPE();
        int found = PyDict_GetItemRef(l, BORROW(rhs), &res);
        if (found == 0) {
            _PyErr_SetKeyError(BORROW(rhs));
        }
        BINOP_FINISH(res);
    }
    BINOP_GENERIC();
}

EMBER_STENCIL(BINARY_OP_SUBSCR_LIST_SLICE)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyList_CheckExact(l) && PySlice_Check(r))) {
        ESCAPE();
        PyObject *res = _PyList_SliceSubscript(l, r);
        BINOP_FINISH(res);
    }
    BINOP_GENERIC();
}

EMBER_STENCIL(BINARY_OP_ADD_UNICODE)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyUnicode_CheckExact(l) && PyUnicode_CheckExact(r))) {
        ESCAPE();
        PyObject *res = PyUnicode_Concat(l, r);
        BINOP_FINISH(res);
    }
    BINOP_GENERIC();
}

/* `s = s + t` / `s += t` on strs, the STORE_FAST to s folded in: the local
 * may be grown in place. OPERAND1: the local's index; JUMP: the instruction
 * after the STORE_FAST. Otherwise the generic operation, and the
 * STORE_FAST runs. */
EMBER_STENCIL(BINARY_OP_INPLACE_ADD_UNICODE)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    _PyStackRef *target = &GETLOCAL(OPERAND1);
    if (LIKELY(PyUnicode_CheckExact(l) && PyUnicode_CheckExact(r) && BORROW(*target) == l)) {
        stack_pointer -= 2;
        ESCAPE();
        PyObject *res = ember_inplace_add_unicode(target, lhs, rhs);
        if (UNLIKELY(res == NULL)) {
            ERROR();
        }
        JUMP();
    }
    BINOP_GENERIC();
}

/* ---- Pattern matching (with GET_LEN above) ----------------------------- */

/* (subject -- subject, res) */
#define MATCH_FLAG(NAME, FLAG)                                                 \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        int match = (Py_TYPE(BORROW(stack_pointer[-1]))->tp_flags & (FLAG)) != 0; \
        stack_pointer[0] = match ? PyStackRef_True : PyStackRef_False;         \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    }

MATCH_FLAG(MATCH_SEQUENCE, Py_TPFLAGS_SEQUENCE)
MATCH_FLAG(MATCH_MAPPING, Py_TPFLAGS_MAPPING)

/* (subject, keys -- subject, keys, values_or_none) */
EMBER_STENCIL(MATCH_KEYS)
{
    ESCAPE();
    PyObject *values = _PyEval_MatchKeys(tstate, BORROW(stack_pointer[-2]), BORROW(stack_pointer[-1]));
    if (UNLIKELY(values == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(values);
    stack_pointer++;
    CONTINUE();
}

/* (subject, type, names -- attrs): a tuple of the attributes on a match,
 * None when the class pattern does not match. */
EMBER_STENCIL(MATCH_CLASS)
{
    _PyStackRef subject = stack_pointer[-3], type = stack_pointer[-2], names = stack_pointer[-1];
    ESCAPE();
    PyObject *attrs = _PyEval_MatchClass(tstate, BORROW(subject), BORROW(type), OPARG, BORROW(names));
    stack_pointer -= 3;
    SYNC_SP();
    CLOSE(subject);
    CLOSE(type);
    CLOSE(names);
    if (attrs != NULL) {
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(attrs);
    }
    else {
        if (UNLIKELY(_PyErr_Occurred(tstate))) {
            ERROR();
        }
        stack_pointer[0] = PyStackRef_None;
    }
    stack_pointer++;
    CONTINUE();
}
