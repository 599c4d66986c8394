//! Everything stencil-build knows about each target, in one place: the triple,
//! the target-specific clang flags, the system headers a cross build needs,
//! the ELF relocation types and how they map to [`RelocKind`], the padding
//! between copied code sections, and the shape of a trailing jump to
//! `_EMBER_CONTINUE`. The rest of the crate is target-independent.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use object::elf;

use crate::types::{Hole, HoleValue, RelocKind};

/// A target the stencils are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    X86_64,
    Aarch64,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.triple())
    }
}

impl Target {
    pub const ALL: [Target; 2] = [Target::X86_64, Target::Aarch64];

    /// The triple handed to clang (`--target=`), also Debian's multiarch name.
    pub fn triple(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64-linux-gnu",
            Target::Aarch64 => "aarch64-linux-gnu",
        }
    }

    /// Accepts a triple (`x86_64-linux-gnu`, `aarch64-unknown-linux-gnu`), a
    /// Rust `target_arch` (`x86_64`, `aarch64`) or a Debian architecture
    /// (`amd64`, `arm64`).
    pub fn from_name(name: &str) -> Option<Target> {
        let arch = name.split('-').next().unwrap_or(name);
        match arch {
            "x86_64" | "amd64" | "x86-64" => Some(Target::X86_64),
            "aarch64" | "arm64" => Some(Target::Aarch64),
            _ => None,
        }
    }

    /// The target stencil-build itself runs on, if it is one of ours.
    pub fn host() -> Option<Target> {
        if cfg!(target_arch = "x86_64") {
            Some(Target::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Target::Aarch64)
        } else {
            None
        }
    }

    /// The architecture field of this target's object files.
    pub(crate) fn object_architecture(self) -> object::Architecture {
        match self {
            Target::X86_64 => object::Architecture::X86_64,
            Target::Aarch64 => object::Architecture::Aarch64,
        }
    }

    /// Target-specific clang flags (see README.md for why each is there).
    pub(crate) fn clang_flags(self) -> &'static [&'static str] {
        match self {
            // Medium code model with a large-data threshold of 0: every data
            // address (CPython's objects and the value holes alike) becomes a
            // 64-bit `movabs` immediate (R_X86_64_64), which reaches anywhere;
            // code stays small, so calls and jumps are rel32.
            Target::X86_64 => &[
                "-mcmodel=medium",
                "-mlarge-data-threshold=0",
                "-fcf-protection=none",
            ],
            // Large code model: data addresses are movz/movk sequences
            // (MOVW_UABS_G0..G3). Outline atomics would call libgcc helpers
            // (__aarch64_ldadd4_acq_rel, ...) that tier 1 cannot resolve.
            Target::Aarch64 => &[
                "-mcmodel=large",
                "-mno-outline-atomics",
                "-mbranch-protection=none",
            ],
        }
    }

    pub(crate) fn elf_machine(self) -> elf::Machine {
        match self {
            Target::X86_64 => elf::EM_X86_64,
            Target::Aarch64 => elf::EM_AARCH64,
        }
    }

    /// The ELF name of a relocation type, for error messages.
    pub(crate) fn reloc_name(self, r_type: u32) -> String {
        elf::machine_names(self.elf_machine())
            .r
            .name(elf::RelocationType(r_type))
            .map_or_else(|| format!("relocation type {r_type}"), str::to_owned)
    }

    /// The [`RelocKind`] of an ELF relocation type, or why it is not supported.
    pub(crate) fn reloc_kind(self, r_type: u32) -> Result<RelocKind, String> {
        let t = elf::RelocationType(r_type);
        let kind = match self {
            Target::X86_64 => match t {
                elf::R_X86_64_64 => Some(RelocKind::X86_64_64),
                elf::R_X86_64_32 => Some(RelocKind::X86_64_32),
                elf::R_X86_64_32S => Some(RelocKind::X86_64_32S),
                elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 => Some(RelocKind::X86_64_PC32),
                elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX => {
                    Some(RelocKind::X86_64_GOTPCREL)
                }
                _ => None,
            },
            Target::Aarch64 => match t {
                elf::R_AARCH64_ABS64 => Some(RelocKind::Aarch64_ABS64),
                elf::R_AARCH64_CALL26 | elf::R_AARCH64_JUMP26 => Some(RelocKind::Aarch64_BRANCH26),
                elf::R_AARCH64_ADR_PREL_PG_HI21 => Some(RelocKind::Aarch64_ADR_PREL_PG_HI21),
                elf::R_AARCH64_ADR_GOT_PAGE => Some(RelocKind::Aarch64_ADR_GOT_PAGE),
                elf::R_AARCH64_ADD_ABS_LO12_NC => Some(RelocKind::Aarch64_ADD_ABS_LO12_NC),
                elf::R_AARCH64_LDST8_ABS_LO12_NC => Some(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 0 }),
                elf::R_AARCH64_LDST16_ABS_LO12_NC => Some(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 1 }),
                elf::R_AARCH64_LDST32_ABS_LO12_NC => Some(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 2 }),
                elf::R_AARCH64_LDST64_ABS_LO12_NC => Some(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 3 }),
                elf::R_AARCH64_LDST128_ABS_LO12_NC => Some(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 4 }),
                elf::R_AARCH64_LD64_GOT_LO12_NC => Some(RelocKind::Aarch64_LD64_GOT_LO12_NC),
                // Only the unchecked groups (and G3, which holds whatever is
                // left): the checked G0..G2 promise that the value fits in
                // 16/32/48 bits, which no address at run time does.
                elf::R_AARCH64_MOVW_UABS_G0_NC => Some(RelocKind::Aarch64_MOVW_UABS { group: 0 }),
                elf::R_AARCH64_MOVW_UABS_G1_NC => Some(RelocKind::Aarch64_MOVW_UABS { group: 1 }),
                elf::R_AARCH64_MOVW_UABS_G2_NC => Some(RelocKind::Aarch64_MOVW_UABS { group: 2 }),
                elf::R_AARCH64_MOVW_UABS_G3 => Some(RelocKind::Aarch64_MOVW_UABS { group: 3 }),
                _ => None,
            },
        };
        kind.ok_or_else(|| format!("unsupported relocation {} ({})", self.reloc_name(r_type), self))
    }

    /// Whether a kind reads the target's address from a GOT slot.
    pub(crate) fn is_got(kind: RelocKind) -> bool {
        matches!(
            kind,
            RelocKind::X86_64_GOTPCREL | RelocKind::Aarch64_ADR_GOT_PAGE | RelocKind::Aarch64_LD64_GOT_LO12_NC
        )
    }

    /// Whether the addend of a GOT relocation can be expressed. Tier 1 fills
    /// a slot with the symbol's address and patches `slot + addend`: right on
    /// x86-64, where the addend is the PC bias of the displacement; on
    /// aarch64 the addend would have to be inside the slot, so it must be 0.
    pub(crate) fn got_addend_ok(self, addend: i64) -> bool {
        match self {
            Target::X86_64 => true,
            Target::Aarch64 => addend == 0,
        }
    }

    /// Filler between code sections copied into one stencil (never executed).
    pub(crate) fn code_padding(self) -> u8 {
        match self {
            Target::X86_64 => 0xCC, // int3
            Target::Aarch64 => 0x00, // 0x00000000 is `udf #0`
        }
    }

    /// Where code ends with a conditional branch followed by an unconditional
    /// one (x86-64 `jcc rel32; jmp rel32`): the offsets of their
    /// displacement fields. clang often ends `if (c) JUMP(); CONTINUE();`
    /// with `jcc Continue; jmp Jump`; with the condition inverted and the
    /// targets swapped, the final jump is to Continue, which tier 1 drops
    /// for the next stencil to follow. None on aarch64 (not done there).
    pub(crate) fn tail_branch_pair(self, code: &[u8]) -> Option<(u32, u32)> {
        match self {
            Target::X86_64 => {
                let jmp = code.len().checked_sub(5)?;
                let jcc = jmp.checked_sub(6)?;
                (code[jmp] == 0xE9 && code[jcc] == 0x0F && code[jcc + 1] & 0xF0 == 0x80)
                    .then_some((jcc as u32 + 2, jmp as u32 + 1))
            }
            Target::Aarch64 => None,
        }
    }

    /// Inverts the condition of the conditional branch whose displacement
    /// field is at `field` (one of [`Target::tail_branch_pair`]).
    pub(crate) fn invert_branch(self, code: &mut [u8], field: u32) {
        match self {
            // x86 condition codes come in pairs that differ in the low bit.
            Target::X86_64 => code[field as usize - 1] ^= 1,
            Target::Aarch64 => unreachable!("no tail branch pairs on aarch64"),
        }
    }

    /// The offset of a final jump to `_EMBER_CONTINUE` that tier 1 may drop:
    /// x86-64 `jmp rel32` (E9) whose displacement is the PC32 hole; aarch64
    /// `b` (not `bl`) whose JUMP26 hole is the last instruction.
    pub(crate) fn trailing_continue(self, code: &[u8], holes: &[Hole]) -> Option<u32> {
        let (start, field, want_kind, want_addend) = match self {
            Target::X86_64 => {
                let start = code.len().checked_sub(5)?;
                if code[start] != 0xE9 {
                    return None;
                }
                (start, start + 1, RelocKind::X86_64_PC32, -4)
            }
            Target::Aarch64 => {
                let start = code.len().checked_sub(4)?;
                let insn = u32::from_le_bytes(code[start..].try_into().ok()?);
                if insn & 0xFC00_0000 != 0x1400_0000 {
                    return None;
                }
                (start, start, RelocKind::Aarch64_BRANCH26, 0)
            }
        };
        holes
            .iter()
            .any(|h| {
                h.offset as usize == field
                    && h.kind == want_kind
                    && h.value == HoleValue::Continue
                    && h.addend == want_addend
            })
            .then_some(start as u32)
    }

    /// System include directories clang needs, beyond its defaults, to
    /// compile CPython's headers for this target on this machine. Nothing
    /// for the host. For a cross target (Debian): the cross C library
    /// headers, and the target's pyconfig.h, which Debian's pyconfig.h
    /// includes as `<TRIPLE/python3.X/pyconfig.h>`. When the target's own
    /// libpython3.X-dev is not installed, a stand-in derived from the
    /// host's is written under `scratch` (see README.md: the struct layouts
    /// it determines are the same on both 64-bit little-endian targets).
    pub(crate) fn system_includes(self, python_include: &Path, scratch: &Path) -> Result<Vec<PathBuf>, String> {
        let Some(host) = Target::host() else {
            return Err(format!("stencil-build runs on an unknown host; cannot find headers for {self}"));
        };
        if host == self {
            return Ok(Vec::new());
        }
        let triple = self.triple();
        let mut dirs = Vec::new();

        // The C library: multiarch (libc6-dev:ARCH, found by clang itself)
        // or the cross package (libc6-dev-ARCH-cross, under /usr/TRIPLE).
        let multiarch_libc = Path::new("/usr/include").join(triple).join("bits/wordsize.h");
        let cross_libc = Path::new("/usr").join(triple).join("include");
        if !multiarch_libc.exists() {
            if cross_libc.join("stdio.h").exists() {
                dirs.push(cross_libc);
            } else {
                return Err(format!(
                    "no C library headers for {triple}: install libc6-dev-{}-cross (Debian)",
                    self.debian_arch()
                ));
            }
        }

        // pyconfig.h.
        let pyconfig = python_include.join("pyconfig.h");
        let dispatcher = fs::read_to_string(&pyconfig).map_err(|e| format!("{}: {e}", pyconfig.display()))?;
        if !dispatcher.contains("multiarch location for pyconfig.h") {
            return Err(format!(
                "{} is not Debian's multiarch pyconfig.h: cannot cross-compile for {triple} with it",
                pyconfig.display()
            ));
        }
        let pyver = python_include
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{}: not a python3.X include directory", python_include.display()))?;
        let real = Path::new("/usr/include").join(triple).join(pyver).join("pyconfig.h");
        if !real.exists() {
            let host_pyconfig = Path::new("/usr/include").join(host.triple()).join(pyver).join("pyconfig.h");
            let text = fs::read_to_string(&host_pyconfig).map_err(|e| format!("{}: {e}", host_pyconfig.display()))?;
            let shim_root = scratch.join("pyconfig");
            let dir = shim_root.join(triple).join(pyver);
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let shim = self.pyconfig_from(host, &text);
            let path = dir.join("pyconfig.h");
            // Rewrite only when different, so that the mtime stays put.
            if fs::read_to_string(&path).ok().as_deref() != Some(shim.as_str()) {
                fs::write(&path, shim).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            dirs.push(shim_root);
        }
        Ok(dirs)
    }

    fn debian_arch(self) -> &'static str {
        match self {
            Target::X86_64 => "amd64",
            Target::Aarch64 => "arm64",
        }
    }

    /// The macros of Debian's pyconfig.h that differ between x86-64 and
    /// aarch64: inline-assembler and SIMD availability, none of which
    /// changes a struct layout.
    fn pyconfig_from(self, host: Target, host_text: &str) -> String {
        const X86_ONLY: &[&str] = &[
            "HAVE_GCC_ASM_FOR_X64",
            "HAVE_GCC_ASM_FOR_X87",
            "_Py_HACL_CAN_COMPILE_VEC128",
            "_Py_HACL_CAN_COMPILE_VEC256",
        ];
        let mut out = format!(
            "/* Generated by stencil-build: {host}'s pyconfig.h adapted for {self}, a stand-in\n\
             \x20* until the target's libpython-dev is installed. Do not edit. */\n"
        );
        for line in host_text.lines() {
            let defined = line.strip_prefix("#define ").and_then(|rest| rest.split_whitespace().next());
            match (self, defined) {
                (Target::Aarch64, Some(name)) if X86_ONLY.contains(&name) => {
                    out.push_str(&format!("/* #undef {name} */\n"));
                }
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(offset: u32, kind: RelocKind, value: HoleValue, addend: i64) -> Hole {
        Hole { offset, kind, value, addend }
    }

    #[test]
    fn names() {
        for t in Target::ALL {
            assert_eq!(Target::from_name(t.triple()), Some(t));
        }
        assert_eq!(Target::from_name("aarch64-unknown-linux-gnu"), Some(Target::Aarch64));
        assert_eq!(Target::from_name("amd64"), Some(Target::X86_64));
        assert_eq!(Target::from_name("arm64"), Some(Target::Aarch64));
        assert_eq!(Target::from_name("riscv64"), None);
    }

    #[test]
    fn relocation_types_map_or_are_refused_by_name() {
        let x = Target::X86_64;
        assert_eq!(x.reloc_kind(elf::R_X86_64_PLT32.0), Ok(RelocKind::X86_64_PC32));
        assert_eq!(x.reloc_kind(elf::R_X86_64_REX_GOTPCRELX.0), Ok(RelocKind::X86_64_GOTPCREL));
        let e = x.reloc_kind(elf::R_X86_64_GOTTPOFF.0).unwrap_err();
        assert!(e.contains("R_X86_64_GOTTPOFF"), "{e}");
        assert!(x.reloc_kind(elf::R_X86_64_PC64.0).is_err());
        let a = Target::Aarch64;
        assert_eq!(a.reloc_kind(elf::R_AARCH64_CALL26.0), Ok(RelocKind::Aarch64_BRANCH26));
        assert_eq!(
            a.reloc_kind(elf::R_AARCH64_LDST128_ABS_LO12_NC.0),
            Ok(RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 4 })
        );
        assert_eq!(a.reloc_kind(elf::R_AARCH64_MOVW_UABS_G3.0), Ok(RelocKind::Aarch64_MOVW_UABS { group: 3 }));
        // The checked groups promise small values: refused.
        let e = a.reloc_kind(elf::R_AARCH64_MOVW_UABS_G1.0).unwrap_err();
        assert!(e.contains("R_AARCH64_MOVW_UABS_G1"), "{e}");
        assert!(a.reloc_kind(elf::R_AARCH64_CONDBR19.0).is_err());
        assert!(a.reloc_kind(elf::R_AARCH64_PREL32.0).is_err());
        // Another machine's numbers are not ours.
        assert!(a.reloc_kind(elf::R_X86_64_64.0).is_err());
    }

    #[test]
    fn tail_branch_pair_x86_64() {
        let t = Target::X86_64;
        // jne rel32; jmp rel32 at the end: the fields at 3 and 8.
        let mut code = vec![0x90, 0x0f, 0x85, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0];
        assert_eq!(t.tail_branch_pair(&code), Some((3, 8)));
        t.invert_branch(&mut code, 3);
        assert_eq!(code[2], 0x84); // je
        // Not at the end, or not a jcc/jmp pair: none.
        assert_eq!(t.tail_branch_pair(&[0x0f, 0x85, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0, 0xc3]), None);
        assert_eq!(t.tail_branch_pair(&[0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xe9, 0, 0, 0, 0]), None);
        assert_eq!(t.tail_branch_pair(&[0xe9, 0, 0, 0, 0]), None);
        assert_eq!(Target::Aarch64.tail_branch_pair(&code), None);
    }

    #[test]
    fn trailing_jump_x86_64() {
        let t = Target::X86_64;
        let code = [0x90, 0xe9, 0, 0, 0, 0];
        let cont = hole(2, RelocKind::X86_64_PC32, HoleValue::Continue, -4);
        assert_eq!(t.trailing_continue(&code, &[cont]), Some(1));
        // To another continuation, through the GOT, or not last: no.
        assert_eq!(t.trailing_continue(&code, &[hole(2, RelocKind::X86_64_PC32, HoleValue::Jump, -4)]), None);
        assert_eq!(t.trailing_continue(&[0xff, 0x25, 0, 0, 0, 0], &[hole(2, RelocKind::X86_64_GOTPCREL, HoleValue::Continue, -4)]), None);
        assert_eq!(t.trailing_continue(&[0xe9, 0, 0, 0, 0, 0xc3], &[hole(1, RelocKind::X86_64_PC32, HoleValue::Continue, -4)]), None);
        assert_eq!(t.trailing_continue(&[0xe9, 0, 0], &[]), None);
    }

    #[test]
    fn trailing_jump_aarch64() {
        let t = Target::Aarch64;
        let mut code = 0xd503_201fu32.to_le_bytes().to_vec(); // nop
        code.extend(0x1400_0000u32.to_le_bytes()); // b
        let cont = hole(4, RelocKind::Aarch64_BRANCH26, HoleValue::Continue, 0);
        assert_eq!(t.trailing_continue(&code, &[cont]), Some(4));
        // bl returns: not a tail jump.
        code[4..].copy_from_slice(&0x9400_0000u32.to_le_bytes());
        assert_eq!(t.trailing_continue(&code, &[cont]), None);
    }

    #[test]
    fn pyconfig_stand_in_drops_x86_only_macros() {
        let host = "#define HAVE_GCC_ASM_FOR_X87 1\n#define SIZEOF_LONG 8\n#define _Py_HACL_CAN_COMPILE_VEC256 1\n";
        let out = Target::Aarch64.pyconfig_from(Target::X86_64, host);
        assert!(out.contains("/* #undef HAVE_GCC_ASM_FOR_X87 */"));
        assert!(out.contains("/* #undef _Py_HACL_CAN_COMPILE_VEC256 */"));
        assert!(out.contains("#define SIZEOF_LONG 8\n"));
    }
}
