/* Generators, coroutines and async generators.
 *
 * A generator's frame lives in the generator object (FRAME_OWNED_BY_GENERATOR)
 * and is run by gen_send_ex2 through the PEP 523 hook, which enters compiled
 * code at frame->instr_ptr: the RESUME after the YIELD_VALUE that suspended
 * it (the entry table has every instruction). gen_send_ex2 has already
 * pushed the sent value, swapped tstate->exc_info to the generator's and
 * set gi_frame_state to FRAME_EXECUTING; YIELD_VALUE undoes that and returns
 * the value to it; RETURN_VALUE and exceptions leaving the frame go through
 * _PyEval_FrameClearAndPop, which does the same for a generator's frame.
 * gen.throw() and the throwing half of gen.close() run in the interpreter
 * (the hook hands it any frame with throwflag set), which runs the frame up
 * to its next yield; the next resumption is compiled code again. */
#include "ember_stencil.h"
#include "pycore_genobject.h"
#include "pycore_intrinsics.h"

/* tier1/csrc/gen.c */
PyObject *ember_return_generator(_PyInterpreterFrame *frame, PyThreadState *tstate);
int ember_send(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *receiver, PyObject *v,
               PyObject **result, void *site);
PyObject *ember_get_aiter(PyThreadState *tstate, PyObject *obj);
PyObject *ember_yield_from_iter(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *iterable);

/* ( -- ): the first instruction a generator function's call runs (after
 * MAKE_CELL/COPY_FREE_VARS). The frame moves into a new generator object,
 * which is the call's result; its first resumption starts at the next
 * instruction. */
EMBER_STENCIL(RETURN_GENERATOR)
{
    ESCAPE();
    PyObject *gen = ember_return_generator(frame, tstate);
    if (UNLIKELY(gen == NULL)) {
        ERROR();
    }
    return gen;
}

/* (retval --): suspend the frame and return retval to gen_send_ex2. oparg 1:
 * inside `yield from`/`await`, with the delegate left on top of the stack
 * (what _PyGen_yf and gi_yieldfrom read). Never raises. */
EMBER_STENCIL(YIELD_VALUE)
{
    _PyStackRef retval = stack_pointer[-1];
    stack_pointer--;
    frame->instr_ptr = THIS_INSTR + 1;
    SYNC_SP();
    PyGenObject *gen = _PyGen_GetGeneratorFromFrame(frame);
    gen->gi_frame_state = (int8_t)(FRAME_SUSPENDED + OPARG);
    tstate->exc_info = gen->gi_exc_state.previous_item;
    gen->gi_exc_state.previous_item = NULL;
    tstate->py_recursion_remaining++;
    tstate->current_frame = frame->previous;
    frame->previous = NULL;
    return PyStackRef_AsPyObjectSteal(retval);
}

/* (receiver, v -- receiver, retval): send v to the delegate of a
 * `yield from`/`await`. What it yields is pushed for the YIELD_VALUE that
 * follows; what it returns is pushed and control goes to the END_SEND
 * (tier 1 points JUMP there). SITE: the site's ember_send_cache. */
EMBER_STENCIL(SEND)
{
    _PyStackRef receiver = stack_pointer[-2], v = stack_pointer[-1];
    ESCAPE();
    PyObject *retval;
    int status = ember_send(tstate, frame, BORROW(receiver), BORROW(v), &retval, SITE);
    /* PYGEN_ERROR or EMBER_SEND_HAND_OFF (the adaptive counter, kept by
     * ember_send). */
    if (UNLIKELY((unsigned)status > 1)) {
        if (status == EMBER_SEND_HAND_OFF) {
            DEOPT_HERE();
        }
        stack_pointer--;
        SYNC_SP();
        CLOSE(v);
        ERROR();
    }
    stack_pointer--;
    SYNC_SP();
    CLOSE(v);
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(retval);
    stack_pointer++;
    if (status == PYGEN_RETURN) {
        JUMP();
    }
    CONTINUE();
}

/* (receiver, value -- value) */
EMBER_STENCIL(END_SEND)
{
    _PyStackRef receiver = stack_pointer[-2];
    stack_pointer[-2] = stack_pointer[-1];
    stack_pointer--;
    CLOSE_ESCAPING(receiver);
    CONTINUE();
}

/* (iterable -- iter): the awaitable's iterator; oparg says where the
 * `await` is, for the error message. */
EMBER_STENCIL(GET_AWAITABLE)
{
    _PyStackRef iterable = stack_pointer[-1];
    ESCAPE();
    PyObject *iter = _PyEval_GetAwaitable(BORROW(iterable), OPARG);
    stack_pointer--;
    SYNC_SP();
    CLOSE(iterable);
    if (UNLIKELY(iter == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(iter);
    stack_pointer++;
    CONTINUE();
}

/* (obj -- iter) */
EMBER_STENCIL(GET_AITER)
{
    _PyStackRef obj = stack_pointer[-1];
    ESCAPE();
    PyObject *iter = ember_get_aiter(tstate, BORROW(obj));
    stack_pointer--;
    SYNC_SP();
    CLOSE(obj);
    if (UNLIKELY(iter == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(iter);
    stack_pointer++;
    CONTINUE();
}

/* (aiter -- aiter, awaitable) */
EMBER_STENCIL(GET_ANEXT)
{
    ESCAPE();
    PyObject *awaitable = _PyEval_GetANext(BORROW(stack_pointer[-1]));
    if (UNLIKELY(awaitable == NULL)) {
        ERROR();
    }
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(awaitable);
    stack_pointer++;
    CONTINUE();
}

/* (awaitable, exc --): the handler of an `async for`. StopAsyncIteration
 * ends the loop; anything else is re-raised from here, without a traceback
 * entry (tier 1 points JUMP at the code object's RERAISE_EXIT). */
EMBER_STENCIL(END_ASYNC_FOR)
{
    _PyStackRef awaitable = stack_pointer[-2], exc = stack_pointer[-1];
    ESCAPE();
    if (PyErr_GivenExceptionMatches(BORROW(exc), PyExc_StopAsyncIteration)) {
        stack_pointer--;
        SYNC_SP();
        CLOSE(exc);
        stack_pointer--;
        SYNC_SP();
        CLOSE(awaitable);
        CONTINUE();
    }
    _PyErr_SetRaisedException(tstate, Py_NewRef(BORROW(exc)));
    JUMP();
}

/* (sub_iter, last_sent_val, exc_value -- none, value): the handler around
 * a `yield from`/`await`'s suspension. The delegate finishing by
 * StopIteration gives the expression's value; anything else is re-raised
 * from here without a traceback entry (JUMP: RERAISE_EXIT). */
EMBER_STENCIL(CLEANUP_THROW)
{
    _PyStackRef sub_iter = stack_pointer[-3], last_sent_val = stack_pointer[-2],
                exc_value = stack_pointer[-1];
    PyObject *exc = BORROW(exc_value);
    ESCAPE();
    if (PyErr_GivenExceptionMatches(exc, PyExc_StopIteration)) {
        stack_pointer[-3] = PyStackRef_None;
        stack_pointer[-2] = PyStackRef_FromPyObjectNew(((PyStopIterationObject *)exc)->value);
        stack_pointer--;
        SYNC_SP();
        CLOSE(sub_iter);
        CLOSE(last_sent_val);
        CLOSE(exc_value);
        CONTINUE();
    }
    _PyErr_SetRaisedException(tstate, Py_NewRef(exc));
    JUMP();
}

/* (iterable -- iter): generators and coroutines delegate to themselves. */
EMBER_STENCIL(GET_YIELD_FROM_ITER)
{
    _PyStackRef iterable = stack_pointer[-1];
    PyObject *o = BORROW(iterable);
    if (PyGen_CheckExact(o)) {
        CONTINUE();
    }
    ESCAPE();
    PyObject *iter = ember_yield_from_iter(tstate, frame, o);
    if (iter == o) {
        CONTINUE();
    }
    if (UNLIKELY(iter == NULL)) {
        ERROR();
    }
    stack_pointer--;
    SYNC_SP();
    CLOSE(iterable);
    stack_pointer[0] = PyStackRef_FromPyObjectSteal(iter);
    stack_pointer++;
    CONTINUE();
}

/* (value -- res): one of the interpreter's unary intrinsics (every
 * generator's StopIteration guard, async generators' yields, ...). */
EMBER_STENCIL(CALL_INTRINSIC_1)
{
    _PyStackRef value = stack_pointer[-1];
    ESCAPE();
    PyObject *res = _PyIntrinsics_UnaryFunctions[OPARG].func(tstate, BORROW(value));
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
