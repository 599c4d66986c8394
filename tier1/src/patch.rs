//! Writing a hole's value into copied stencil code: the bit-level encoding of
//! every [`RelocKind`] on both targets, with range checks. A value that the
//! field cannot hold is an error ([`PatchError::OutOfRange`]), never a
//! silently truncated patch; the caller then routes the reference through a
//! [`x86_64_trampoline`] / [`aarch64_trampoline`] or a GOT slot it places
//! within reach.
//!
//! # What `value` is
//!
//! [`apply`] encodes an address into a field; the caller computes that
//! address from the [`Hole`](ember_stencils::Hole):
//!
//! * For every kind except the GOT ones, `value = S + A`: `S` is what the
//!   hole's `HoleValue` resolves to (the oparg, an operand, the next
//!   stencil's address, `code_base` for `Code`, `data_base` for `Data`, the
//!   symbol's address, ...) and `A` is `hole.addend`, added with wrapping
//!   arithmetic. PC-relative kinds subtract the field's address themselves;
//!   their addend already holds the bias (`-4` for x86-64 rel32).
//! * For the GOT kinds ([`is_got`]: `X86_64_GOTPCREL`,
//!   `Aarch64_ADR_GOT_PAGE`, `Aarch64_LD64_GOT_LO12_NC`), the instruction
//!   loads the target's address from memory: the caller puts `S` in an
//!   8-byte slot ([`got_slot`]) within reach of the code, and passes
//!   `value = slot_address + A` (stencil-build guarantees `A == 0` on
//!   aarch64; on x86-64 it is the displacement's bias).
//!
//! `field_address` is where the field will be at run time (for aarch64, the
//! instruction's address). The buffer may live anywhere; only the run-time
//! addresses matter.
//!
//! # Trampolines
//!
//! When a 32-bit (x86-64) or 26-bit (aarch64 `b`/`bl`) PC-relative call or
//! jump cannot reach its target, place a trampoline within reach and patch
//! the hole with the trampoline's address instead of the target's (keeping
//! the addend: `value = trampoline + A`). The trampoline jumps anywhere.
//!
//! This is the one file of tier 1 that knows instruction encodings.

use std::fmt;

use ember_stencils::RelocKind;

/// Why a field could not be patched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The value does not fit the field (or a PC-relative distance is too
    /// far): use a trampoline or a closer GOT slot.
    OutOfRange { kind: RelocKind, field_address: u64, value: u64 },
    /// The value (or the distance) is not a multiple of the field's scale.
    Misaligned { kind: RelocKind, field_address: u64, value: u64 },
    /// The field does not lie within the buffer.
    OutOfBounds { kind: RelocKind, field_offset: usize, len: usize },
    /// The aarch64 instruction at the field is not one this kind patches (a
    /// wrong offset or kind: patching it would corrupt the code).
    UnexpectedInstruction { kind: RelocKind, field_offset: usize, insn: u32 },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PatchError::OutOfRange { kind, field_address, value } => {
                write!(f, "{kind:?} at {field_address:#x} cannot reach or hold {value:#x}")
            }
            PatchError::Misaligned { kind, field_address, value } => {
                write!(f, "{kind:?} at {field_address:#x}: {value:#x} is not suitably aligned")
            }
            PatchError::OutOfBounds { kind, field_offset, len } => {
                write!(f, "{kind:?} at offset {field_offset} lies outside a buffer of {len} bytes")
            }
            PatchError::UnexpectedInstruction { kind, field_offset, insn } => {
                write!(f, "{kind:?} at offset {field_offset}: instruction {insn:#010x} is not what it patches")
            }
        }
    }
}

impl std::error::Error for PatchError {}

/// Whether `kind` reads its target's address from a GOT slot (see the
/// module documentation for what `value` is then).
pub fn is_got(kind: RelocKind) -> bool {
    matches!(
        kind,
        RelocKind::X86_64_GOTPCREL | RelocKind::Aarch64_ADR_GOT_PAGE | RelocKind::Aarch64_LD64_GOT_LO12_NC
    )
}

/// Whether `kind` is a PC-relative field of a call or jump that a
/// [`trampoline`] can stand in for when the target is out of reach (x86-64
/// rel32, aarch64 `b`/`bl`); the caller checks that the hole names a symbol.
pub fn is_branch(kind: RelocKind) -> bool {
    matches!(kind, RelocKind::X86_64_PC32 | RelocKind::Aarch64_BRANCH26)
}

/// The distances (`value - field_address`, after page rounding for `adrp`)
/// a PC-relative kind can encode, inclusive; `None` for absolute kinds. For
/// placing trampolines and GOT slots.
pub fn pc_relative_reach(kind: RelocKind) -> Option<(i64, i64)> {
    match kind {
        RelocKind::X86_64_PC32 | RelocKind::X86_64_GOTPCREL => Some((i32::MIN as i64, i32::MAX as i64)),
        RelocKind::Aarch64_BRANCH26 => Some((-(1 << 27), (1 << 27) - 4)),
        RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => Some((-(1 << 32), (1 << 32) - 4096)),
        _ => None,
    }
}

/// Patches the field at `buf[field_offset..]` for a hole of `kind` so that
/// at run time, with the field at `field_address`, it refers to `value`.
pub fn apply(
    buf: &mut [u8],
    field_offset: usize,
    kind: RelocKind,
    field_address: u64,
    value: u64,
) -> Result<(), PatchError> {
    apply_impl::<true>(buf, field_offset, kind, field_address, value)
}

/// [`apply`] without re-checking that an aarch64 field holds an instruction
/// of the class `kind` patches: for fields [`check_field`] accepted once
/// (the stencils' code never changes). Range, alignment and bounds checks
/// stay.
#[inline]
pub fn apply_checked_field(
    buf: &mut [u8],
    field_offset: usize,
    kind: RelocKind,
    field_address: u64,
    value: u64,
) -> Result<(), PatchError> {
    apply_impl::<false>(buf, field_offset, kind, field_address, value)
}

/// Whether `code` has a field of `kind` at `field_offset` that [`apply`]
/// can patch: it lies within `code` and, on aarch64, is an instruction of
/// the class `kind` rewrites.
pub fn check_field(code: &[u8], field_offset: usize, kind: RelocKind) -> Result<(), PatchError> {
    let len = code.len();
    let size = match kind {
        RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => 8,
        _ => 4,
    };
    let field = field_offset
        .checked_add(size)
        .and_then(|end| code.get(field_offset..end))
        .ok_or(PatchError::OutOfBounds { kind, field_offset, len })?;
    let Some((mask, expect)) = insn_class(kind) else {
        return Ok(());
    };
    let insn = u32::from_le_bytes(field.try_into().expect("4 bytes"));
    if insn & mask != expect {
        return Err(PatchError::UnexpectedInstruction { kind, field_offset, insn });
    }
    if let RelocKind::Aarch64_MOVW_UABS { group } = kind {
        if group > 3 || (insn >> 21) & 3 != group as u32 {
            return Err(PatchError::UnexpectedInstruction { kind, field_offset, insn });
        }
    }
    Ok(())
}

/// (mask, expected bits) of the aarch64 instructions a kind patches.
fn insn_class(kind: RelocKind) -> Option<(u32, u32)> {
    Some(match kind {
        RelocKind::Aarch64_BRANCH26 => (0x7C00_0000, 0x1400_0000),
        RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => (0x9F00_0000, 0x9000_0000),
        RelocKind::Aarch64_ADD_ABS_LO12_NC => (0x7FC0_0000, 0x1100_0000),
        RelocKind::Aarch64_LDST_ABS_LO12_NC { .. } | RelocKind::Aarch64_LD64_GOT_LO12_NC => (0x3B00_0000, 0x3900_0000),
        RelocKind::Aarch64_MOVW_UABS { .. } => (0x1F80_0000, 0x1280_0000),
        _ => return None,
    })
}

#[inline(always)]
fn apply_impl<const CHECK: bool>(
    buf: &mut [u8],
    field_offset: usize,
    kind: RelocKind,
    field_address: u64,
    value: u64,
) -> Result<(), PatchError> {
    let out_of_range = PatchError::OutOfRange { kind, field_address, value };
    let misaligned = PatchError::Misaligned { kind, field_address, value };
    // PC-relative distance, as a signed number (addresses wrap like the CPU's).
    let distance = value.wrapping_sub(field_address) as i64;
    match kind {
        RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => write_bytes(buf, field_offset, kind, &value.to_le_bytes()),
        RelocKind::X86_64_32 => {
            let v = u32::try_from(value).map_err(|_| out_of_range)?;
            write_bytes(buf, field_offset, kind, &v.to_le_bytes())
        }
        RelocKind::X86_64_32S => {
            let v = i32::try_from(value as i64).map_err(|_| out_of_range)?;
            write_bytes(buf, field_offset, kind, &v.to_le_bytes())
        }
        RelocKind::X86_64_PC32 | RelocKind::X86_64_GOTPCREL => {
            let v = i32::try_from(distance).map_err(|_| out_of_range)?;
            write_bytes(buf, field_offset, kind, &v.to_le_bytes())
        }
        RelocKind::Aarch64_BRANCH26 => {
            // b / bl: imm26 in bits 0..26, in words.
            patch_insn::<CHECK>(buf, field_offset, kind, 0x7C00_0000, 0x1400_0000, |insn| {
                if distance & 3 != 0 {
                    return Err(misaligned);
                }
                if !(-(1 << 27)..(1 << 27)).contains(&distance) {
                    return Err(out_of_range);
                }
                let imm26 = ((distance >> 2) as u32) & 0x03FF_FFFF;
                Ok((insn & !0x03FF_FFFF) | imm26)
            })
        }
        RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => {
            // adrp: a 21-bit page distance, low 2 bits in immlo (29..31),
            // high 19 in immhi (5..24).
            patch_insn::<CHECK>(buf, field_offset, kind, 0x9F00_0000, 0x9000_0000, |insn| {
                let pages = ((value & !0xFFF) as i64).wrapping_sub((field_address & !0xFFF) as i64) >> 12;
                if !(-(1 << 20)..(1 << 20)).contains(&pages) {
                    return Err(out_of_range);
                }
                let imm = (pages as u32) & 0x1F_FFFF;
                let immlo = imm & 3;
                let immhi = imm >> 2;
                Ok((insn & !((3 << 29) | (0x7_FFFF << 5))) | (immlo << 29) | (immhi << 5))
            })
        }
        RelocKind::Aarch64_ADD_ABS_LO12_NC => {
            // add (immediate), 32- or 64-bit, no shift: imm12 in bits 10..22.
            patch_insn::<CHECK>(buf, field_offset, kind, 0x7FC0_0000, 0x1100_0000, |insn| {
                Ok(set_imm12(insn, (value & 0xFFF) as u32))
            })
        }
        RelocKind::Aarch64_LDST_ABS_LO12_NC { shift } => patch_ldst::<CHECK>(buf, field_offset, kind, shift, value, misaligned),
        RelocKind::Aarch64_LD64_GOT_LO12_NC => patch_ldst::<CHECK>(buf, field_offset, kind, 3, value, misaligned),
        RelocKind::Aarch64_MOVW_UABS { group } => {
            // movz / movk / movn (wide immediate): imm16 in bits 5..21, and
            // the instruction's own shift (hw, bits 21..23) must be the group.
            patch_insn::<CHECK>(buf, field_offset, kind, 0x1F80_0000, 0x1280_0000, |insn| {
                let hw = (insn >> 21) & 3;
                if CHECK && (group > 3 || hw != group as u32) {
                    return Err(PatchError::UnexpectedInstruction { kind, field_offset, insn });
                }
                let imm16 = ((value >> (16 * group as u32)) & 0xFFFF) as u32;
                Ok((insn & !(0xFFFF << 5)) | (imm16 << 5))
            })
        }
    }
}

#[inline(always)]
fn write_bytes(buf: &mut [u8], offset: usize, kind: RelocKind, bytes: &[u8]) -> Result<(), PatchError> {
    let len = buf.len();
    let field = offset
        .checked_add(bytes.len())
        .and_then(|end| buf.get_mut(offset..end))
        .ok_or(PatchError::OutOfBounds { kind, field_offset: offset, len })?;
    field.copy_from_slice(bytes);
    Ok(())
}

/// Rewrites the 32-bit instruction at `offset` after checking that it is of
/// the expected class (`insn & mask == expect`).
#[inline(always)]
fn patch_insn<const CHECK: bool>(
    buf: &mut [u8],
    offset: usize,
    kind: RelocKind,
    mask: u32,
    expect: u32,
    f: impl FnOnce(u32) -> Result<u32, PatchError>,
) -> Result<(), PatchError> {
    let len = buf.len();
    let field = offset
        .checked_add(4)
        .and_then(|end| buf.get_mut(offset..end))
        .ok_or(PatchError::OutOfBounds { kind, field_offset: offset, len })?;
    let insn = u32::from_le_bytes(field.try_into().expect("4 bytes"));
    if CHECK && insn & mask != expect {
        return Err(PatchError::UnexpectedInstruction { kind, field_offset: offset, insn });
    }
    field.copy_from_slice(&f(insn)?.to_le_bytes());
    Ok(())
}

fn set_imm12(insn: u32, imm12: u32) -> u32 {
    (insn & !(0xFFF << 10)) | ((imm12 & 0xFFF) << 10)
}

/// Load/store (unsigned immediate): the low 12 bits of the address, scaled
/// by the access size `1 << shift`, in imm12.
#[inline(always)]
fn patch_ldst<const CHECK: bool>(
    buf: &mut [u8],
    offset: usize,
    kind: RelocKind,
    shift: u8,
    value: u64,
    misaligned: PatchError,
) -> Result<(), PatchError> {
    // Bits 24..26 = 0b01 and 27..30 = 0b111 / bit 26 V (SIMD) either way:
    // the "load/store register (unsigned immediate)" class.
    patch_insn::<CHECK>(buf, offset, kind, 0x3B00_0000, 0x3900_0000, |insn| {
        let lo12 = (value & 0xFFF) as u32;
        if shift > 4 || lo12 & ((1 << shift) - 1) != 0 {
            return Err(misaligned);
        }
        Ok(set_imm12(insn, lo12 >> shift))
    })
}

/// A field kind reduced to what patching it does, for [`apply_op`]: the
/// compiler's per-hole fast path (precomputed once per stencil hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// 8 bytes, the value (x86-64 `R_X86_64_64`, aarch64 `ABS64`).
    Abs64,
    /// 4 bytes, the value zero-extended (`R_X86_64_32`).
    Abs32,
    /// 4 bytes, the value sign-extended (`R_X86_64_32S`).
    Abs32S,
    /// 4 bytes, the distance from the field (x86-64 PC32 and GOTPCREL).
    Rel32,
    /// aarch64 `b`/`bl`.
    Branch26,
    /// aarch64 `adrp` (of a page or a GOT slot's page).
    Adrp,
    /// aarch64 `add` low 12 bits.
    AddLo12,
    /// aarch64 load/store low 12 bits, scaled by 1 << n (`LdstLo12(3)`: GOT slot loads).
    LdstLo12(u8),
    /// aarch64 `movz`/`movk` of 16-bit group n.
    Movw(u8),
}

impl Op {
    pub fn of(kind: RelocKind) -> Op {
        match kind {
            RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => Op::Abs64,
            RelocKind::X86_64_32 => Op::Abs32,
            RelocKind::X86_64_32S => Op::Abs32S,
            RelocKind::X86_64_PC32 | RelocKind::X86_64_GOTPCREL => Op::Rel32,
            RelocKind::Aarch64_BRANCH26 => Op::Branch26,
            RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => Op::Adrp,
            RelocKind::Aarch64_ADD_ABS_LO12_NC => Op::AddLo12,
            RelocKind::Aarch64_LDST_ABS_LO12_NC { shift } => Op::LdstLo12(shift),
            RelocKind::Aarch64_LD64_GOT_LO12_NC => Op::LdstLo12(3),
            RelocKind::Aarch64_MOVW_UABS { group } => Op::Movw(group),
        }
    }

    /// Bytes of the field.
    pub fn size(self) -> usize {
        match self {
            Op::Abs64 => 8,
            _ => 4,
        }
    }
}

/// [`apply`] for a field that [`check_field`] accepted for the kind `op`
/// stands for, at `field` (`op.size()` bytes, writable): false when the
/// value does not fit (or is misaligned), the field then unchanged —
/// [`apply`] says why.
///
/// # Safety
/// `field` points to `op.size()` bytes that may be read and written.
#[inline(always)]
pub unsafe fn apply_op(field: *mut u8, op: Op, field_address: u64, value: u64) -> bool {
    let distance = value.wrapping_sub(field_address) as i64;
    let rd = || u32::from_le(core::ptr::read_unaligned(field as *const u32));
    let wr = |insn: u32| core::ptr::write_unaligned(field as *mut u32, insn.to_le());
    match op {
        Op::Abs64 => core::ptr::write_unaligned(field as *mut u64, value.to_le()),
        Op::Rel32 => {
            if distance != distance as i32 as i64 {
                return false;
            }
            core::ptr::write_unaligned(field as *mut i32, (distance as i32).to_le());
        }
        Op::Abs32 => {
            if value > u32::MAX as u64 {
                return false;
            }
            core::ptr::write_unaligned(field as *mut u32, (value as u32).to_le());
        }
        Op::Abs32S => {
            let v = value as i64;
            if v != v as i32 as i64 {
                return false;
            }
            core::ptr::write_unaligned(field as *mut i32, (v as i32).to_le());
        }
        Op::Movw(group) => {
            let imm16 = ((value >> (16 * (group & 3) as u32)) & 0xFFFF) as u32;
            wr((rd() & !(0xFFFF << 5)) | (imm16 << 5));
        }
        Op::Branch26 => {
            if distance & 3 != 0 || !(-(1 << 27)..(1 << 27)).contains(&distance) {
                return false;
            }
            wr((rd() & !0x03FF_FFFF) | (((distance >> 2) as u32) & 0x03FF_FFFF));
        }
        Op::Adrp => {
            let pages = ((value & !0xFFF) as i64).wrapping_sub((field_address & !0xFFF) as i64) >> 12;
            if !(-(1 << 20)..(1 << 20)).contains(&pages) {
                return false;
            }
            let imm = (pages as u32) & 0x1F_FFFF;
            wr((rd() & !((3 << 29) | (0x7_FFFF << 5))) | ((imm & 3) << 29) | ((imm >> 2) << 5));
        }
        Op::AddLo12 => wr(set_imm12(rd(), (value & 0xFFF) as u32)),
        Op::LdstLo12(shift) => {
            let lo12 = (value & 0xFFF) as u32;
            if shift > 4 || lo12 & ((1 << shift) - 1) != 0 {
                return false;
            }
            wr(set_imm12(rd(), lo12 >> shift));
        }
    }
    true
}

/// The 8 bytes of a GOT slot holding `target` (place it 8-byte aligned).
pub fn got_slot(target: u64) -> [u8; 8] {
    target.to_le_bytes()
}

pub const X86_64_TRAMPOLINE_SIZE: usize = 14;

/// `jmp *0(%rip); .quad target`: an absolute jump that clobbers no register
/// (so it also serves calls: the return address is the caller's). 14 bytes,
/// no alignment needed.
pub fn x86_64_trampoline(target: u64) -> [u8; X86_64_TRAMPOLINE_SIZE] {
    let mut t = [0u8; X86_64_TRAMPOLINE_SIZE];
    t[..6].copy_from_slice(&[0xFF, 0x25, 0, 0, 0, 0]);
    t[6..].copy_from_slice(&target.to_le_bytes());
    t
}

pub const AARCH64_TRAMPOLINE_SIZE: usize = 16;

/// `ldr x16, #8; br x16; .quad target`: an absolute jump through x16 (IP0),
/// the register AAPCS64 reserves for veneers — also outside
/// `preserve_none`'s argument registers, so stencils never keep a value in
/// it across a branch. `bl` to the trampoline keeps the right return
/// address in x30. 16 bytes; place it 8-byte aligned so the literal is
/// naturally aligned.
pub fn aarch64_trampoline(target: u64) -> [u8; AARCH64_TRAMPOLINE_SIZE] {
    const LDR_X16_PC_PLUS_8: u32 = 0x5800_0050; // ldr x16, #8 (imm19 = 2 words)
    const BR_X16: u32 = 0xD61F_0200;
    let mut t = [0u8; AARCH64_TRAMPOLINE_SIZE];
    t[..4].copy_from_slice(&LDR_X16_PC_PLUS_8.to_le_bytes());
    t[4..8].copy_from_slice(&BR_X16.to_le_bytes());
    t[8..].copy_from_slice(&target.to_le_bytes());
    t
}

/// The host's trampoline size ([`trampoline`]).
#[cfg(target_arch = "x86_64")]
pub const TRAMPOLINE_SIZE: usize = X86_64_TRAMPOLINE_SIZE;
#[cfg(target_arch = "aarch64")]
pub const TRAMPOLINE_SIZE: usize = AARCH64_TRAMPOLINE_SIZE;

/// The host's trampoline: [`x86_64_trampoline`] or [`aarch64_trampoline`].
#[cfg(target_arch = "x86_64")]
pub fn trampoline(target: u64) -> [u8; TRAMPOLINE_SIZE] {
    x86_64_trampoline(target)
}
#[cfg(target_arch = "aarch64")]
pub fn trampoline(target: u64) -> [u8; TRAMPOLINE_SIZE] {
    aarch64_trampoline(target)
}
