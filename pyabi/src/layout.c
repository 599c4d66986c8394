/* The real offsets and constants of CPython 3.14, as its headers define them.
 * pyabi's check_layout() compares them with the Rust definitions. */
#include <Python.h>
#include <stddef.h>
#include "pycore_interpframe_structs.h"
#include "pycore_stackref.h"
#include "pycore_code.h"
#include "pycore_ceval.h"
#include "opcode.h"

#if PY_VERSION_HEX < 0x030E0000 || PY_VERSION_HEX >= 0x030F0000
#error "this table describes CPython 3.14"
#endif

struct ember_layout_entry { const char *name; size_t value; };

#define FIELD(type, field) { #type "." #field, offsetof(type, field) }

const struct ember_layout_entry ember_layout_3_14[] = {
    FIELD(_PyInterpreterFrame, f_executable),
    FIELD(_PyInterpreterFrame, previous),
    FIELD(_PyInterpreterFrame, f_funcobj),
    FIELD(_PyInterpreterFrame, f_globals),
    FIELD(_PyInterpreterFrame, f_builtins),
    FIELD(_PyInterpreterFrame, f_locals),
    FIELD(_PyInterpreterFrame, frame_obj),
    FIELD(_PyInterpreterFrame, instr_ptr),
    FIELD(_PyInterpreterFrame, stackpointer),
    FIELD(_PyInterpreterFrame, return_offset),
    FIELD(_PyInterpreterFrame, owner),
    FIELD(_PyInterpreterFrame, localsplus),
    { "PY_CODE_EVENT_CREATE", PY_CODE_EVENT_CREATE },
    { "PY_CODE_EVENT_DESTROY", PY_CODE_EVENT_DESTROY },
    FIELD(PyCodeObject, co_code_adaptive),
    FIELD(PyCodeObject, co_consts),
    FIELD(PyCodeObject, co_names),
    FIELD(PyCodeObject, co_localsplusnames),
    FIELD(PyCodeObject, co_flags),
    FIELD(PyCodeObject, co_linetable),
    FIELD(PyCodeObject, co_firstlineno),
    FIELD(PyCodeObject, co_filename),
    FIELD(PyCodeObject, co_name),
    FIELD(PyCodeObject, co_qualname),
    FIELD(PyCodeObject, _co_instrumentation_version),
    FIELD(PyCodeObject, _co_monitoring),
    FIELD(PyThreadState, eval_breaker),
    { "_PY_EVAL_EVENTS_MASK", _PY_EVAL_EVENTS_MASK },
    { "NB_OPARG_LAST", NB_OPARG_LAST },
    { "NB_POWER", NB_POWER },
    { "NB_TRUE_DIVIDE", NB_TRUE_DIVIDE },
    { "NB_INPLACE_POWER", NB_INPLACE_POWER },
    { "NB_INPLACE_TRUE_DIVIDE", NB_INPLACE_TRUE_DIVIDE },
    { "sizeof(_PyStackRef)", sizeof(_PyStackRef) },
    { "Py_TAG_BITS", Py_TAG_BITS },
    { "Py_TAG_REFCNT", Py_TAG_REFCNT },
    { "FRAME_OWNED_BY_GENERATOR", FRAME_OWNED_BY_GENERATOR },
    { "FRAME_OWNED_BY_CSTACK", FRAME_OWNED_BY_CSTACK },
    { "FRAME_OWNED_BY_INTERPRETER", FRAME_OWNED_BY_INTERPRETER },
    { NULL, 0 },
};
