/* Locals, constants, stack shuffling, control flow, frame entry and exit. */
#include "ember_stencil.h"
#include "pycore_optimizer.h"

/* The code object's shared exits (one copy per compiled code object). */

/* Hand the frame to the interpreter at frame->instr_ptr. */
EMBER_STENCIL(DEOPT_EXIT)
{
    return ember_handoff(frame, stack_pointer, tstate);
}

/* Before the first instruction of a line (tier 1 places it; see
 * compile.rs line_starts). OPERAND0: the instrumentation version compiled
 * for, >> 8 (ember_line_version_changed). Tracing or monitoring switched
 * on by code this frame called has instrumented its code object already;
 * the interpreter reports this line to the tracer, so it takes the frame
 * over here. */
EMBER_STENCIL(LINE_CHECK)
{
    if (UNLIKELY(LINE_VERSION_CHANGED())) {
        DEOPT_HERE();
    }
    CONTINUE();
}

/* An instruction tier 1 does not compile: the interpreter runs the rest of
 * this frame from here. */
EMBER_STENCIL(UNSUPPORTED)
{
    DEOPT_HERE();
}

/* An exception at frame->instr_ptr: traceback entry, then the handler (through
 * the entry table, OPERAND0) or out of the frame. */
EMBER_STENCIL(ERROR_EXIT)
{
    int here = (int)(frame->instr_ptr - _PyFrame_GetBytecode(frame));
    int handler = ember_unwind(frame, &stack_pointer, tstate, here, 1);
    if (handler < 0) {
        return NULL;
    }
    __attribute__((musttail)) return ((ember_cont *)OPERAND0)[handler](frame, stack_pointer, tstate);
}

/* The same without a traceback entry (a bare `raise`). */
EMBER_STENCIL(RERAISE_EXIT)
{
    int here = (int)(frame->instr_ptr - _PyFrame_GetBytecode(frame));
    int handler = ember_unwind(frame, &stack_pointer, tstate, here, 0);
    if (handler < 0) {
        return NULL;
    }
    __attribute__((musttail)) return ((ember_cont *)OPERAND0)[handler](frame, stack_pointer, tstate);
}

EMBER_STENCIL(NOP)
{
    CONTINUE();
}

/* OPERAND0: the instrumentation version the code was compiled for. When
 * monitoring or tracing changed it, the interpreter runs this frame from
 * here (its RESUME instruments the code). */
#define RESUME_BODY()                                                            \
    do {                                                                         \
        if (UNLIKELY(BREAKER_DIFFERS())) {             \
            if (ember_instrumentation_changed(tstate, OPERAND0_U32)) {           \
                DEOPT_HERE();                                                    \
            }                                                                    \
            /* Periodic check, except right after a yield-from/await             \
             * resumption, as the interpreter does. */                           \
            if ((OPARG & RESUME_OPARG_LOCATION_MASK) < RESUME_AFTER_YIELD_FROM) { \
                ESCAPE();                                                        \
                HANDLE_PENDING(DISPATCH_INSTR);                                  \
            }                                                                    \
        }                                                                        \
    } while (0)

EMBER_STENCIL(RESUME)
{
    RESUME_BODY();
    if (tstate->tracing == 0) {
        QUICKEN_TO(RESUME, EMBER_OP_RESUME_CHECK);
    }
    CONTINUE();
}

EMBER_STENCIL(RESUME_CHECK)
{
    RESUME_BODY();
    CONTINUE();
}

/* The locals' stencils: OPERAND0 (and OPERAND1) are the locals' byte
 * offsets in the frame (LOCAL0, LOCAL1 in ember_stencil.h). */
EMBER_STENCIL(LOAD_FAST)
{
    stack_pointer[0] = PyStackRef_DUP(LOCAL0);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(LOAD_FAST_BORROW)
{
    stack_pointer[0] = PyStackRef_Borrow(LOCAL0);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(LOAD_FAST_LOAD_FAST)
{
    stack_pointer[0] = PyStackRef_DUP(LOCAL0);
    stack_pointer[1] = PyStackRef_DUP(LOCAL1);
    stack_pointer += 2;
    CONTINUE();
}

EMBER_STENCIL(LOAD_FAST_BORROW_LOAD_FAST_BORROW)
{
    stack_pointer[0] = PyStackRef_Borrow(LOCAL0);
    stack_pointer[1] = PyStackRef_Borrow(LOCAL1);
    stack_pointer += 2;
    CONTINUE();
}

/* OPERAND0: the variable's name (for the error message). */
EMBER_STENCIL(LOAD_FAST_CHECK)
{
    _PyStackRef value = GETLOCAL(OPARG);
    if (UNLIKELY(PyStackRef_IsNull(value))) {
        ESCAPE();
        _PyEval_FormatExcCheckArg(tstate, PyExc_UnboundLocalError,
            "cannot access local variable '%s' where it is not associated with a value",
            (PyObject *)OPERAND0);
        ERROR();
    }
    stack_pointer[0] = PyStackRef_DUP(value);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(LOAD_FAST_AND_CLEAR)
{
    stack_pointer[0] = LOCAL0;
    SET_LOCAL0(PyStackRef_NULL);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(STORE_FAST)
{
    _PyStackRef old = LOCAL0;
    SET_LOCAL0(stack_pointer[-1]);
    stack_pointer--;
    if (!PyStackRef_IsNull(old)) {
        CLOSE_ESCAPING(old);
    }
    CONTINUE();
}

EMBER_STENCIL(STORE_FAST_LOAD_FAST)
{
    _PyStackRef old = LOCAL0;
    SET_LOCAL0(stack_pointer[-1]);
    stack_pointer[-1] = PyStackRef_DUP(LOCAL1);
    if (!PyStackRef_IsNull(old)) {
        CLOSE_ESCAPING(old);
    }
    CONTINUE();
}

EMBER_STENCIL(STORE_FAST_STORE_FAST)
{
    _PyStackRef old1 = LOCAL0;
    SET_LOCAL0(stack_pointer[-1]);
    stack_pointer--;
    if (!PyStackRef_IsNull(old1)) {
        CLOSE_ESCAPING(old1);
    }
    _PyStackRef old2 = LOCAL1;
    SET_LOCAL1(stack_pointer[-1]);
    stack_pointer--;
    if (!PyStackRef_IsNull(old2)) {
        CLOSE_ESCAPING(old2);
    }
    CONTINUE();
}

/* OPERAND0: the variable's name. */
EMBER_STENCIL(DELETE_FAST)
{
    int oparg = OPARG;
    _PyStackRef old = GETLOCAL(oparg);
    if (UNLIKELY(PyStackRef_IsNull(old))) {
        ESCAPE();
        _PyEval_FormatExcCheckArg(tstate, PyExc_UnboundLocalError,
            "cannot access local variable '%s' where it is not associated with a value",
            (PyObject *)OPERAND0);
        ERROR();
    }
    GETLOCAL(oparg) = PyStackRef_NULL;
    CLOSE_ESCAPING(old);
    CONTINUE();
}

/* OPERAND0: the constant (kept alive by the code object). */
EMBER_STENCIL(LOAD_CONST)
{
    PyObject *obj = (PyObject *)OPERAND0;
    QUICKEN_TO(LOAD_CONST, _Py_IsImmortal(obj) ? EMBER_OP_LOAD_CONST_IMMORTAL : EMBER_OP_LOAD_CONST_MORTAL);
    stack_pointer[0] = PyStackRef_FromPyObjectNew(obj);
    stack_pointer++;
    CONTINUE();
}

/* Also LOAD_CONST_IMMORTAL (tier 1 falls back to the generic name's
 * stencil only for forms it has none of). */
EMBER_STENCIL(LOAD_CONST_MORTAL)
{
    stack_pointer[0] = PyStackRef_FromPyObjectNew((PyObject *)OPERAND0);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(LOAD_CONST_IMMORTAL)
{
    stack_pointer[0] = PyStackRef_FromPyObjectImmortal((PyObject *)OPERAND0);
    stack_pointer++;
    CONTINUE();
}

/* OPERAND0: the small int object (immortal). */
EMBER_STENCIL(LOAD_SMALL_INT)
{
    stack_pointer[0] = PyStackRef_FromPyObjectBorrow((PyObject *)OPERAND0);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(POP_TOP)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer--;
    CLOSE_ESCAPING(value);
    CONTINUE();
}

EMBER_STENCIL(PUSH_NULL)
{
    stack_pointer[0] = PyStackRef_NULL;
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(COPY)
{
    stack_pointer[0] = PyStackRef_DUP(stack_pointer[-OPARG]);
    stack_pointer++;
    CONTINUE();
}

EMBER_STENCIL(SWAP)
{
    int oparg = OPARG;
    _PyStackRef top = stack_pointer[-1];
    stack_pointer[-1] = stack_pointer[-oparg];
    stack_pointer[-oparg] = top;
    CONTINUE();
}

EMBER_STENCIL(JUMP_FORWARD)
{
    JUMP();
}

/* OPERAND0: the instrumentation version compiled for; OPERAND1: the code
 * object's back-edge counter (a uint64_t in its Ember record, reported by
 * ember.stats() as back_edges; one increment per loop iteration). If the
 * instrumentation changed, the interpreter takes over at the jump target,
 * NEXT_INSTR - OPARG. The generic form is rewritten as the interpreter
 * rewrites it at its first run; JUMP_BACKWARD_NO_JIT, what the interpreter
 * has made of it (CPython's JIT off), has its own stencil without that. */
#define JUMP_BACKWARD_BODY()                                                     \
    do {                                                                         \
        if (UNLIKELY(BREAKER_DIFFERS())) {             \
            if (ember_instrumentation_changed(tstate, OPERAND0_U32)) {           \
                frame->instr_ptr = NEXT_INSTR - OPARG;                           \
                DEOPT();                                                         \
            }                                                                    \
            ESCAPE();                                                            \
            HANDLE_PENDING(NEXT_INSTR - OPARG);                                  \
        }                                                                        \
        JUMP();                                                                  \
    } while (0)

EMBER_STENCIL(JUMP_BACKWARD_NO_JIT)
{
    ++*(uint64_t *)OPERAND1;
    JUMP_BACKWARD_BODY();
}

EMBER_STENCIL(JUMP_BACKWARD)
{
    ++*(uint64_t *)OPERAND1;
    _Py_CODEUNIT *this_instr = THIS_INSTR;
    if (this_instr->op.code == EMBER_OP_JUMP_BACKWARD) {
        this_instr->op.code = tstate->interp->jit ? EMBER_OP_JUMP_BACKWARD_JIT : EMBER_OP_JUMP_BACKWARD_NO_JIT;
    }
    else if (UNLIKELY(this_instr->op.code == EMBER_OP_ENTER_EXECUTOR)) {
        /* An on-stack-replacement entry (tier1/csrc/osr.c) stands for the
         * instruction: quickened there. */
        struct _PyExecutorObject *ex = _PyFrame_GetCode(frame)->co_executors->executors[this_instr->op.arg];
        if (ex->vm_data.opcode == EMBER_OP_JUMP_BACKWARD) {
            ex->vm_data.opcode = EMBER_OP_JUMP_BACKWARD_NO_JIT;
        }
    }
    JUMP_BACKWARD_BODY();
}

EMBER_STENCIL(POP_JUMP_IF_FALSE)
{
    _PyStackRef cond = stack_pointer[-1];
    stack_pointer--;
    if (PyStackRef_IsFalse(cond)) {
        JUMP();
    }
    CONTINUE();
}

EMBER_STENCIL(POP_JUMP_IF_TRUE)
{
    _PyStackRef cond = stack_pointer[-1];
    stack_pointer--;
    if (PyStackRef_IsTrue(cond)) {
        JUMP();
    }
    CONTINUE();
}

EMBER_STENCIL(POP_JUMP_IF_NONE)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer--;
    /* Closing None does nothing: closed first, the branch is a plain
     * conditional jump, both ways on the common path. */
    CLOSE_ESCAPING(value);
    if (PyStackRef_IsNone(value)) {
        JUMP();
    }
    CONTINUE();
}

EMBER_STENCIL(POP_JUMP_IF_NOT_NONE)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer--;
    /* As POP_JUMP_IF_NONE: closed first. */
    CLOSE_ESCAPING(value);
    if (PyStackRef_IsNone(value)) {
        CONTINUE();
    }
    JUMP();
}

EMBER_STENCIL(RETURN_VALUE)
{
    _PyStackRef retval = stack_pointer[-1];
    stack_pointer--;
    PyObject *result = PyStackRef_AsPyObjectSteal(retval);
    /* A frame object that outlives the call reports this line. */
    SET_IP();
    SYNC_SP();
    tstate->py_recursion_remaining++;
    /* Unlink the frame before clearing it, as the interpreter does. */
    tstate->current_frame = frame->previous;
    _PyEval_FrameClearAndPop(tstate, frame);
    return result;
}

/* The stack effect of an instruction whose only job is to be skipped
 * (NOT_TAKEN, the first cache word, ...) is nothing; NOP serves. */

EMBER_STENCIL(END_FOR)
{
    _PyStackRef value = stack_pointer[-1];
    stack_pointer--;
    CLOSE_ESCAPING(value);
    CONTINUE();
}

/* A back edge without the periodic check (inside `yield from`/`await`). */
EMBER_STENCIL(JUMP_BACKWARD_NO_INTERRUPT)
{
    JUMP();
}
