//! The shapes of the generated stencil tables (see README.md for the contract).

/// How a hole's bytes are written: the relocation type clang left there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum RelocKind {
    /// 64-bit absolute (x86-64 `R_X86_64_64`).
    X86_64_64,
    /// 32-bit zero-extended absolute (`R_X86_64_32`).
    X86_64_32,
    /// 32-bit sign-extended absolute (`R_X86_64_32S`).
    X86_64_32S,
    /// 32-bit PC-relative (`R_X86_64_PC32`, `R_X86_64_PLT32`).
    X86_64_PC32,
    /// 32-bit PC-relative to a GOT slot (`GOTPCREL`, `GOTPCRELX`, `REX_GOTPCRELX`).
    X86_64_GOTPCREL,
    /// 64-bit absolute (`R_AARCH64_ABS64`).
    Aarch64_ABS64,
    /// `bl`/`b` 26-bit word offset (`CALL26`, `JUMP26`).
    Aarch64_BRANCH26,
    /// `adrp` page offset (`ADR_PREL_PG_HI21`).
    Aarch64_ADR_PREL_PG_HI21,
    /// `adrp` of a GOT slot's page (`ADR_GOT_PAGE`).
    Aarch64_ADR_GOT_PAGE,
    /// `add` low 12 bits (`ADD_ABS_LO12_NC`).
    Aarch64_ADD_ABS_LO12_NC,
    /// load/store low 12 bits scaled by access size 1 << shift (`LDST{8,16,32,64,128}_ABS_LO12_NC`).
    Aarch64_LDST_ABS_LO12_NC { shift: u8 },
    /// `ldr` of a GOT slot, low 12 bits (`LD64_GOT_LO12_NC`).
    Aarch64_LD64_GOT_LO12_NC,
    /// `movz`/`movk` 16-bit group `group` (0..=3) of an absolute address (`MOVW_UABS_G0..G3`, `_NC` or not).
    Aarch64_MOVW_UABS { group: u8 },
}

/// What a hole's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoleValue {
    Oparg,
    Operand0,
    Operand1,
    ThisInstr,
    /// Where the interpreter must dispatch to run this instruction: its
    /// first `EXTENDED_ARG` prefix if it has any, else `ThisInstr`.
    DispatchInstr,
    NextInstr,
    /// The address of this instruction's site cache: memory of its own
    /// that its code may read and write (tier 1 allocates it, zeroed).
    Site,
    Continue,
    Jump,
    Error,
    Deopt,
    /// Start of this stencil's copied code (for intra-stencil references).
    Code,
    /// Start of this stencil's copied data.
    Data,
    /// Start of this stencil's cold part (`Stencil::cold`), placed apart
    /// from the code that runs on the common path.
    Cold,
    /// An external symbol, by index into `SYMBOLS`.
    Symbol(u16),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hole {
    /// Byte offset of the patched field in the code (or data) blob.
    pub offset: u32,
    pub kind: RelocKind,
    pub value: HoleValue,
    /// Added to the value (as the ELF addend; PC-relative kinds include their bias).
    pub addend: i64,
}

#[derive(Debug)]
pub struct Stencil {
    pub name: &'static str,
    pub code: &'static [u8],
    pub code_holes: &'static [Hole],
    pub data: &'static [u8],
    pub data_holes: &'static [Hole],
    /// Alignment (a power of two, at least 1) that the address where `data`
    /// is placed must have: the largest alignment of the read-only sections
    /// copied into it (SSE constants need 16).
    pub data_align: u32,
    /// Offset of a final jump to `Continue` that may be dropped when the next
    /// stencil follows directly (the code is then `code[..offset]`).
    pub trailing_continue: Option<u32>,
    /// The paths taken rarely (guard failures, errors, deallocation, slow
    /// calls), moved out of `code` so that compiled code on the common path
    /// is dense: tier 1 places every stencil's cold part after all the code
    /// of a function. `code` reaches it through `Cold` holes, and it
    /// reaches `code` through `Code` holes. Empty when not split.
    pub cold: &'static [u8],
    pub cold_holes: &'static [Hole],
    /// `code` or `cold` has a `Site` hole (found when the tables are
    /// generated: the compiler asks for every opcode at start-up).
    pub uses_site: bool,
}
