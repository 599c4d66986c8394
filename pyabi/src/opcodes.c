/* CPython 3.14's opcode metadata, compiled from its own header under Ember's
 * names (the originals are not exported by libpython). */
#include <Python.h>

#define _PyOpcode_num_popped ember_opcode_num_popped
#define _PyOpcode_num_pushed ember_opcode_num_pushed
#define _PyOpcode_opcode_metadata ember_opcode_metadata
#define _PyOpcode_macro_expansion ember_opcode_macro_expansion
#define _PyOpcode_OpName ember_opcode_name
#define _PyOpcode_Caches ember_opcode_caches
#define _PyOpcode_Deopt ember_opcode_deopt
#define _PyOpcode_PseudoTargets ember_opcode_pseudo_targets
#define NEED_OPCODE_METADATA 1
#include "pycore_opcode_metadata.h"
