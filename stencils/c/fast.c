/* The specialised forms the interpreter quickens to: attribute and global
 * loads, attribute stores, iteration over ranges, lists and tuples,
 * comparisons of floats and strs, membership in sets and dicts, stores into
 * lists and dicts, and calls of built-in functions and method descriptors.
 *
 * Tier 1 compiles a snapshot of the quickened bytecode: the values the
 * interpreter cached (type versions, dict keys versions, offsets, indices,
 * descriptors) are baked in as operands (tier1/src/operands.rs,
 * fast_operands), and each stencil checks everything they depend on, as the
 * interpreter's own guards do. A failed guard does the generic
 * instruction's work, as the interpreter would after deoptimising (compiled
 * code never re-specialises, so a guard that starts failing may keep
 * failing: the generic path must be complete). The attribute stencils of
 * instances first try the interpreter's current specialisation from the
 * live cache (see live_u32). The exception is LOAD_GLOBAL_*, whose failed
 * guard hands the frame to the interpreter (see there).
 *
 * Where the specialised instruction's order of releasing references differs
 * from the generic one (STORE_ATTR_*: the owner before the old value), the
 * specialised order is kept, so that finalisers run in CPython's order. */
#include "ember_stencil.h"
#include "pycore_dict.h"
#include "pycore_floatobject.h"
#include "pycore_moduleobject.h"
#include "pycore_range.h"
#include "pycore_setobject.h"
#include "pycore_unicodeobject.h"

/* Calls base[0], of the kind below, with the call's arguments as an array
 * and closes every input. */
enum { CFAST_BUILTIN, CFAST_DESCR, CFAST_BUILTIN_KW, CFAST_DESCR_KW, CFAST_CLASS };
PyObject *ember_call_cfast(_PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int kind);

/* ---- LOAD_ATTR ------------------------------------------------------- */

/* The generic LOAD_ATTR (the name comes from the code object), after a
 * miss: the specialised loads' rare path. */
MISS_HELPER(load_attr_miss)
{
    GENERIC_RESULT(ember_miss_load_attr(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}
#define LOAD_ATTR_GENERIC() MISS(load_attr_miss)

/* Whether a load pushes a NULL after its result: the oparg's low bit,
 * except in loads_with_null.inc. */
#define EMBER_PUSHES_NULL (OPARG & 1)

/* (owner -- attr, NULL if oparg & 1): a new reference to attr_o replaces
 * the owner, which is then closed (its finaliser may run). */
#define LOAD_ATTR_RESULT(attr_o)                                               \
    do {                                                                       \
        _PyStackRef owner_ = stack_pointer[-1];                                \
        /* The NULL without a branch when EMBER_PUSHES_NULL is the oparg's \
         * (a branch clang would give a second exit, out of line): written \
         * at [-1] first when there is none, where the attribute goes. */  \
        /* The reference is made first: with no load between the stores, \
         * clang drops the NULL's when both go to [-1]. */                 \
        _PyStackRef attr_ = ember_new_ref(attr_o);                             \
        intptr_t null_ = EMBER_PUSHES_NULL;                                    \
        stack_pointer[null_ - 1] = PyStackRef_NULL;                            \
        stack_pointer[-1] = attr_;                                             \
        stack_pointer += null_;                                                \
        CLOSE_ESCAPING(owner_);                                                \
        CONTINUE();                                                            \
    } while (0)

/* (owner -- method, owner): the owner stays, as self. */
#define LOAD_ATTR_METHOD_RESULT(descr_o)                                       \
    do {                                                                       \
        stack_pointer[0] = stack_pointer[-1];                                  \
        stack_pointer[-1] = PyStackRef_FromPyObjectNew(descr_o);               \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    } while (0)

static inline __attribute__((always_inline)) uint32_t
lo32(uintptr_t v)
{
    return (uint32_t)v;
}

static inline __attribute__((always_inline)) uint32_t
hi32(uintptr_t v)
{
    return (uint32_t)(v >> 32);
}

/* The owner's inline values are in use (no materialised __dict__ took
 * them over). Only for types with Py_TPFLAGS_INLINE_VALUES, which the type
 * version guarantees. */
static inline __attribute__((always_inline)) int
values_valid(PyObject *owner)
{
    return _PyObject_InlineValues(owner)->valid;
}

/* The instance's shared keys still have the version cached: no instance of
 * the type has an attribute shadowing the class's. */
static inline __attribute__((always_inline)) int
cached_keys_version_is(PyTypeObject *tp, uint32_t version)
{
    return ((PyHeapTypeObject *)tp)->ht_cached_keys->dk_version == version;
}

/* The live inline cache. Compiled code holds a snapshot of the cached
 * values; at a polymorphic site the interpreter later specialises the
 * instruction again for another type (when a frame was handed to it), and
 * the snapshot then misses where the interpreter would hit. On a miss the
 * stencils below try the instruction's current specialisation, read from
 * the bytecode as the interpreter reads it, before taking the generic path
 * (which counts a miss). Entry k of the cache is THIS_INSTR[1 + k]. */
static inline __attribute__((always_inline)) uint32_t
live_u32(const _Py_CODEUNIT *instr, int entry)
{
    return (uint32_t)instr[1 + entry].cache | ((uint32_t)instr[2 + entry].cache << 16);
}

static inline __attribute__((always_inline)) uint64_t
live_u64(const _Py_CODEUNIT *instr, int entry)
{
    return (uint64_t)live_u32(instr, entry) | ((uint64_t)live_u32(instr, entry + 2) << 32);
}

/* The live cache's type version (entry 1), if the instruction is still
 * specialised as `op`, and 0 otherwise (no type has version 0). */
static inline __attribute__((always_inline)) uint32_t
live_type_version(const _Py_CODEUNIT *instr, int op)
{
    return instr->op.code == op ? live_u32(instr, 1) : 0;
}

/* A polymorphic site's own cache (SITE): the type versions it met besides
 * the compiled one, each with what the interpreter's specialisation for
 * that type held, most recent first. The interpreter specialises a site
 * for one type at a time (the live cache), so a site cycling over a few
 * types would keep missing and handing frames over to be specialised
 * again; an entry is copied from the live cache when a miss finds the
 * type there, and once each type has been seen the site stops missing. A
 * type version names one state of one type and is never given to another,
 * so an entry holds for as long as its version matches (as the compiled
 * operands do). Empty entries have version 0, which no type has. */
#define EMBER_PIC_ENTRIES 4

typedef struct {
    uint32_t version;
    uint32_t offset;
} ember_attr_entry;
typedef struct {
    ember_attr_entry e[EMBER_PIC_ENTRIES];
} ember_attr_pic;
_Static_assert(sizeof(ember_attr_pic) == 4 * 8, "site_cache_words(LOAD_ATTR_INSTANCE_VALUE, STORE_ATTR_INSTANCE_VALUE)");

typedef struct {
    uint32_t version;
    uint32_t keys_version;
    PyObject *descr;
} ember_method_entry;
typedef struct {
    ember_method_entry e[EMBER_PIC_ENTRIES];
} ember_method_pic;
_Static_assert(sizeof(ember_method_pic) == 8 * 8, "site_cache_words(LOAD_ATTR_METHOD_WITH_VALUES)");

/* The entry for `version` (not 0), or NULL. */
#define PIC_FIND(PIC, VERSION)                                                   \
    ({                                                                           \
        __typeof__(&(PIC)->e[0]) found_ = NULL;                                  \
        for (int k_ = 0; k_ < EMBER_PIC_ENTRIES; k_++) {                         \
            if ((PIC)->e[k_].version == (VERSION)) {                             \
                found_ = &(PIC)->e[k_];                                          \
                break;                                                           \
            }                                                                    \
        }                                                                        \
        found_;                                                                  \
    })

/* Makes ENTRY the first entry, dropping the last. */
#define PIC_ADD(PIC, ENTRY)                                                      \
    do {                                                                         \
        for (int k_ = EMBER_PIC_ENTRIES - 1; k_ > 0; k_--) {                     \
            (PIC)->e[k_] = (PIC)->e[k_ - 1];                                     \
        }                                                                        \
        (PIC)->e[0] = (ENTRY);                                                   \
    } while (0)

/* The byte offset of an instance value for a type with `version` (not the
 * compiled one) at an instance-value site specialised as `op`: from the
 * site's cache, else from the live cache (then entered in the site's);
 * 0, where no value is, when neither has it. */
static inline __attribute__((always_inline)) uintptr_t
attr_pic_offset(void *site, const _Py_CODEUNIT *instr, unsigned int version, int op)
{
    if (version == 0) {
        return 0;
    }
    ember_attr_pic *pic = (ember_attr_pic *)site;
    const ember_attr_entry *e = PIC_FIND(pic, version);
    if (e == NULL) {
        /* Live cache: type version at 1, offset at 3. */
        if (version != live_type_version(instr, op)) {
            return 0;
        }
        ember_attr_entry entry = {version, instr[4].cache};
        PIC_ADD(pic, entry);
        e = &pic->e[0];
    }
    return e->offset;
}

/* A method for a call, on an instance with inline values. OPERAND0: type
 * version, shared keys version in the high half; OPERAND1: the function.
 * SITE: other types' (ember_method_pic). */
EMBER_STENCIL(LOAD_ATTR_METHOD_WITH_VALUES)
{
    PyObject *owner_o = BORROW(stack_pointer[-1]);
    PyTypeObject *tp = Py_TYPE(owner_o);
    uintptr_t versions = OPERAND0;
    PyObject *descr = (PyObject *)OPERAND1;
    if (UNLIKELY(tp->tp_version_tag != lo32(versions))) {
        unsigned int version = tp->tp_version_tag;
        if (version == 0) {
            LOAD_ATTR_GENERIC();
        }
        ember_method_pic *pic = (ember_method_pic *)SITE;
        const ember_method_entry *e = PIC_FIND(pic, version);
        if (e == NULL) {
            /* Live cache: type version at 1, keys version at 3, descriptor at 5. */
            const _Py_CODEUNIT *instr = THIS_INSTR;
            ember_method_entry entry = {version, 0, NULL};
            if (version == live_type_version(instr, EMBER_OP_LOAD_ATTR_METHOD_WITH_VALUES)) {
                entry.keys_version = live_u32(instr, 3);
                entry.descr = (PyObject *)(uintptr_t)live_u64(instr, 5);
            }
            else {
                /* A lookup in the class's MRO (whose dicts could hold keys
                 * with Python __eq__), as where the interpreter specialises. */
                ESCAPE();
                if (!ember_method_with_values_entry(frame, owner_o, OPARG, version, &entry.keys_version,
                                                    &entry.descr)) {
                    LOAD_ATTR_GENERIC();
                }
            }
            PIC_ADD(pic, entry);
            e = &pic->e[0];
        }
        versions = (uintptr_t)version | ((uintptr_t)e->keys_version << 32);
        descr = e->descr;
    }
    if (LIKELY(values_valid(owner_o) && cached_keys_version_is(tp, hi32(versions)))) {
        LOAD_ATTR_METHOD_RESULT(descr);
    }
    LOAD_ATTR_GENERIC();
}

/* A method for a call, on an instance without a __dict__. OPERAND0: type
 * version; OPERAND1: the function. */
EMBER_STENCIL(LOAD_ATTR_METHOD_NO_DICT)
{
    PyObject *owner_o = BORROW(stack_pointer[-1]);
    if (LIKELY(EQ_OPERAND0_U32(Py_TYPE(owner_o)->tp_version_tag))) {
        LOAD_ATTR_METHOD_RESULT((PyObject *)OPERAND1);
    }
    LOAD_ATTR_GENERIC();
}

/* A method for a call, on an instance whose __dict__ is not created yet.
 * OPERAND0: type version, the dict's offset from MANAGED_DICT_OFFSET in the
 * high half; OPERAND1: the function. */
EMBER_STENCIL(LOAD_ATTR_METHOD_LAZY_DICT)
{
    PyObject *owner_o = BORROW(stack_pointer[-1]);
    uintptr_t ops = OPERAND0;
    if (LIKELY(Py_TYPE(owner_o)->tp_version_tag == lo32(ops)
               && *(PyObject **)((char *)owner_o + MANAGED_DICT_OFFSET + hi32(ops)) == NULL)) {
        LOAD_ATTR_METHOD_RESULT((PyObject *)OPERAND1);
    }
    LOAD_ATTR_GENERIC();
}

/* A class attribute that is not a descriptor, on an instance with inline
 * values. OPERAND0: type version, shared keys version in the high half;
 * OPERAND1: the attribute. */
EMBER_STENCIL(LOAD_ATTR_NONDESCRIPTOR_WITH_VALUES)
{
    PyObject *owner_o = BORROW(stack_pointer[-1]);
    PyTypeObject *tp = Py_TYPE(owner_o);
    uintptr_t versions = OPERAND0;
    if (LIKELY(tp->tp_version_tag == lo32(versions) && values_valid(owner_o)
               && cached_keys_version_is(tp, hi32(versions)))) {
        LOAD_ATTR_RESULT((PyObject *)OPERAND1);
    }
    LOAD_ATTR_GENERIC();
}

/* The same on an instance without a __dict__. OPERAND0: type version;
 * OPERAND1: the attribute. */
EMBER_STENCIL(LOAD_ATTR_NONDESCRIPTOR_NO_DICT)
{
    PyObject *owner_o = BORROW(stack_pointer[-1]);
    if (LIKELY(EQ_OPERAND0_U32(Py_TYPE(owner_o)->tp_version_tag))) {
        LOAD_ATTR_RESULT((PyObject *)OPERAND1);
    }
    LOAD_ATTR_GENERIC();
}

/* The entry at `hint` in a materialised __dict__ with a combined table,
 * if it holds `name` (NULL otherwise). */
static inline __attribute__((always_inline)) PyDictUnicodeEntry *
hinted_entry(PyObject *owner, uint32_t hint, PyObject *name)
{
    PyDictObject *dict = _PyObject_GetManagedDict(owner);
    if (dict == NULL) {
        return NULL;
    }
    PyDictKeysObject *keys = dict->ma_keys;
    if (hint >= (size_t)keys->dk_nentries || keys->dk_kind != DICT_KEYS_UNICODE) {
        return NULL;
    }
    PyDictUnicodeEntry *ep = DK_UNICODE_ENTRIES(keys) + hint;
    return ep->me_key == name ? ep : NULL;
}

/* ---- LOAD_GLOBAL ----------------------------------------------------- */

/* A failed guard: the globals' or builtins' keys changed since the
 * specialisation (a global assigned at a script's top level between calls
 * does that), or the code runs with other globals. As in the interpreter,
 * a miss: the generic lookup, counted by the adaptive counter, whose
 * trigger hands the frame over for the interpreter to specialise the
 * instruction again (ADAPTIVE_MISS). Handing over at every miss, as before,
 * left the rest of the frame to the interpreter at every call of a
 * function called from such a loop. */
MISS_HELPER(load_global_miss)
{
    GENERIC_RESULT(ember_miss_load_global(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}
#define LOAD_GLOBAL_MISS() MISS(load_global_miss)

/* The value at entry `index` of a dict whose keys have version `version`
 * (NULL: not that dict layout, or the entry is empty). */
static inline __attribute__((always_inline)) PyObject *
versioned_entry(PyObject *dict, uint32_t version, uintptr_t index)
{
    if (!PyDict_CheckExact(dict)) {
        return NULL;
    }
    PyDictKeysObject *keys = ((PyDictObject *)dict)->ma_keys;
    if (keys->dk_version != version) {
        return NULL;
    }
    return DK_UNICODE_ENTRIES(keys)[index].me_value;
}

/* The same with OPERAND0 as the version. */
static inline __attribute__((always_inline)) PyObject *
versioned_entry_operand0(PyObject *dict, uintptr_t index)
{
    if (!PyDict_CheckExact(dict)) {
        return NULL;
    }
    PyDictKeysObject *keys = ((PyDictObject *)dict)->ma_keys;
    if (!EQ_OPERAND0_U32(keys->dk_version)) {
        return NULL;
    }
    return DK_UNICODE_ENTRIES(keys)[index].me_value;
}

#define LOAD_GLOBAL_RESULT(res_o)                                              \
    do {                                                                       \
        /* As LOAD_ATTR_RESULT: the NULL without a branch. */             \
        _PyStackRef *top_ = stack_pointer + EMBER_PUSHES_NULL;                 \
        top_[0] = PyStackRef_NULL;                                             \
        stack_pointer[0] = ember_new_ref(res_o);                               \
        stack_pointer = top_ + 1;                                              \
        CONTINUE();                                                            \
    } while (0)

/* ---- Loads that push a NULL for a call when oparg & 1 --------------- */

/* Each stencil of loads_with_null.inc twice: NAME, for oparg & 1 == 0, and
 * NAME__NULL, for 1 (tier 1 picks one by the oparg), so that neither tests
 * the oparg's low bit: a test clang would turn into a second exit, laid out
 * among the rare paths. */
#define EMBER_STENCIL_EXPANDED(NAME) EMBER_STENCIL(NAME)
#undef EMBER_PUSHES_NULL
#define EMBER_PUSHES_NULL 0
#define WITH_NULL(NAME) EMBER_STENCIL_EXPANDED(NAME)
#include "loads_with_null.inc"
#undef WITH_NULL
#undef EMBER_PUSHES_NULL
#define EMBER_PUSHES_NULL 1
#define WITH_NULL(NAME) EMBER_STENCIL_EXPANDED(NAME##__NULL)
#include "loads_with_null.inc"
#undef WITH_NULL
#undef EMBER_PUSHES_NULL
#define EMBER_PUSHES_NULL (OPARG & 1)

/* ---- STORE_ATTR: (value, owner --) ----------------------------------- */

MISS_HELPER(store_attr_miss)
{
    GENERIC_RESULT(ember_miss_store_attr(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}
#define STORE_ATTR_GENERIC() MISS(store_attr_miss)

/* The value stored; then, as the interpreter does, the owner closed before
 * the old value. */
#define STORE_ATTR_FINISH(owner, old)                                          \
    do {                                                                       \
        stack_pointer -= 2;                                                    \
        CLOSE_ESCAPING(owner);                                                 \
        XDECREF_ESCAPING(old);                                                 \
        CONTINUE();                                                            \
    } while (0)

/* OPERAND0: type version; OPERAND1: byte offset of the value in the object.
 * SITE: other types' (ember_attr_pic). */
/* NEW_LIKELY: whether a new attribute is the common case. Outside an
 * __init__, a new attribute (once per object) is rarer than a replaced one
 * (in loops); in one (the __NEW variant, chosen by tier1/src/compile.rs),
 * where objects made in a loop get their attributes, it is the other way. */
#define STORE_ATTR_INSTANCE_VALUE_BODY(NEW_LIKELY)                               \
    do {                                                                         \
        _PyStackRef value = stack_pointer[-2], owner = stack_pointer[-1];        \
        PyObject *owner_o = BORROW(owner);                                       \
        unsigned int version = Py_TYPE(owner_o)->tp_version_tag;                 \
        uintptr_t offset = OPERAND1_U32;                                         \
        if (UNLIKELY(!EQ_OPERAND0_U32(version))) {                               \
            offset = attr_pic_offset(SITE, THIS_INSTR, version, EMBER_OP_STORE_ATTR_INSTANCE_VALUE); \
            if (offset == 0) {                                                   \
                STORE_ATTR_GENERIC();                                            \
            }                                                                    \
        }                                                                        \
        if (LIKELY(_PyObject_GetManagedDict(owner_o) == NULL && values_valid(owner_o))) { \
            PyObject **value_ptr = (PyObject **)((char *)owner_o + offset);      \
            PyObject *old = *value_ptr;                                          \
            *value_ptr = PyStackRef_AsPyObjectSteal(value);                      \
            if (__builtin_expect(old == NULL, NEW_LIKELY)) {                     \
                PyDictValues *values = _PyObject_InlineValues(owner_o);          \
                _PyDictValues_AddToInsertionOrder(values, value_ptr - values->values); \
            }                                                                    \
            STORE_ATTR_FINISH(owner, old);                                       \
        }                                                                        \
        STORE_ATTR_GENERIC();                                                    \
    } while (0)

EMBER_STENCIL(STORE_ATTR_INSTANCE_VALUE)
{
    STORE_ATTR_INSTANCE_VALUE_BODY(0);
}

EMBER_STENCIL(STORE_ATTR_INSTANCE_VALUE__NEW)
{
    STORE_ATTR_INSTANCE_VALUE_BODY(1);
}

/* OPERAND0: type version; OPERAND1: byte offset of the slot. */
EMBER_STENCIL(STORE_ATTR_SLOT)
{
    _PyStackRef value = stack_pointer[-2], owner = stack_pointer[-1];
    PyObject *owner_o = BORROW(owner);
    if (LIKELY(EQ_OPERAND0_U32(Py_TYPE(owner_o)->tp_version_tag))) {
        PyObject **slot = (PyObject **)((char *)owner_o + OPERAND1_U32);
        PyObject *old = *slot;
        *slot = PyStackRef_AsPyObjectSteal(value);
        STORE_ATTR_FINISH(owner, old);
    }
    STORE_ATTR_GENERIC();
}

/* Replacing an attribute in the instance's materialised __dict__ (dict
 * watchers told first). OPERAND0: type version, the entry's index (hint)
 * in the high half; OPERAND1: the name. */
EMBER_STENCIL(STORE_ATTR_WITH_HINT)
{
    _PyStackRef value = stack_pointer[-2], owner = stack_pointer[-1];
    PyObject *owner_o = BORROW(owner);
    uintptr_t ops = OPERAND0;
    if (LIKELY(Py_TYPE(owner_o)->tp_version_tag == lo32(ops))) {
        PyObject *name = (PyObject *)OPERAND1;
        PyDictUnicodeEntry *ep = hinted_entry(owner_o, hi32(ops), name);
        if (LIKELY(ep != NULL && ep->me_value != NULL)) {
            PyDictObject *dict = _PyObject_GetManagedDict(owner_o);
            if (UNLIKELY(dict->_ma_watcher_tag & DICT_WATCHER_MASK)) {
                ESCAPE();
                _PyDict_NotifyEvent(tstate->interp, PyDict_EVENT_MODIFIED, dict, name, BORROW(value));
            }
            PyObject *old = ep->me_value;
            ep->me_value = PyStackRef_AsPyObjectSteal(value);
            STORE_ATTR_FINISH(owner, old);
        }
    }
    STORE_ATTR_GENERIC();
}

/* ---- FOR_ITER: (iter -- iter, next) ---------------------------------- */

/* The generic step: the iterator's tp_iternext, which also does the
 * exhausted iterator's bookkeeping (releasing its sequence). Exhausted:
 * JUMP (past the END_FOR, to the POP_ITER). */
#define FOR_ITER_STEP(it)                                                      \
    do {                                                                       \
        ESCAPE();                                                              \
        iternextfunc iternext_ = Py_TYPE(it)->tp_iternext;                     \
        if (UNLIKELY(iternext_ == NULL)) {                                     \
            /* A generator expression's `.0` replaced through f_locals. */    \
            _PyErr_Format(tstate, PyExc_TypeError, "'%.100s' object is not an iterator", \
                          Py_TYPE(it)->tp_name);                               \
            ERROR();                                                           \
        }                                                                      \
        PyObject *next_ = iternext_(it);                                       \
        if (next_ == NULL) {                                                   \
            if (_PyErr_Occurred(tstate)) {                                     \
                if (!_PyErr_ExceptionMatches(tstate, PyExc_StopIteration)) {   \
                    ERROR();                                                   \
                }                                                              \
                _PyErr_Clear(tstate);                                          \
            }                                                                  \
            JUMP();                                                            \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(next_);                \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    } while (0)

/* The generic step where the loop ends (no miss counted). */
MISS_HELPER(for_iter_step)
{
    PyObject *it = BORROW(stack_pointer[-1]);
    FOR_ITER_STEP(it);
}

/* A specialised FOR_ITER whose guard failed: a miss, then the generic step. */
MISS_HELPER(for_iter_miss)
{
    PyObject *it = BORROW(stack_pointer[-1]);
    ADAPTIVE_MISS();
    FOR_ITER_STEP(it);
}

EMBER_STENCIL(FOR_ITER_RANGE)
{
    PyObject *it = BORROW(stack_pointer[-1]);
    if (LIKELY(Py_TYPE(it) == &PyRangeIter_Type)) {
        _PyRangeIterObject *r = (_PyRangeIterObject *)it;
        if (r->len <= 0) {
            JUMP();
        }
        long value = r->start;
        r->start = value + r->step;
        r->len--;
        PyObject *res;
        if ((unsigned long)(value + _PY_NSMALLNEGINTS) < (unsigned long)(_PY_NSMALLNEGINTS + _PY_NSMALLPOSINTS)) {
            /* Small ints are immortal. */
            res = (PyObject *)&_PyLong_SMALL_INTS[_PY_NSMALLNEGINTS + value];
        }
        else {
            ESCAPE();
            res = PyLong_FromLong(value);
            if (UNLIKELY(res == NULL)) {
                ERROR();
            }
        }
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
        stack_pointer++;
        CONTINUE();
    }
    MISS(for_iter_miss);
}

EMBER_STENCIL(FOR_ITER_LIST)
{
    PyObject *it = BORROW(stack_pointer[-1]);
    if (LIKELY(Py_TYPE(it) == &PyListIter_Type)) {
        _PyListIterObject *li = (_PyListIterObject *)it;
        PyListObject *seq = li->it_seq;
        if (LIKELY(seq != NULL && (size_t)li->it_index < (size_t)PyList_GET_SIZE(seq))) {
            stack_pointer[0] = ember_new_ref(PyList_GET_ITEM(seq, li->it_index));
            li->it_index++;
            stack_pointer++;
            CONTINUE();
        }
        /* Exhausted: the loop ends, as in the interpreter's FOR_ITER_LIST,
         * without counting a miss (the list iterator's tp_iternext
         * releases the sequence). */
        MISS(for_iter_step);
    }
    MISS(for_iter_miss);
}

EMBER_STENCIL(FOR_ITER_TUPLE)
{
    PyObject *it = BORROW(stack_pointer[-1]);
    if (LIKELY(Py_TYPE(it) == &PyTupleIter_Type)) {
        _PyTupleIterObject *ti = (_PyTupleIterObject *)it;
        PyTupleObject *seq = ti->it_seq;
        if (LIKELY(seq != NULL && (size_t)ti->it_index < (size_t)PyTuple_GET_SIZE(seq))) {
            stack_pointer[0] = ember_new_ref(PyTuple_GET_ITEM(seq, ti->it_index));
            ti->it_index++;
            stack_pointer++;
            CONTINUE();
        }
        /* Exhausted: the loop ends, as in the interpreter's FOR_ITER_TUPLE,
         * without counting a miss (the tuple iterator's tp_iternext
         * releases the sequence). */
        MISS(for_iter_step);
    }
    MISS(for_iter_miss);
}

/* ---- COMPARE_OP: (lhs, rhs -- res) ----------------------------------- */

/* The generic comparison, honouring oparg & 16 (convert to bool), after
 * a miss. */
MISS_HELPER(compare_miss)
{
    GENERIC_RESULT(ember_miss_compare_op(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}
#define COMPARE_GENERIC() MISS(compare_miss)

/* The low four bits of the oparg say which outcomes make it true, as
 * COMPARISON_BIT encodes them (1 unordered, 2 less, 4 greater, 8 equal).
 * Floats and strs have no finalisers: closing them cannot escape. */
EMBER_STENCIL(COMPARE_OP_FLOAT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyFloat_CheckExact(l) && PyFloat_CheckExact(r))) {
        double a = PyFloat_AS_DOUBLE(l), b = PyFloat_AS_DOUBLE(r);
        int outcome = COMPARISON_BIT(a, b);
        stack_pointer -= 2;
        CLOSE_EXACT(lhs, _PyFloat_ExactDealloc);
        CLOSE_EXACT(rhs, _PyFloat_ExactDealloc);
        stack_pointer[0] = (outcome & OPARG) ? PyStackRef_True : PyStackRef_False;
        stack_pointer++;
        CONTINUE();
    }
    COMPARE_GENERIC();
}

/* == and != only. */
EMBER_STENCIL(COMPARE_OP_STR)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *l = BORROW(lhs), *r = BORROW(rhs);
    if (LIKELY(PyUnicode_CheckExact(l) && PyUnicode_CheckExact(r))) {
        int eq = _PyUnicode_Equal(l, r);
        stack_pointer -= 2;
        CLOSE_EXACT(lhs, _PyUnicode_ExactDealloc);
        CLOSE_EXACT(rhs, _PyUnicode_ExactDealloc);
        int outcome = eq ? COMPARISON_EQUALS : COMPARISON_NOT_EQUALS;
        stack_pointer[0] = (outcome & OPARG) ? PyStackRef_True : PyStackRef_False;
        stack_pointer++;
        CONTINUE();
    }
    COMPARE_GENERIC();
}

/* ---- CONTAINS_OP: (lhs, rhs -- b) ------------------------------------ */

#define CONTAINS_WITH(CALL)                                                    \
    do {                                                                       \
        ESCAPE();                                                              \
        int res_ = (CALL);                                                     \
        stack_pointer -= 2;                                                    \
        SYNC_SP();                                                             \
        CLOSE(lhs);                                                 \
        CLOSE(rhs);                                                 \
        if (UNLIKELY(res_ < 0)) {                                              \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = (res_ ^ OPARG) ? PyStackRef_True : PyStackRef_False; \
        stack_pointer++;                                                       \
        CONTINUE();                                                            \
    } while (0)

MISS_HELPER(contains_miss)
{
    GENERIC_RESULT(ember_miss_contains_op(frame, stack_pointer, tstate, THIS_INSTR, OPARG));
}

EMBER_STENCIL(CONTAINS_OP_SET)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *r = BORROW(rhs);
    if (LIKELY(PyAnySet_CheckExact(r))) {
        CONTAINS_WITH(_PySet_Contains((PySetObject *)r, BORROW(lhs)));
    }
    MISS(contains_miss);
}

EMBER_STENCIL(CONTAINS_OP_DICT)
{
    _PyStackRef lhs = stack_pointer[-2], rhs = stack_pointer[-1];
    PyObject *r = BORROW(rhs);
    if (LIKELY(PyDict_CheckExact(r))) {
        CONTAINS_WITH(PyDict_Contains(r, BORROW(lhs)));
    }
    MISS(contains_miss);
}

/* ---- STORE_SUBSCR: (value, container, sub --) ------------------------ */

MISS_HELPER(store_subscr_miss)
{
    GENERIC_RESULT(ember_miss_store_subscr(frame, stack_pointer, tstate, THIS_INSTR));
}
#define STORE_SUBSCR_GENERIC() MISS(store_subscr_miss)

/* As the interpreter does: the list closed before the old item. */
EMBER_STENCIL(STORE_SUBSCR_LIST_INT)
{
    _PyStackRef value = stack_pointer[-3], list = stack_pointer[-2], sub = stack_pointer[-1];
    PyObject *list_o = BORROW(list), *sub_o = BORROW(sub);
    if (LIKELY(PyList_CheckExact(list_o) && PyLong_CheckExact(sub_o)
               && _PyLong_IsNonNegativeCompact((PyLongObject *)sub_o))) {
        Py_ssize_t index = (Py_ssize_t)_PyLong_CompactValue((PyLongObject *)sub_o);
        if (LIKELY(index < PyList_GET_SIZE(list_o))) {
            PyObject *old = PyList_GET_ITEM(list_o, index);
            PyList_SET_ITEM(list_o, index, PyStackRef_AsPyObjectSteal(value));
            stack_pointer -= 3;
            CLOSE_EXACT(sub, _PyLong_ExactDealloc);
            CLOSE_ESCAPING(list);
            XDECREF_ESCAPING(old);
            CONTINUE();
        }
    }
    STORE_SUBSCR_GENERIC();
}

EMBER_STENCIL(STORE_SUBSCR_DICT)
{
    _PyStackRef value = stack_pointer[-3], dict = stack_pointer[-2], sub = stack_pointer[-1];
    PyObject *dict_o = BORROW(dict);
    if (LIKELY(PyDict_CheckExact(dict_o))) {
        stack_pointer -= 3;
        ESCAPE();
        int err = _PyDict_SetItem_Take2((PyDictObject *)dict_o, PyStackRef_AsPyObjectSteal(sub),
                                        PyStackRef_AsPyObjectSteal(value));
        CLOSE(dict);
        if (UNLIKELY(err != 0)) {
            ERROR();
        }
        CONTINUE();
    }
    STORE_SUBSCR_GENERIC();
}

/* ---- CALL: (callable, self_or_null, args[oparg] -- res) -------------- */

/* After a call that may have run Python code, as the interpreter's
 * _CHECK_PERIODIC: pending events, and monitoring or tracing switched on
 * (then the interpreter continues). OPERAND0: the instrumentation version
 * compiled for. */
#define CALL_CHECK_PERIODIC()                                                  \
    do {                                                                       \
        if (UNLIKELY(BREAKER_DIFFERS())) {           \
            if (ember_instrumentation_changed(tstate, OPERAND0_U32)) {         \
                frame->instr_ptr = NEXT_INSTR;                                 \
                DEOPT();                                                       \
            }                                                                  \
            SYNC_SP();                                                         \
            HANDLE_PENDING(NEXT_INSTR);                                        \
        }                                                                      \
    } while (0)

/* For the specialised calls without _CHECK_PERIODIC (len, isinstance):
 * only instrumentation switched on by the call matters. */
#define CALL_CHECK_INSTRUMENTATION()                                           \
    do {                                                                       \
        if (UNLIKELY(ember_instrumentation_changed(tstate, OPERAND0_U32))) {   \
            frame->instr_ptr = NEXT_INSTR;                                     \
            DEOPT();                                                           \
        }                                                                      \
    } while (0)

/* The generic CALL, for a callable the guards did not expect. */
MISS_HELPER(call_miss)
{
    ADAPTIVE_MISS();
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    ESCAPE();
    PyObject *res = ember_call(tstate, frame, base, oparg, 0);
    stack_pointer = base;
    if (UNLIKELY(res == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
    stack_pointer++;
    CALL_CHECK_PERIODIC();
    CONTINUE();
}
#define CALL_GENERIC() MISS(call_miss)

/* Every input of the call closed, from the top down, with the stack
 * lowered to `base` first. */
#define CLOSE_CALL_INPUTS(base, oparg)                                         \
    do {                                                                       \
        stack_pointer = (base);                                                \
        SYNC_SP();                                                             \
        for (_PyStackRef *p_ = (base) + 2 + (oparg); p_ > (base);) {           \
            p_--;                                                              \
            PyStackRef_XCLOSE(*p_);                                            \
        }                                                                      \
    } while (0)

#define CALL_RESULT(res_o)                                                     \
    do {                                                                       \
        if (UNLIKELY((res_o) == NULL)) {                                       \
            ERROR();                                                           \
        }                                                                      \
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res_o);                \
        stack_pointer++;                                                       \
    } while (0)

/* type(x) */
EMBER_STENCIL(CALL_TYPE_1)
{
    _PyStackRef *base = stack_pointer - 3;
    if (LIKELY(OPARG == 1 && PyStackRef_IsNull(base[1]) && BORROW(base[0]) == (PyObject *)&PyType_Type)) {
        _PyStackRef arg = base[2];
        base[0] = PyStackRef_FromPyObjectNew(Py_TYPE(BORROW(arg)));
        stack_pointer = base + 1;
        if (PyStackRef_RefcountOnObject(arg)) {
            CLOSE_ESCAPING(arg);
        }
        CONTINUE();
    }
    CALL_GENERIC();
}

/* str(x), tuple(x): (callable, NULL, arg -- res) */
#define CALL_CLASS_1(NAME, TYPE, FUNC)                                         \
    EMBER_STENCIL(NAME)                                                        \
    {                                                                          \
        _PyStackRef *base = stack_pointer - 3;                                 \
        if (LIKELY(OPARG == 1 && PyStackRef_IsNull(base[1])                    \
                   && BORROW(base[0]) == (PyObject *)&(TYPE))) {               \
            _PyStackRef arg = base[2];                                         \
            ESCAPE();                                                          \
            PyObject *res = FUNC(BORROW(arg));                                 \
            stack_pointer = base;                                              \
            SYNC_SP();                                                         \
            CLOSE(arg);                                             \
            CALL_RESULT(res);                                                  \
            CALL_CHECK_PERIODIC();                                             \
            CONTINUE();                                                        \
        }                                                                      \
        CALL_GENERIC();                                                        \
    }

CALL_CLASS_1(CALL_STR_1, PyUnicode_Type, PyObject_Str)
CALL_CLASS_1(CALL_TUPLE_1, PyTuple_Type, PySequence_Tuple)

/* len(x): (callable, NULL, arg -- res). An error leaves the inputs on the
 * stack for the unwinder, as the interpreter does. */
EMBER_STENCIL(CALL_LEN)
{
    _PyStackRef *base = stack_pointer - 3;
    if (LIKELY(OPARG == 1 && PyStackRef_IsNull(base[1])
               && BORROW(base[0]) == tstate->interp->callable_cache.len)) {
        _PyStackRef arg = base[2];
        ESCAPE();
        Py_ssize_t len = PyObject_Length(BORROW(arg));
        if (UNLIKELY(len < 0)) {
            ERROR();
        }
        PyObject *res = PyLong_FromSsize_t(len);
        if (UNLIKELY(res == NULL)) {
            ERROR();
        }
        stack_pointer = base;
        SYNC_SP();
        CLOSE(arg);
        CLOSE(base[0]);
        stack_pointer[0] = PyStackRef_FromPyObjectSteal(res);
        stack_pointer++;
        CALL_CHECK_INSTRUMENTATION();
        CONTINUE();
    }
    CALL_GENERIC();
}

/* isinstance(x, cls), self_or_null counting as an argument. */
EMBER_STENCIL(CALL_ISINSTANCE)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    if (LIKELY(oparg + has_self == 2 && BORROW(base[0]) == tstate->interp->callable_cache.isinstance)) {
        _PyStackRef *args = base + 2 - has_self;
        ESCAPE();
        int res = PyObject_IsInstance(BORROW(args[0]), BORROW(args[1]));
        if (UNLIKELY(res < 0)) {
            ERROR();
        }
        CLOSE_CALL_INPUTS(base, oparg);
        stack_pointer[0] = res ? PyStackRef_True : PyStackRef_False;
        stack_pointer++;
        CALL_CHECK_INSTRUMENTATION();
        CONTINUE();
    }
    CALL_GENERIC();
}

/* list.append(x) on a list, as a statement: (callable, list, arg --), the
 * following POP_TOP folded in (JUMP: the instruction after it). */
EMBER_STENCIL(CALL_LIST_APPEND)
{
    _PyStackRef *base = stack_pointer - 3;
    PyObject *self_o = BORROW(base[1]);
    if (LIKELY(OPARG == 1 && BORROW(base[0]) == tstate->interp->callable_cache.list_append
               && !PyStackRef_IsNull(base[1]) && PyList_Check(self_o))) {
        int err = _PyList_AppendTakeRef((PyListObject *)self_o, PyStackRef_AsPyObjectSteal(base[2]));
        _PyStackRef self = base[1], callable = base[0];
        stack_pointer = base;
        CLOSE_ESCAPING(self);
        CLOSE_ESCAPING(callable);
        if (UNLIKELY(err)) {
            ESCAPE();
            ERROR();
        }
        JUMP();
    }
    CALL_GENERIC();
}

/* A METH_O built-in function with one argument. */
EMBER_STENCIL(CALL_BUILTIN_O)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    PyObject *callable_o = BORROW(base[0]);
    if (LIKELY(oparg + has_self == 1 && PyCFunction_CheckExact(callable_o)
               && PyCFunction_GET_FLAGS(callable_o) == METH_O && !_Py_ReachedRecursionLimit(tstate))) {
        _PyStackRef arg = base[2 - has_self];
        ESCAPE();
        PyObject *res = _PyCFunction_TrampolineCall(PyCFunction_GET_FUNCTION(callable_o),
                                                    PyCFunction_GET_SELF(callable_o), BORROW(arg));
        stack_pointer = base;
        SYNC_SP();
        CLOSE(arg);
        CLOSE(base[0]);
        CALL_RESULT(res);
        CALL_CHECK_PERIODIC();
        CONTINUE();
    }
    CALL_GENERIC();
}

/* The calls through an argument array (ember_call_cfast). */
#define CALL_WITH_ARRAY(KIND)                                                  \
    do {                                                                       \
        ESCAPE();                                                              \
        PyObject *res_ = ember_call_cfast(frame, base, oparg, (KIND));         \
        stack_pointer = base;                                                  \
        CALL_RESULT(res_);                                                     \
        CALL_CHECK_PERIODIC();                                                 \
        CONTINUE();                                                            \
    } while (0)

/* A METH_FASTCALL built-in function. */
EMBER_STENCIL(CALL_BUILTIN_FAST)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    PyObject *callable_o = BORROW(base[0]);
    if (LIKELY(PyCFunction_CheckExact(callable_o) && PyCFunction_GET_FLAGS(callable_o) == METH_FASTCALL)) {
        CALL_WITH_ARRAY(CFAST_BUILTIN);
    }
    CALL_GENERIC();
}

/* A METH_FASTCALL | METH_KEYWORDS built-in function, without keywords. */
EMBER_STENCIL(CALL_BUILTIN_FAST_WITH_KEYWORDS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    PyObject *callable_o = BORROW(base[0]);
    if (LIKELY(PyCFunction_CheckExact(callable_o)
               && PyCFunction_GET_FLAGS(callable_o) == (METH_FASTCALL | METH_KEYWORDS))) {
        CALL_WITH_ARRAY(CFAST_BUILTIN_KW);
    }
    CALL_GENERIC();
}

/* A class with a vectorcall constructor (range, float, list, ...). */
EMBER_STENCIL(CALL_BUILTIN_CLASS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    PyObject *callable_o = BORROW(base[0]);
    if (LIKELY(PyType_Check(callable_o) && ((PyTypeObject *)callable_o)->tp_vectorcall != NULL)) {
        CALL_WITH_ARRAY(CFAST_CLASS);
    }
    CALL_GENERIC();
}

/* The method descriptor at base[0] takes `flags`, and the first argument
 * (self) is exactly of its class. */
static inline __attribute__((always_inline)) int
descr_call_ok(PyObject *callable_o, int flags, _PyStackRef self)
{
    if (!Py_IS_TYPE(callable_o, &PyMethodDescr_Type)) {
        return 0;
    }
    PyMethodDescrObject *descr = (PyMethodDescrObject *)callable_o;
    return descr->d_method->ml_flags == flags && Py_IS_TYPE(BORROW(self), descr->d_common.d_type);
}

/* obj.method() of a METH_NOARGS method descriptor. */
EMBER_STENCIL(CALL_METHOD_DESCRIPTOR_NOARGS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    PyObject *callable_o = BORROW(base[0]);
    _PyStackRef *args = base + 2 - has_self;
    if (LIKELY(oparg + has_self == 1 && descr_call_ok(callable_o, METH_NOARGS, args[0])
               && !_Py_ReachedRecursionLimit(tstate))) {
        PyCFunction cfunc = ((PyMethodDescrObject *)callable_o)->d_method->ml_meth;
        ESCAPE();
        PyObject *res = _PyCFunction_TrampolineCall(cfunc, BORROW(args[0]), NULL);
        CLOSE_CALL_INPUTS(base, oparg);
        CALL_RESULT(res);
        CALL_CHECK_PERIODIC();
        CONTINUE();
    }
    CALL_GENERIC();
}

/* obj.method(x) of a METH_O method descriptor. */
EMBER_STENCIL(CALL_METHOD_DESCRIPTOR_O)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    PyObject *callable_o = BORROW(base[0]);
    _PyStackRef *args = base + 2 - has_self;
    if (LIKELY(oparg + has_self == 2 && descr_call_ok(callable_o, METH_O, args[0])
               && !_Py_ReachedRecursionLimit(tstate))) {
        PyCFunction cfunc = ((PyMethodDescrObject *)callable_o)->d_method->ml_meth;
        ESCAPE();
        PyObject *res;
        PyObject *both[2] = {BORROW(args[0]), BORROW(args[1])};
        int drained;
        if (UNLIKELY(Py_IS_TYPE(both[1], &PyGen_Type)) && (drained = ember_drained_arg(callable_o, both, 2)) >= 0) {
            /* sep.join(<generator expression>): resumed directly. */
            res = ember_call_draining(tstate, callable_o, both, 2, drained, 1);
        }
        else {
            res = _PyCFunction_TrampolineCall(cfunc, both[0], both[1]);
        }
        CLOSE_CALL_INPUTS(base, oparg);
        CALL_RESULT(res);
        CALL_CHECK_PERIODIC();
        CONTINUE();
    }
    CALL_GENERIC();
}

/* obj.method(...) of a METH_FASTCALL method descriptor. */
EMBER_STENCIL(CALL_METHOD_DESCRIPTOR_FAST)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    PyObject *callable_o = BORROW(base[0]);
    _PyStackRef *args = base + 2 - has_self;
    if (LIKELY(oparg + has_self != 0 && descr_call_ok(callable_o, METH_FASTCALL, args[0]))) {
        CALL_WITH_ARRAY(CFAST_DESCR);
    }
    CALL_GENERIC();
}

/* obj.method(...) of a METH_FASTCALL | METH_KEYWORDS method descriptor,
 * without keywords. */
EMBER_STENCIL(CALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS)
{
    int oparg = OPARG;
    _PyStackRef *base = stack_pointer - oparg - 2;
    int has_self = !PyStackRef_IsNull(base[1]);
    PyObject *callable_o = BORROW(base[0]);
    _PyStackRef *args = base + 2 - has_self;
    if (LIKELY(oparg + has_self != 0 && descr_call_ok(callable_o, METH_FASTCALL | METH_KEYWORDS, args[0]))) {
        CALL_WITH_ARRAY(CFAST_DESCR_KW);
    }
    CALL_GENERIC();
}
