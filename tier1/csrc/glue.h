/* What tier 1's run-time helpers (csrc/*.c) share among themselves. */
#ifndef EMBER_GLUE_H
#define EMBER_GLUE_H
#include "../../stencils/c/ember_stencil.h"

/* What calls and resumptions need of the runtime's record of a code object
 * (its C prefix: runtime/src/records.rs, DirectEntry). `entry`: the compiled
 * entry at the first instruction when the evaluator would run a call there
 * without a decision, else 0. `entries`: the entry table when the evaluator
 * would enter compiled code at all, else NULL. Both valid for the
 * instrumentation version `version`. */
typedef struct {
    uint64_t entry;
    uint64_t version;
    uint64_t *calls;
    const uint64_t *entries;
    uint64_t n_entries;
    uint64_t *resumes;
} ember_direct_entry;

/* The record of `code` while Ember's evaluator is the installed one, else
 * NULL (glue.c's find_direct, out of line). */
ember_direct_entry *ember_direct_lookup(PyThreadState *tstate, PyCodeObject *code);

#endif
