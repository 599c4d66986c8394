//! Ember's tier-1 copy-and-patch compiler: stencil selection, layout and
//! patching (`compile`), the stencils prepared for it once per process
//! (`program`), per-opcode operands and jumps (`operands`), the patcher
//! (`patch`), executable memory (`jitmem`), the C run-time protocol
//! (`glue`), and disassembly (`disasm`).

pub mod compile;
pub mod disasm;
pub mod glue;
pub mod jitmem;
pub mod operands;
pub mod patch;
pub mod program;
