/* Common definitions for Ember's tier-1 stencils (see ../README.md).
 *
 * A stencil implements one bytecode instruction on the interpreter's own
 * frame: locals and the value stack live in the _PyInterpreterFrame, and
 * before anything that can escape (a call into C, a decref that may run a
 * finaliser, a raise) the stencil stores frame->instr_ptr and
 * frame->stackpointer exactly as the interpreter would have them. */
#ifndef EMBER_STENCIL_H
#define EMBER_STENCIL_H

#ifndef Py_BUILD_CORE
#  define Py_BUILD_CORE 1
#endif
#include <Python.h>
#include "pycore_ceval.h"
#include "pycore_code.h"
#include "pycore_frame.h"
#include "pycore_interpframe.h"
#include "pycore_long.h"
#include "pycore_floatobject.h"
#include "pycore_object.h"
#include "pycore_pyerrors.h"
#include "pycore_stackref.h"
#include "pycore_tuple.h"
#include "pycore_unicodeobject.h"
#include "pycore_list.h"
/* EMBER_OP_<NAME>: opcode numbers (generated; see stencils/build.rs). */
#include "ember_opcodes.h"

#define EMBER_ARGS _PyInterpreterFrame *frame, _PyStackRef *stack_pointer, PyThreadState *tstate
#define EMBER_CC __attribute__((preserve_none))
typedef EMBER_CC PyObject *(*ember_cont)(EMBER_ARGS);

#define EMBER_STENCIL(NAME) EMBER_CC PyObject *ember_stencil_##NAME(EMBER_ARGS)

/* Value holes: the address of the symbol is the value. */
extern char _EMBER_OPARG[];
extern char _EMBER_OPERAND0[];
/* OPERAND0/1 where the stencil's operand is a 32-bit value (the
 * instrumentation version, a type or keys version, an offset or index): a
 * shorter load; tier 1 refuses code whose value does not fit. */
extern char _EMBER_OPERAND0_U32[];
extern char _EMBER_OPERAND1[];
extern char _EMBER_OPERAND1_U32[];
extern char _EMBER_THIS_INSTR[];
extern char _EMBER_DISPATCH_INSTR[];
extern char _EMBER_NEXT_INSTR[];
/* The instruction's site cache: memory of its own, zeroed when it is
 * compiled (its size per instruction: tier1/src/compile.rs,
 * site_cache_words). */
extern char _EMBER_SITE[];

/* Continuation holes. Hidden visibility: a direct jmp/b, not a GOT load. */
#define EMBER_HIDDEN __attribute__((visibility("hidden")))
extern EMBER_HIDDEN EMBER_CC PyObject *_EMBER_CONTINUE(EMBER_ARGS);
extern EMBER_HIDDEN EMBER_CC PyObject *_EMBER_JUMP(EMBER_ARGS);
extern EMBER_HIDDEN EMBER_CC PyObject *_EMBER_ERROR(EMBER_ARGS);
extern EMBER_HIDDEN EMBER_CC PyObject *_EMBER_DEOPT(EMBER_ARGS);

/* The empty asm hides the hole's value from the optimiser: clang would
 * otherwise assume a symbol's address is never zero (oparg 0 is common). */
static inline __attribute__((always_inline)) uintptr_t
ember_hole(const void *sym)
{
    uintptr_t v = (uintptr_t)sym;
    __asm__("" : "+r"(v));
    return v;
}

/* A hole whose value fits in 32 bits, zero-extended. On x86-64 the asm is the
 * load itself, a 5-byte `mov r32, imm32` (R_X86_64_32) where clang would
 * otherwise emit a 10-byte `movabs` (every data address is "large" here) and
 * a zero extension after the barrier. */
static inline __attribute__((always_inline)) uintptr_t
ember_hole32(const void *sym)
{
    uintptr_t v;
#if defined(__x86_64__)
    __asm__("movl $%c1, %k0" : "=r"(v) : "i"(sym));
#else
    v = (uint32_t)ember_hole(sym);
#endif
    __builtin_assume(v <= 0xffffffffu);
    return v;
}

/* The oparg is a non-negative int (tier 1 refuses larger ones): knowing it
 * lets clang index with it without a sign extension. */
static inline __attribute__((always_inline)) int
ember_oparg(void)
{
    uintptr_t v = ember_hole32(_EMBER_OPARG);
    __builtin_assume(v <= 0x7fffffff);
    return (int)v;
}

#define OPARG ember_oparg()
#define OPERAND0_U32 ember_hole32(_EMBER_OPERAND0_U32)
#define OPERAND0 ember_hole(_EMBER_OPERAND0)
#define OPERAND1 ember_hole(_EMBER_OPERAND1)
#define OPERAND1_U32 ember_hole32(_EMBER_OPERAND1_U32)
#define THIS_INSTR ((_Py_CODEUNIT *)ember_hole(_EMBER_THIS_INSTR))
#define DISPATCH_INSTR ((_Py_CODEUNIT *)ember_hole(_EMBER_DISPATCH_INSTR))
#define NEXT_INSTR ((_Py_CODEUNIT *)ember_hole(_EMBER_NEXT_INSTR))
#define SITE ((void *)ember_hole(_EMBER_SITE))

#define CONTINUE() __attribute__((musttail)) return _EMBER_CONTINUE(frame, stack_pointer, tstate)
#define JUMP() __attribute__((musttail)) return _EMBER_JUMP(frame, stack_pointer, tstate)
#define ERROR() __attribute__((musttail)) return _EMBER_ERROR(frame, stack_pointer, tstate)
#define DEOPT() __attribute__((musttail)) return _EMBER_DEOPT(frame, stack_pointer, tstate)
/* The interpreter runs this instruction (and the rest of the frame): from its
 * EXTENDED_ARG prefix, or it would decode a truncated oparg. */
#define DEOPT_HERE()                                                             \
    do {                                                                         \
        frame->instr_ptr = DISPATCH_INSTR;                                       \
        DEOPT();                                                                 \
    } while (0)

/* A stencil's rare path as a function of its own, tail-called (MISS):
 * a guard that failed, then the generic operation. With every call of the
 * generic path moved out, clang keeps the stencil's common path in the
 * pinned registers instead of moving frame, stack pointer and tstate aside
 * for calls it may make (a fifth of a specialised stencil's instructions
 * went to that). stencil-build copies the helper after the stencil, into
 * its cold part; its holes are the stencil's. */
#define MISS_HELPER(NAME) static EMBER_CC __attribute__((noinline, cold)) PyObject *NAME(EMBER_ARGS)
#define MISS(NAME) __attribute__((musttail)) return NAME(frame, stack_pointer, tstate)

/* Frame-state discipline. */
#define SET_IP() (frame->instr_ptr = THIS_INSTR)
#define SYNC_SP() (frame->stackpointer = stack_pointer)
#define ESCAPE() (SET_IP(), SYNC_SP())

/* PyStackRef_FromPyObjectNew(obj) with both outcomes on the common path:
 * an immortal object (None, True, False, a small int: an attribute's or a
 * global's value as often as not) is tagged, any other gets a reference.
 * clang would otherwise lay the immortal case out of line, where tier 1
 * places it among the rare paths, two taken jumps away. */
static inline __attribute__((always_inline)) _PyStackRef
ember_new_ref(PyObject *obj)
{
#if defined(Py_REF_DEBUG) || defined(Py_GIL_DISABLED) || !defined(__LP64__)
    return PyStackRef_FromPyObjectNew(obj);
#else
    uint32_t refcnt = obj->ob_refcnt;
    uintptr_t immortal = refcnt >> 31; /* _Py_IsImmortal on 64-bit */
    if (!immortal) {
        obj->ob_refcnt = refcnt + 1;
    }
    return (_PyStackRef){.bits = (uintptr_t)obj | (immortal * Py_TAG_REFCNT)};
#endif
}

/* PyStackRef_CLOSE(REF) for a stencil that would ESCAPE() only for it: the
 * frame state is stored only when the object is about to be freed, its
 * deallocation being the only way the close can leave compiled code. The
 * common path (a reference that stays alive, or a tagged one) stores
 * nothing. */
/* In a release build the decrement is the common path's (see CLOSE_EXACT). */
#ifdef Py_REF_DEBUG
#  define EMBER_LIKELY_OWNED(x) (x)
#else
#  define EMBER_LIKELY_OWNED(x) __builtin_expect(!!(x), 1)
#endif
#define CLOSE_ESCAPING(REF) CLOSE_THEN(REF, ESCAPE())
/* PyStackRef_CLOSE(REF) with the deallocation off the common path (the
 * interpreter's own has no branch hint: clang laid each close's call of
 * _Py_Dealloc on the common path, about 10 bytes of code per close between
 * the instructions a loop runs). For a stencil that has stored the frame
 * state already, or needs none stored. */
#define CLOSE(REF) CLOSE_THEN(REF, (void)0)
/* Both: BEFORE_FREE done only when the object is about to be freed. */
#define CLOSE_THEN(REF, BEFORE_FREE)                                             \
    do {                                                                         \
        _PyStackRef ref_ = (REF);                                                \
        if (EMBER_LIKELY_OWNED(PyStackRef_RefcountOnObject(ref_))) {             \
            DECREF_MORTAL_THEN(BITS_TO_PTR(ref_), BEFORE_FREE);                  \
        }                                                                        \
    } while (0)
/* PyStackRef_CLOSE_SPECIALIZED(REF, DEALLOC) of an exact int, float or str
 * (DEALLOC: _PyLong_ExactDealloc, _PyFloat_ExactDealloc,
 * _PyUnicode_ExactDealloc), as the interpreter closes them: freed by the
 * type's own deallocator, not through _Py_Dealloc's generic path, which
 * runs no code of the program: no frame state to store, and the
 * deallocation kept off the common path. */
#ifdef Py_REF_DEBUG
#define CLOSE_EXACT(REF, DEALLOC)                                                \
    do {                                                                         \
        _PyStackRef ref_ = (REF);                                                \
        if (PyStackRef_RefcountOnObject(ref_)) {                                 \
            PyObject *o_ = BITS_TO_PTR(ref_);                                    \
            if (UNLIKELY(o_->ob_refcnt == 1)) {                                  \
                Py_DECREF_MORTAL_SPECIALIZED(o_, DEALLOC);                       \
            }                                                                    \
            else {                                                               \
                EMBER_DECREF_ALIVE(o_);                                          \
            }                                                                    \
        }                                                                        \
    } while (0)
#else
/* One decrement in memory and a branch on its result (`decl; je` on
 * x86-64): testing for 1 first costs three more instructions on the
 * common path. */
#define CLOSE_EXACT(REF, DEALLOC)                                                \
    do {                                                                         \
        _PyStackRef ref_ = (REF);                                                \
        if (LIKELY(PyStackRef_RefcountOnObject(ref_))) {                                 \
            PyObject *o_ = BITS_TO_PTR(ref_);                                    \
            if (UNLIKELY(--o_->ob_refcnt == 0)) {                                \
                _PyReftracerTrack(o_, PyRefTracer_DESTROY);                      \
                DEALLOC(o_);                                                     \
            }                                                                    \
        }                                                                        \
    } while (0)
#endif

/* (container, index -- item) for an item found without a call: a new
 * reference to ITEM_O replaces both inputs; the index, an exact int, is
 * freed by its own deallocator, the container the escaping way (freeing it
 * may run finalisers of its items). No frame state is stored otherwise. */
#define SUBSCR_ITEM_RESULT(ITEM_O, CONTAINER, INDEX)                             \
    do {                                                                         \
        _PyStackRef item_ = ember_new_ref(ITEM_O);                               \
        stack_pointer -= 2;                                                      \
        CLOSE_EXACT((INDEX), _PyLong_ExactDealloc);                              \
        CLOSE_ESCAPING(CONTAINER);                                               \
        stack_pointer[0] = item_;                                                \
        stack_pointer++;                                                         \
        CONTINUE();                                                              \
    } while (0)

/* Py_XDECREF(OBJ) the same way. */
#define XDECREF_ESCAPING(OBJ)                                                    \
    do {                                                                         \
        PyObject *obj_ = (OBJ);                                                  \
        if (obj_ != NULL && !_Py_IsImmortal(obj_)) {                             \
            DECREF_MORTAL_THEN(obj_, ESCAPE());                                  \
        }                                                                        \
    } while (0)
/* Py_DECREF_MORTAL(OBJ) of a mortal object, BEFORE_FREE done first when
 * the object is about to be freed (the rare path, through
 * ember_decref_last, or ember_dealloc_zero once the count is 0); otherwise
 * a plain decrement. */
#ifdef Py_REF_DEBUG
#define DECREF_MORTAL_THEN(OBJ, BEFORE_FREE)                                     \
    do {                                                                         \
        PyObject *o_ = (OBJ);                                                    \
        if (UNLIKELY(o_->ob_refcnt == 1)) {                                      \
            BEFORE_FREE;                                                         \
            ember_decref_last(o_);                                               \
        }                                                                        \
        else {                                                                   \
            EMBER_DECREF_ALIVE(o_);                                              \
        }                                                                        \
    } while (0)
#else
#define DECREF_MORTAL_THEN(OBJ, BEFORE_FREE)                                     \
    do {                                                                         \
        PyObject *o_ = (OBJ);                                                    \
        if (UNLIKELY(--o_->ob_refcnt == 0)) {                                    \
            BEFORE_FREE;                                                         \
            ember_dealloc_zero(o_);                                              \
        }                                                                        \
    } while (0)
#endif
/* A decref that leaves the object alive (a debug build keeps its count of
 * references). */
#ifdef Py_REF_DEBUG
#  define EMBER_DECREF_ALIVE(o) Py_DECREF_MORTAL(o)
#else
#  define EMBER_DECREF_ALIVE(o) ((void)(o)->ob_refcnt--)
#endif

#define GETLOCAL(i) (frame->localsplus[(i)])
/* The locals' own stencils (core.c: LOAD_FAST*, STORE_FAST*) get the
 * local's byte offset in the frame as OPERAND0 (and the second local's as
 * OPERAND1; tier1/src/operands.rs, Class::Locals). On x86-64 the offset is
 * the load's or store's displacement (R_X86_64_32S): one instruction where
 * an oparg needs an index register loaded first, and for the pairs a shift
 * and a mask as well. The "m" operand tells clang which memory the asm
 * reads or writes: the frame. */
typedef struct { char bytes[1 << 16]; } ember_memory;
/* Tests of a 32-bit value against a hole, and loads at a hole's offset from
 * an object, the same way: on x86-64 the hole is the instruction's
 * immediate (R_X86_64_32) or displacement (R_X86_64_32S) rather than a
 * register loaded with it first. */
#if defined(__x86_64__)
#define EMBER_EQ_HOLE32(V, SYM)                                                  \
    ({                                                                           \
        int eq_;                                                                 \
        __asm__("cmpl $%c2, %k1" : "=@cce"(eq_) : "r"((uint32_t)(V)), "i"(SYM)); \
        eq_;                                                                     \
    })
#define EMBER_LOAD_AT_HOLE32(BASE, SYM)                                          \
    ({                                                                           \
        PyObject *v_;                                                            \
        __asm__("movq %c1(%2), %0"                                              \
                : "=r"(v_)                                                       \
                : "i"(SYM), "r"(BASE), "m"(*(const ember_memory *)(BASE)));      \
        v_;                                                                      \
    })
#else
#define EMBER_EQ_HOLE32(V, SYM) ((uint32_t)(V) == (uint32_t)ember_hole32(SYM))
#define EMBER_LOAD_AT_HOLE32(BASE, SYM) (*(PyObject **)((char *)(BASE) + ember_hole32(SYM)))
#endif
#define EQ_OPERAND0_U32(V) EMBER_EQ_HOLE32(V, _EMBER_OPERAND0_U32)
#define LOAD_AT_OPERAND1_U32(BASE) EMBER_LOAD_AT_HOLE32(BASE, _EMBER_OPERAND1_U32)
#if defined(__x86_64__)
#define LOCAL_AT(SYM)                                                            \
    ({                                                                           \
        _PyStackRef v_;                                                          \
        __asm__("movq %c1(%2), %0"                                              \
                : "=r"(v_.bits)                                                  \
                : "i"(SYM), "r"(frame), "m"(*(const ember_memory *)frame)); \
        v_;                                                                      \
    })
#define SET_LOCAL_AT(SYM, REF)                                                   \
    __asm__ __volatile__("movq %1, %c2(%3)"                                                  \
            : "+m"(*(ember_memory *)frame)                                 \
            : "r"((REF).bits), "i"(SYM), "r"(frame))
#else
#define LOCAL_AT(SYM) (*(_PyStackRef *)((char *)frame + ember_hole32(SYM)))
#define SET_LOCAL_AT(SYM, REF) (*(_PyStackRef *)((char *)frame + ember_hole32(SYM)) = (REF))
#endif
#define LOCAL0 LOCAL_AT(_EMBER_OPERAND0_U32)
#define LOCAL1 LOCAL_AT(_EMBER_OPERAND1_U32)
#define SET_LOCAL0(REF) SET_LOCAL_AT(_EMBER_OPERAND0_U32, REF)
#define SET_LOCAL1(REF) SET_LOCAL_AT(_EMBER_OPERAND1_U32, REF)
#define BORROW(ref) PyStackRef_AsPyObjectBorrow(ref)
#define CODE() ((PyCodeObject *)PyStackRef_AsPyObjectBorrow(frame->f_executable))

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Helpers that live in the ember module itself (tier1/csrc/glue.c). */
PyObject *ember_handoff(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, PyThreadState *tstate);
/* Steals exc and cause; returns 1 for a bare re-raise (no new traceback). */
int ember_do_raise(PyThreadState *tstate, PyObject *exc, PyObject *cause);
int ember_handle_pending(PyThreadState *tstate);
/* The eval breaker's pending work, as the interpreter handles it: ERROR() on
 * an error; and when events of sys.monitoring are now set on this code
 * alone, which its compiled code does not report, the interpreter goes on
 * from AT. */
#define HANDLE_PENDING(AT)                                                       \
    do {                                                                         \
        int pending_ = ember_handle_pending(tstate);                             \
        if (pending_ < 0) {                                                      \
            ERROR();                                                             \
        }                                                                        \
        if (pending_ > 0) {                                                      \
            frame->instr_ptr = (AT);                                             \
            DEOPT();                                                             \
        }                                                                        \
    } while (0)
/* Py_DECREF_MORTAL of the last reference to a mortal object. An exact
 * float or int is freed by its type's own deallocator, as CLOSE_EXACT and
 * the interpreter's specialised instructions free them, not through
 * _Py_Dealloc: a local overwritten in a loop of arithmetic frees one each
 * time. */
void ember_decref_last(PyObject *o);
/* The same for an object whose count has just dropped to 0. */
void ember_dealloc_zero(PyObject *o);
/* What the interpreter would cache for a method load at a type (tier1/csrc/fast.c). */
int ember_method_with_values_entry(_PyInterpreterFrame *frame, PyObject *owner, int oparg, uint32_t version,
                                   uint32_t *keys_version, PyObject **descr);
uint32_t ember_instance_value_offset(_PyInterpreterFrame *frame, PyObject *owner, int oparg, uint32_t version);
/* The UNPACK_SEQUENCE*__STORES stencils' unpacking and stores, and the
 * same with the sequence read from the local a LOAD_FAST_BORROW right
 * before the unpacking loads (tier1/csrc/containers.c). */
_PyStackRef *ember_unpack_stores(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer, _Py_CODEUNIT *this_instr);
_PyStackRef *ember_unpack_local_stores(_PyInterpreterFrame *frame, _PyStackRef *stack_pointer,
                                       _Py_CODEUNIT *this_instr);
/* 1 if the interpreter may take over `frame` to specialise an instruction
 * (the runtime's budget), for one of these reasons (tier1/src/glue.rs,
 * `retry`): */
int ember_may_respecialise(_PyInterpreterFrame *frame, int why);
/* a generic instruction whose last attempts failed; */
#define EMBER_RETRY_GENERIC 0
/* a specialised instruction whose guard keeps failing; */
#define EMBER_RETRY_MISS 1
/* a generic instruction whose last EMBER_SPECIALISE_HOPELESS attempts or
 * more failed: its operands are likely of kinds CPython does not
 * specialise for (`x ** y` on floats); */
#define EMBER_RETRY_HOPELESS 2
/* a generic instruction whose attempts have not failed EMBER_SPECIALISE_ATTEMPTS
 * times yet (one run once per call, before a loop, in the calls before
 * compilation). */
#define EMBER_RETRY_FIRST 3
/* Ember's PEP 523 evaluator (runtime/src/hook.rs): runs a pushed frame
 * compiled or in the interpreter, counting it. */
PyObject *ember_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag);
/* Exception unwinding through the code object's exception table, for an
 * exception raised at instruction index `index`: returns the handler's
 * instruction index with the stack set up for it, or -1 when the exception
 * leaves the frame (which is then cleared and popped). */
int ember_unwind(_PyInterpreterFrame *frame, _PyStackRef **stack_pointer, PyThreadState *tstate,
                 int index, int add_traceback);
/* Calls base[0] with self base[1] (or NULL) and the oparg arguments after it
 * (then a kwnames tuple when has_kwnames); closes all of them. */
PyObject *ember_call(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg, int has_kwnames);
/* The same without keywords, for a generic CALL with its own cache (a
 * tier1/csrc/glue.h ember_call_cache, which tier 1 allocates per site),
 * whose adaptive counter it also keeps (frame->instr_ptr is the CALL): or
 * EMBER_CALL_HAND_OFF, having touched nothing, when the counter says the
 * interpreter should specialise the instruction now. */
PyObject *ember_call_site(PyThreadState *tstate, _PyInterpreterFrame *frame, _PyStackRef *base, int oparg,
                          void *cache);
#define EMBER_CALL_HAND_OFF ((PyObject *)1)
/* ember_send's (tier1/csrc/gen.c) when SEND's adaptive counter says the
 * interpreter should specialise it now: next to the PySendResult values. */
#define EMBER_SEND_HAND_OFF 2
/* tier1/csrc/gen.c; `known`: the callee's record (glue.h) if the caller has it. */
struct ember_direct_entry;
PyObject *ember_make_generator(PyThreadState *tstate, _PyStackRef func, _PyStackRef *args, int total,
                               struct ember_direct_entry *known);
/* next(it) for FOR_ITER; a generator is resumed directly (tier1/csrc/gen.c),
 * remembering its code object's record in `site` (the FOR_ITER's site cache,
 * or NULL). */
PyObject *ember_iternext(PyThreadState *tstate, PyObject *it, void *site);
/* A call of `callable` with `nargs` positional arguments and no keywords
 * (tier1/csrc/gen.c): the index of the argument that is a generator which
 * the call runs to its end, keeping no reference to it (set(g), sum(g),
 * sep.join(g), ...), or -1; ember_call_draining makes such a call with the
 * generator resumed directly, through PyObject_Vectorcall as a generic CALL
 * would, or `direct`ly as the specialised instruction would (a type's
 * tp_vectorcall, a METH_FASTCALL | METH_KEYWORDS function's or a METH_O
 * method descriptor's C function). Worth asking only when one of the first
 * two arguments is a generator (ember_maybe_drained). */
int ember_drained_arg(PyObject *callable, PyObject *const *args, Py_ssize_t nargs);
PyObject *ember_call_draining(PyThreadState *tstate, PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                              int index, int direct);
static inline __attribute__((always_inline)) int
ember_maybe_drained(PyObject *const *args, Py_ssize_t nargs)
{
    return nargs >= 1 && nargs <= 2 && (Py_IS_TYPE(args[0], &PyGen_Type) || (nargs == 2 && Py_IS_TYPE(args[1], &PyGen_Type)));
}
/* Build from n stack items, which they consume, also on failure. */
PyObject *ember_build_tuple(_PyStackRef *items, int n);
PyObject *ember_build_list(_PyStackRef *items, int n);
/* BINARY_SLICE of the three items at `items`, which it consumes. */
PyObject *ember_binary_slice(_PyInterpreterFrame *frame, _PyStackRef *items);

/* The generic forms of the commonest specialisable instructions, whole
 * (tier1/csrc/generic.c): the stack pointer after the instruction; NULL on
 * an error, with frame->stackpointer where the error leaves the stack; or
 * EMBER_GENERIC_HAND_OFF, having changed nothing, when the adaptive counter
 * says the interpreter should specialise the instruction now. */
#define EMBER_GENERIC_HAND_OFF ((_PyStackRef *)1)
/* Their parameters: the stencil's frame, stack pointer and thread state, and
 * its instruction. */
#define EMBER_HELPER_ARGS _PyInterpreterFrame *frame, _PyStackRef *sp, PyThreadState *tstate, _Py_CODEUNIT *this_instr
_PyStackRef *ember_generic_load_attr(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_generic_store_attr(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_generic_load_global(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_generic_binary_op(EMBER_HELPER_ARGS, binaryfunc op);
_PyStackRef *ember_generic_compare_op(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_generic_contains_op(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_generic_to_bool(EMBER_HELPER_ARGS);
_PyStackRef *ember_generic_store_subscr(EMBER_HELPER_ARGS);
/* The same after a specialised form's guard failed (ADAPTIVE_MISS: the
 * counter a miss keeps, not the generic one's). The float operations'
 * `kind`: EMBER_FLOAT_ADD, _SUBTRACT or _MULTIPLY; a float and a small int
 * are computed there, and not counted as a miss (FLOAT_BINOP, ops.c). */
enum { EMBER_FLOAT_ADD, EMBER_FLOAT_SUBTRACT, EMBER_FLOAT_MULTIPLY };
_PyStackRef *ember_miss_load_attr(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_miss_store_attr(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_miss_load_global(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_miss_binary_op(EMBER_HELPER_ARGS, binaryfunc op);
_PyStackRef *ember_miss_float_binop(EMBER_HELPER_ARGS, binaryfunc op, int kind);
_PyStackRef *ember_miss_compare_op(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_miss_contains_op(EMBER_HELPER_ARGS, int oparg);
_PyStackRef *ember_miss_to_bool(EMBER_HELPER_ARGS);
_PyStackRef *ember_miss_store_subscr(EMBER_HELPER_ARGS);
/* A stencil that is one of those calls; ends the stencil. */
#define GENERIC_RESULT(CALL)                                                     \
    do {                                                                         \
        _PyStackRef *sp_ = (CALL);                                               \
        if (UNLIKELY((uintptr_t)sp_ <= (uintptr_t)EMBER_GENERIC_HAND_OFF)) {     \
            if (sp_ != NULL) {                                                   \
                DEOPT_HERE();                                                    \
            }                                                                    \
            stack_pointer = frame->stackpointer;                                 \
            ERROR();                                                             \
        }                                                                        \
        stack_pointer = sp_;                                                     \
        CONTINUE();                                                              \
    } while (0)

/* Quickening as the interpreter does it, so that code compiled before the
 * interpreter ever ran it still gets specialised (and later recompiled with
 * specialised stencils). The first inline-cache entry of a specialisable
 * instruction is its adaptive counter. CPython's specialiser is not
 * exported: when the counter of a still-generic instruction triggers, the
 * interpreter takes over the frame at that instruction, specialises it and
 * runs the frame to its end. Otherwise the counter advances exactly as the
 * interpreter's generic instruction advances it. An instruction specialised
 * since compilation is left alone: the interpreter would run its specialised
 * form, which leaves the counter unless a guard fails.
 *
 * No hand-off where the attempt is known to fail (FAILS, below), nor where
 * the code object has used up its budget of hand-offs
 * (ember_may_respecialise: a budget by the instruction's failed attempts --
 * the counter's backoff exponent counts them -- and by how long the code's
 * frames run): the counter backs off as after a failed attempt, and the
 * instruction runs generically. A hand-off leaves the rest of the frame to
 * the interpreter -- all of a long loop, when the frame is a function's
 * only call. */
#define EMBER_SPECIALISE_ATTEMPTS 3
#define EMBER_SPECIALISE_HOPELESS 6
#define ADAPTIVE(GENERIC) ADAPTIVE_UNLESS_FAILS(GENERIC, 0)

/* ADAPTIVE for an instruction whose specialisation is known to fail when
 * FAILS holds: CPython's specialiser refuses calls to Python functions and
 * bound methods, and generators and coroutines as FOR_ITER/SEND operands,
 * whenever a PEP 523 evaluator is installed, as Ember's is; it would back
 * the counter off and run the generic instruction. */
#define ADAPTIVE_UNLESS_FAILS(GENERIC, FAILS) ADAPTIVE_COUNTER(THIS_INSTR, EMBER_OP_##GENERIC, FAILS, DEOPT_HERE())

/* The counter of the still-generic instruction INSTR (opcode GENERIC), as
 * ADAPTIVE_UNLESS_FAILS keeps it, with HAND_OFF the statement that gives
 * the frame to the interpreter at INSTR; also for glue that keeps the
 * counter of its stencil's instruction (tier1/csrc: CALL's, SEND's). A
 * macro, so that FAILS is evaluated only when the counter triggers. */
#define ADAPTIVE_COUNTER(INSTR, GENERIC, FAILS, HAND_OFF)                        \
    do {                                                                         \
        _Py_CODEUNIT *this_instr_ = (INSTR);                                     \
        if (this_instr_->op.code == (GENERIC)) {                                 \
            _Py_BackoffCounter counter_ = this_instr_[1].counter;                \
            if (UNLIKELY(backoff_counter_triggers(counter_))) {                  \
                int failed_ = (counter_.value_and_backoff & ((1 << BACKOFF_BITS) - 1)) \
                              - ADAPTIVE_WARMUP_BACKOFF;                         \
                if (!((FAILS) && tstate->interp->eval_frame != NULL)            \
                    && ember_may_respecialise(frame, failed_ < EMBER_SPECIALISE_ATTEMPTS ? EMBER_RETRY_FIRST \
                                                     : failed_ >= EMBER_SPECIALISE_HOPELESS ? EMBER_RETRY_HOPELESS \
                                                     : EMBER_RETRY_GENERIC)) {  \
                    HAND_OFF;                                                    \
                }                                                                \
                counter_ = adaptive_counter_backoff(counter_);                   \
            }                                                                    \
            this_instr_[1].counter = advance_backoff_counter(counter_);          \
        }                                                                        \
    } while (0)

/* A specialised instruction whose guard failed: the interpreter would run
 * the generic instruction's body, counter included (its counter restarts at
 * a cooldown value when it specialises). Must come before the instruction
 * has changed anything: on the trigger the interpreter takes over here and
 * specialises it again -- unless the code object has handed frames over
 * for that too often (ember_may_respecialise): a polymorphic site would
 * otherwise send every ~53rd miss's frame to the interpreter, forever. The
 * counter then restarts as if the instruction had been specialised again. */
#define ADAPTIVE_MISS() ADAPTIVE_MISS_AT(THIS_INSTR, DEOPT_HERE())
/* The same for the instruction INSTR, HAND_OFF giving the frame to the
 * interpreter there (also for the helpers of tier1/csrc/generic.c). */
#define ADAPTIVE_MISS_AT(INSTR, HAND_OFF)                                        \
    do {                                                                         \
        _Py_CODEUNIT *this_instr_ = (INSTR);                                     \
        if (UNLIKELY(backoff_counter_triggers(this_instr_[1].counter))) {        \
            if (ember_may_respecialise(frame, EMBER_RETRY_MISS)) {               \
                HAND_OFF;                                                        \
            }                                                                    \
            this_instr_[1].counter = adaptive_counter_cooldown();                \
        }                                                                        \
        else {                                                                   \
            this_instr_[1].counter = advance_backoff_counter(this_instr_[1].counter); \
        }                                                                        \
    } while (0)

/* Instructions the interpreter rewrites on their first execution, with no
 * counter (RESUME -> RESUME_CHECK, LOAD_CONST -> LOAD_CONST_[IM]MORTAL,
 * JUMP_BACKWARD -> JUMP_BACKWARD_NO_JIT): the generic stencil rewrites,
 * stencils named after the rewritten forms do not. */
#define QUICKEN_TO(GENERIC, SPECIALISED)                                         \
    do {                                                                         \
        _Py_CODEUNIT *this_instr_ = THIS_INSTR;                                  \
        if (this_instr_->op.code == EMBER_OP_##GENERIC) {                        \
            this_instr_->op.code = (SPECIALISED);                                \
        }                                                                        \
    } while (0)

/* The eval breaker holds pending-event bits below _PY_EVAL_EVENTS_MASK and
 * the interpreter's instrumentation version above it. Compiled code is valid
 * for one version (an operand): equal to it means nothing to do. */
static inline __attribute__((always_inline)) int
ember_breaker_differs(PyThreadState *tstate, uintptr_t version)
{
    return _Py_atomic_load_uintptr_relaxed(&tstate->eval_breaker) != version;
}

static inline __attribute__((always_inline)) int
ember_instrumentation_changed(PyThreadState *tstate, uintptr_t version)
{
    return (_Py_atomic_load_uintptr_relaxed(&tstate->eval_breaker) & ~(uintptr_t)_PY_EVAL_EVENTS_MASK) != version;
}

/* The same test in fewer bytes, for the check at every line start: the
 * version is a uint32_t that is a multiple of 1 << _PY_EVAL_EVENTS_BITS
 * (CPython's monitoring versions), so the eval breaker's bits 32 and up are
 * zero and its 32 bits from byte 1 (little-endian) are the version >> 8 alone.
 * `version_shr8` is that (tier 1 gives LINE_CHECK's OPERAND0 so). */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || _PY_EVAL_EVENTS_BITS != 8
#  error "ember_line_version_changed reads the version as the eval breaker's bytes 1-4"
#endif
static inline __attribute__((always_inline)) int
ember_line_version_changed(PyThreadState *tstate, uint32_t version_shr8)
{
    uint32_t v;
    memcpy(&v, (const char *)&tstate->eval_breaker + 1, sizeof v);
    return v != version_shr8;
}

/* The two tests against OPERAND0 (the version, for BREAKER_DIFFERS; the
 * version >> 8, for LINE_VERSION_CHANGED), as every stencil makes them. On
 * x86-64 a compare of memory with the hole as immediate (R_X86_64_32): one
 * instruction where the value would be loaded into a register first. The
 * eval breaker's bits 32 and up are zero (see above), so comparing its low
 * 32 bits with the version is the whole comparison. */
#if defined(__x86_64__)
#define EMBER_CMP_NE_OPERAND0(MEM)                                               \
    ({                                                                           \
        int ne_;                                                                 \
        __asm__("cmpl $%c2, %1" : "=@ccne"(ne_) : "m"(MEM), "i"(_EMBER_OPERAND0_U32)); \
        ne_;                                                                     \
    })
#define BREAKER_DIFFERS() EMBER_CMP_NE_OPERAND0(*(const volatile uint32_t *)&tstate->eval_breaker)
#define LINE_VERSION_CHANGED()                                                   \
    EMBER_CMP_NE_OPERAND0(*(const volatile uint32_t *)((const char *)&tstate->eval_breaker + 1))
#else
#define BREAKER_DIFFERS() ember_breaker_differs(tstate, OPERAND0_U32)
#define LINE_VERSION_CHANGED() ember_line_version_changed(tstate, (uint32_t)OPERAND0_U32)
#endif

#endif /* EMBER_STENCIL_H */
