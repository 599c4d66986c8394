//! Every RelocKind on both targets, patched into a hand-assembled
//! instruction and read back by an independent decoder (iced-x86,
//! yaxpeax-arm): the decoded target or immediate must be the intended value.
//! Out-of-range values must be errors.

use ember_stencils::RelocKind;
use ember_tier1::patch::{self, PatchError};

/// A run-time address in the usual place of mmapped memory.
const BASE: u64 = 0x7f3a_1234_5000;

mod x86 {
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

    /// Decodes the one instruction in `bytes`, as placed at `ip`.
    pub fn decode(bytes: &[u8], ip: u64) -> Instruction {
        let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let insn = decoder.decode();
        assert!(!insn.is_invalid(), "invalid instruction {bytes:02x?}");
        assert_eq!(insn.len(), bytes.len(), "{bytes:02x?} is one instruction");
        insn
    }

    /// The address an instruction refers to: a branch target or a
    /// RIP-relative memory operand.
    pub fn target(insn: &Instruction) -> u64 {
        match insn.op0_kind() {
            OpKind::NearBranch64 => insn.near_branch64(),
            _ => {
                assert!(insn.is_ip_rel_memory_operand(), "{:?} has no RIP-relative operand", insn.mnemonic());
                insn.ip_rel_memory_address()
            }
        }
    }

    /// The immediate operand (sign-extended to 64 bits where the CPU does).
    pub fn immediate(insn: &Instruction) -> u64 {
        (0..insn.op_count())
            .find_map(|i| match insn.op_kind(i) {
                OpKind::Immediate64 | OpKind::Immediate32 | OpKind::Immediate32to64 => Some(insn.immediate(i)),
                _ => None,
            })
            .expect("an immediate operand")
    }

    pub fn is(insn: &Instruction, m: Mnemonic) -> bool {
        insn.mnemonic() == m
    }
}

mod arm {
    use yaxpeax_arch::{Decoder, U8Reader};
    use yaxpeax_arm::armv8::a64::{InstDecoder, Instruction, Opcode, Operand};

    pub fn decode(word: u32) -> Instruction {
        let bytes = word.to_le_bytes();
        InstDecoder::default()
            .decode(&mut U8Reader::new(&bytes))
            .unwrap_or_else(|e| panic!("{word:#010x} does not decode: {e:?}"))
    }

    pub fn opcode(insn: &Instruction) -> Opcode {
        insn.opcode
    }

    /// The PC-relative offset operand (`b`, `bl`, `adrp`, `ldr literal`).
    pub fn pc_offset(insn: &Instruction) -> i64 {
        insn.operands.iter().find_map(|o| if let Operand::PCOffset(off) = o { Some(*off) } else { None }).expect("a PC offset")
    }

    /// `add Xd, Xn, #imm`: the immediate.
    pub fn add_immediate(insn: &Instruction) -> u64 {
        insn.operands
            .iter()
            .find_map(|o| match o {
                Operand::Immediate(i) => Some(*i as u64),
                Operand::Imm64(i) => Some(*i),
                Operand::ImmShift(i, 0) => Some(*i as u64),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no immediate in {insn}"))
    }

    /// `ldr/str Rt, [Xn, #off]`: the byte offset.
    pub fn memory_offset(insn: &Instruction) -> u64 {
        insn.operands
            .iter()
            .find_map(|o| match o {
                Operand::RegPreIndex(_, off, false) => Some(*off as u64),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no [Xn, #imm] operand in {insn}"))
    }

    /// `movz/movk Xd, #imm16, lsl #shift`.
    pub fn imm_shift(insn: &Instruction) -> (u16, u8) {
        insn.operands
            .iter()
            .find_map(|o| if let Operand::ImmShift(imm, shift) = o { Some((*imm, *shift)) } else { None })
            .unwrap_or_else(|| panic!("no shifted immediate in {insn}"))
    }

    pub fn text(insn: &Instruction) -> String {
        insn.to_string()
    }
}

fn patched(bytes: &[u8], field: usize, kind: RelocKind, ip: u64, value: u64) -> Result<Vec<u8>, PatchError> {
    let mut buf = bytes.to_vec();
    patch::apply(&mut buf, field, kind, ip + field as u64, value).map(|()| buf)
}

fn words(word: u32) -> [u8; 4] {
    word.to_le_bytes()
}

fn word_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().unwrap())
}

fn assert_out_of_range<T: std::fmt::Debug>(result: Result<T, PatchError>) {
    assert!(matches!(result, Err(PatchError::OutOfRange { .. })), "expected OutOfRange, got {result:?}");
}

// ---------------------------------------------------------------- x86-64

#[test]
fn x86_64_64_movabs_immediate() {
    let movabs = [0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0]; // movabs rax, imm64
    for value in [0, 3, 0x1122_3344_5566_7788, u64::MAX, BASE] {
        let buf = patched(&movabs, 2, RelocKind::X86_64_64, BASE, value).unwrap();
        let insn = x86::decode(&buf, BASE);
        assert!(x86::is(&insn, iced_x86::Mnemonic::Mov));
        assert_eq!(x86::immediate(&insn), value);
    }
}

#[test]
fn x86_64_32_zero_extended_immediate() {
    let mov = [0xb8, 0, 0, 0, 0]; // mov eax, imm32
    for value in [0, 0x7fff_ffff, 0xdead_beef, 0xffff_ffff] {
        let buf = patched(&mov, 1, RelocKind::X86_64_32, BASE, value).unwrap();
        assert_eq!(x86::immediate(&x86::decode(&buf, BASE)) as u32 as u64, value);
    }
    assert_out_of_range(patched(&mov, 1, RelocKind::X86_64_32, BASE, 0x1_0000_0000));
    assert_out_of_range(patched(&mov, 1, RelocKind::X86_64_32, BASE, BASE));
}

#[test]
fn x86_64_32s_sign_extended_immediate() {
    let mov = [0x48, 0xc7, 0xc0, 0, 0, 0, 0]; // mov rax, simm32
    for value in [0, 0x7fff_ffff, 0xffff_ffff_8000_0000, u64::MAX] {
        let buf = patched(&mov, 3, RelocKind::X86_64_32S, BASE, value).unwrap();
        assert_eq!(x86::immediate(&x86::decode(&buf, BASE)), value);
    }
    assert_out_of_range(patched(&mov, 3, RelocKind::X86_64_32S, BASE, 0x8000_0000));
    assert_out_of_range(patched(&mov, 3, RelocKind::X86_64_32S, BASE, 0xffff_ffff));
    assert_out_of_range(patched(&mov, 3, RelocKind::X86_64_32S, BASE, 0xffff_ffff_7fff_ffff));
}

#[test]
fn x86_64_pc32_branches_and_rip_relative() {
    // (instruction, field offset): the addend is -4 (field at the end).
    let cases: [(&[u8], usize); 4] = [
        (&[0xe9, 0, 0, 0, 0], 1),             // jmp rel32
        (&[0xe8, 0, 0, 0, 0], 1),             // call rel32
        (&[0x0f, 0x85, 0, 0, 0, 0], 2),       // jne rel32
        (&[0x48, 0x8d, 0x05, 0, 0, 0, 0], 3), // lea rax, [rip+disp32]
    ];
    let field_end = |len: usize| BASE + len as u64;
    for (bytes, field) in cases {
        let reach_hi = field_end(bytes.len()) + i32::MAX as u64;
        let reach_lo = field_end(bytes.len()) - (1u64 << 31);
        for target in [BASE + 0x40, BASE - 0x1000, BASE + 0x1234_5678, reach_hi, reach_lo] {
            let buf = patched(bytes, field, RelocKind::X86_64_PC32, BASE, target.wrapping_sub(4)).unwrap();
            assert_eq!(x86::target(&x86::decode(&buf, BASE)), target, "{bytes:02x?} -> {target:#x}");
        }
        assert_out_of_range(patched(bytes, field, RelocKind::X86_64_PC32, BASE, (reach_hi + 1).wrapping_sub(4)));
        assert_out_of_range(patched(bytes, field, RelocKind::X86_64_PC32, BASE, (reach_lo - 1).wrapping_sub(4)));
        assert_out_of_range(patched(bytes, field, RelocKind::X86_64_PC32, BASE, 0x1000));
    }
}

#[test]
fn x86_64_gotpcrel_loads_from_the_slot() {
    let cases: [(&[u8], usize, iced_x86::Mnemonic); 3] = [
        (&[0xff, 0x15, 0, 0, 0, 0], 2, iced_x86::Mnemonic::Call), // call [rip+disp32]
        (&[0xff, 0x25, 0, 0, 0, 0], 2, iced_x86::Mnemonic::Jmp),  // jmp [rip+disp32]
        (&[0x48, 0x8b, 0x05, 0, 0, 0, 0], 3, iced_x86::Mnemonic::Mov), // mov rax, [rip+disp32]
    ];
    for (bytes, field, mnemonic) in cases {
        for slot in [BASE + 0x10_0000, BASE - 0x7000_0000] {
            let buf = patched(bytes, field, RelocKind::X86_64_GOTPCREL, BASE, slot.wrapping_sub(4)).unwrap();
            let insn = x86::decode(&buf, BASE);
            assert!(x86::is(&insn, mnemonic));
            assert_eq!(x86::target(&insn), slot);
        }
        assert_out_of_range(patched(bytes, field, RelocKind::X86_64_GOTPCREL, BASE, BASE + 0x1_0000_0000));
    }
}

#[test]
fn x86_64_trampoline_jumps_anywhere() {
    for target in [0x1000, BASE + 0x1_0000_0000, u64::MAX - 15] {
        let t = patch::x86_64_trampoline(target);
        assert_eq!(t.len(), patch::X86_64_TRAMPOLINE_SIZE);
        let insn = x86::decode(&t[..6], BASE);
        assert!(x86::is(&insn, iced_x86::Mnemonic::Jmp));
        // The jump reads its target from right after itself.
        assert_eq!(x86::target(&insn), BASE + 6);
        assert_eq!(u64::from_le_bytes(t[6..].try_into().unwrap()), target);
    }
}

#[test]
fn fields_outside_the_buffer_are_errors() {
    let mut buf = [0u8; 6];
    let err = patch::apply(&mut buf, 3, RelocKind::X86_64_PC32, BASE, BASE);
    assert!(matches!(err, Err(PatchError::OutOfBounds { .. })), "{err:?}");
    let err = patch::apply(&mut buf, usize::MAX, RelocKind::X86_64_64, BASE, BASE);
    assert!(matches!(err, Err(PatchError::OutOfBounds { .. })), "{err:?}");
    let err = patch::apply(&mut buf, 4, RelocKind::Aarch64_BRANCH26, BASE, BASE);
    assert!(matches!(err, Err(PatchError::OutOfBounds { .. })), "{err:?}");
    assert_eq!(buf, [0; 6], "nothing written on error");
}

// ---------------------------------------------------------------- aarch64

const B: u32 = 0x1400_0000; // b #0
const BL: u32 = 0x9400_0000; // bl #0
const ADRP_X0: u32 = 0x9000_0000; // adrp x0, #0
const ADD_X0_X0: u32 = 0x9100_0000; // add x0, x0, #0
const NOP: u32 = 0xd503_201f;

#[test]
fn aarch64_branch26() {
    let p = BASE;
    let max = p + (1 << 27) - 4;
    let min = p - (1 << 27);
    for insn in [B, BL] {
        for target in [p, p + 4, p - 4, p + 0x12_3450, max, min] {
            let buf = patched(&words(insn), 0, RelocKind::Aarch64_BRANCH26, p, target).unwrap();
            let d = arm::decode(word_of(&buf));
            let want = if insn == B { yaxpeax_arm::armv8::a64::Opcode::B } else { yaxpeax_arm::armv8::a64::Opcode::BL };
            assert_eq!(arm::opcode(&d), want);
            assert_eq!(p.wrapping_add(arm::pc_offset(&d) as u64), target, "{}", arm::text(&d));
        }
        assert_out_of_range(patched(&words(insn), 0, RelocKind::Aarch64_BRANCH26, p, max + 4));
        assert_out_of_range(patched(&words(insn), 0, RelocKind::Aarch64_BRANCH26, p, min - 4));
        assert_out_of_range(patched(&words(insn), 0, RelocKind::Aarch64_BRANCH26, p, 0x1000));
        let err = patched(&words(insn), 0, RelocKind::Aarch64_BRANCH26, p, p + 2);
        assert!(matches!(err, Err(PatchError::Misaligned { .. })), "{err:?}");
    }
}

#[test]
fn aarch64_adrp_page() {
    let page = |a: u64| a & !0xfff;
    for kind in [RelocKind::Aarch64_ADR_PREL_PG_HI21, RelocKind::Aarch64_ADR_GOT_PAGE] {
        // The instruction at the start, middle and end of its page.
        for p in [BASE, BASE + 0x7fc, BASE + 0xffc] {
            let hi = page(p) + (1 << 32) - 0x1000 + 0xfff;
            let lo = page(p) - (1 << 32);
            for target in [p, p + 0x1234_5678, p - 0x8765_4321, hi, lo] {
                let buf = patched(&words(ADRP_X0), 0, kind, p, target).unwrap();
                let d = arm::decode(word_of(&buf));
                assert_eq!(arm::opcode(&d), yaxpeax_arm::armv8::a64::Opcode::ADRP);
                assert_eq!(page(p).wrapping_add(arm::pc_offset(&d) as u64), page(target), "{}", arm::text(&d));
            }
            assert_out_of_range(patched(&words(ADRP_X0), 0, kind, p, hi + 1));
            assert_out_of_range(patched(&words(ADRP_X0), 0, kind, p, lo - 1));
            assert_out_of_range(patched(&words(ADRP_X0), 0, kind, p, 0x1000));
        }
    }
}

#[test]
fn aarch64_add_lo12() {
    for target in [BASE, BASE + 0x123, BASE + 0xfff, 0xabc] {
        let buf = patched(&words(ADD_X0_X0), 0, RelocKind::Aarch64_ADD_ABS_LO12_NC, BASE, target).unwrap();
        let d = arm::decode(word_of(&buf));
        assert_eq!(arm::add_immediate(&d), target & 0xfff, "{}", arm::text(&d));
    }
}

#[test]
fn aarch64_load_store_lo12_scaled() {
    // (instruction with Rn = x1, Rt = x0/w0/q0; access size shift)
    let cases = [
        (0x3940_0020u32, 0u8), // ldrb w0, [x1]
        (0x7940_0020, 1),      // ldrh w0, [x1]
        (0xb940_0020, 2),      // ldr w0, [x1]
        (0xf940_0020, 3),      // ldr x0, [x1]
        (0xf900_0020, 3),      // str x0, [x1]
        (0x3dc0_0020, 4),      // ldr q0, [x1]
    ];
    for (insn, shift) in cases {
        let kind = RelocKind::Aarch64_LDST_ABS_LO12_NC { shift };
        let align = 1u64 << shift;
        for target in [BASE, BASE + 0xff0, BASE + 0x7b0 + 0x10, 0x1230] {
            let target = target & !(align - 1);
            let buf = patched(&words(insn), 0, kind, BASE, target).unwrap();
            let d = arm::decode(word_of(&buf));
            assert_eq!(arm::memory_offset(&d), target & 0xfff, "{}", arm::text(&d));
        }
        if shift > 0 {
            let err = patched(&words(insn), 0, kind, BASE, BASE + 0x801);
            assert!(matches!(err, Err(PatchError::Misaligned { .. })), "{err:?}");
        }
    }
}

#[test]
fn aarch64_ld64_got_lo12() {
    let ldr = 0xf940_0000; // ldr x0, [x0]
    for slot in [BASE + 0x8, BASE + 0xff8, BASE + 0x1000] {
        let buf = patched(&words(ldr), 0, RelocKind::Aarch64_LD64_GOT_LO12_NC, BASE, slot).unwrap();
        assert_eq!(arm::memory_offset(&arm::decode(word_of(&buf))), slot & 0xfff);
    }
    let err = patched(&words(ldr), 0, RelocKind::Aarch64_LD64_GOT_LO12_NC, BASE, BASE + 4);
    assert!(matches!(err, Err(PatchError::Misaligned { .. })), "{err:?}");
}

#[test]
fn aarch64_movw_groups_rebuild_the_value() {
    // movz x9, #0, lsl #0; movk x9, #0, lsl #16/#32/#48 (as clang's large model emits).
    let seq = [0xd280_0009u32, 0xf2a0_0009, 0xf2c0_0009, 0xf2e0_0009];
    for value in [0u64, 3, 0x1122_3344_5566_7788, u64::MAX, BASE] {
        let mut rebuilt = 0u64;
        for (group, insn) in seq.iter().enumerate() {
            let kind = RelocKind::Aarch64_MOVW_UABS { group: group as u8 };
            let buf = patched(&words(*insn), 0, kind, BASE, value).unwrap();
            let d = arm::decode(word_of(&buf));
            let want = if group == 0 { yaxpeax_arm::armv8::a64::Opcode::MOVZ } else { yaxpeax_arm::armv8::a64::Opcode::MOVK };
            assert_eq!(arm::opcode(&d), want, "{}", arm::text(&d));
            let (imm, shift) = arm::imm_shift(&d);
            assert_eq!(shift as usize, 16 * group);
            // movz clears the rest, movk keeps it.
            if group == 0 {
                rebuilt = imm as u64;
            } else {
                rebuilt = (rebuilt & !(0xffff << shift)) | ((imm as u64) << shift);
            }
        }
        assert_eq!(rebuilt, value);
    }
    // A group that is not the instruction's shift is a wrong hole.
    let err = patched(&words(seq[1]), 0, RelocKind::Aarch64_MOVW_UABS { group: 0 }, BASE, 1);
    assert!(matches!(err, Err(PatchError::UnexpectedInstruction { .. })), "{err:?}");
}

#[test]
fn aarch64_abs64_is_little_endian_data() {
    let buf = patched(&[0; 8], 0, RelocKind::Aarch64_ABS64, BASE, 0x0102_0304_0506_0708).unwrap();
    assert_eq!(buf, [8, 7, 6, 5, 4, 3, 2, 1]);
}

#[test]
fn aarch64_wrong_instruction_is_refused() {
    let kinds = [
        RelocKind::Aarch64_BRANCH26,
        RelocKind::Aarch64_ADR_PREL_PG_HI21,
        RelocKind::Aarch64_ADR_GOT_PAGE,
        RelocKind::Aarch64_ADD_ABS_LO12_NC,
        RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 3 },
        RelocKind::Aarch64_LD64_GOT_LO12_NC,
        RelocKind::Aarch64_MOVW_UABS { group: 0 },
    ];
    for kind in kinds {
        let err = patched(&words(NOP), 0, kind, BASE, BASE);
        assert!(matches!(err, Err(PatchError::UnexpectedInstruction { insn: NOP, .. })), "{kind:?}: {err:?}");
    }
    // adrp is not add, b is not adrp.
    assert!(patched(&words(ADRP_X0), 0, RelocKind::Aarch64_ADD_ABS_LO12_NC, BASE, BASE).is_err());
    assert!(patched(&words(B), 0, RelocKind::Aarch64_ADR_PREL_PG_HI21, BASE, BASE).is_err());
}

#[test]
fn aarch64_trampoline_jumps_anywhere() {
    for target in [0x1000, BASE + 0x1_0000_0000, u64::MAX - 15] {
        let t = patch::aarch64_trampoline(target);
        assert_eq!(t.len(), patch::AARCH64_TRAMPOLINE_SIZE);
        let ldr = arm::decode(word_of(&t[0..4]));
        assert_eq!(arm::text(&ldr), "ldr x16, $+0x8");
        assert_eq!(arm::pc_offset(&ldr), 8, "the literal follows the two instructions");
        let br = arm::decode(word_of(&t[4..8]));
        assert_eq!(arm::text(&br), "br x16");
        assert_eq!(u64::from_le_bytes(t[8..].try_into().unwrap()), target);
    }
}

#[test]
fn reach_matches_the_range_checks() {
    let (lo, hi) = patch::pc_relative_reach(RelocKind::Aarch64_BRANCH26).unwrap();
    assert!(patched(&words(B), 0, RelocKind::Aarch64_BRANCH26, BASE, BASE.wrapping_add(hi as u64)).is_ok());
    assert!(patched(&words(B), 0, RelocKind::Aarch64_BRANCH26, BASE, BASE.wrapping_add(lo as u64)).is_ok());
    assert_out_of_range(patched(&words(B), 0, RelocKind::Aarch64_BRANCH26, BASE, BASE.wrapping_add(hi as u64 + 4)));
    let (lo, hi) = patch::pc_relative_reach(RelocKind::X86_64_PC32).unwrap();
    let jmp = [0xe9, 0, 0, 0, 0];
    let p = BASE + 1;
    assert!(patched(&jmp, 1, RelocKind::X86_64_PC32, BASE, p.wrapping_add(hi as u64)).is_ok());
    assert!(patched(&jmp, 1, RelocKind::X86_64_PC32, BASE, p.wrapping_add(lo as u64)).is_ok());
    assert_out_of_range(patched(&jmp, 1, RelocKind::X86_64_PC32, BASE, p.wrapping_add(hi as u64 + 1)));
    assert_eq!(patch::pc_relative_reach(RelocKind::X86_64_64), None);
    assert!(patch::is_got(RelocKind::X86_64_GOTPCREL) && !patch::is_got(RelocKind::X86_64_PC32));
}

// ------------------------------------------------ the compiler's fast path

/// `apply_op` (the compiler's per-hole path, for fields `check_field`
/// accepted) writes what `apply` writes, and refuses what it refuses.
#[test]
fn apply_op_matches_apply() {
    let insn_for = |kind: RelocKind| -> Vec<u8> {
        match kind {
            RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => vec![0xAA; 8],
            RelocKind::X86_64_32 | RelocKind::X86_64_32S | RelocKind::X86_64_PC32 | RelocKind::X86_64_GOTPCREL => {
                vec![0x55; 4]
            }
            RelocKind::Aarch64_BRANCH26 => words(B).to_vec(),
            RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => words(0x9000_0010).to_vec(),
            RelocKind::Aarch64_ADD_ABS_LO12_NC => words(0x9100_0210).to_vec(),
            RelocKind::Aarch64_LDST_ABS_LO12_NC { shift } => words(0x3940_0210 | ((shift as u32 & 3) << 30)).to_vec(),
            RelocKind::Aarch64_LD64_GOT_LO12_NC => words(0xF940_0210).to_vec(),
            RelocKind::Aarch64_MOVW_UABS { group } => words(0xD280_0010 | ((group as u32) << 21)).to_vec(),
        }
    };
    let kinds = [
        RelocKind::X86_64_64,
        RelocKind::X86_64_32,
        RelocKind::X86_64_32S,
        RelocKind::X86_64_PC32,
        RelocKind::X86_64_GOTPCREL,
        RelocKind::Aarch64_ABS64,
        RelocKind::Aarch64_BRANCH26,
        RelocKind::Aarch64_ADR_PREL_PG_HI21,
        RelocKind::Aarch64_ADR_GOT_PAGE,
        RelocKind::Aarch64_ADD_ABS_LO12_NC,
        RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 0 },
        RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 2 },
        RelocKind::Aarch64_LDST_ABS_LO12_NC { shift: 3 },
        RelocKind::Aarch64_LD64_GOT_LO12_NC,
        RelocKind::Aarch64_MOVW_UABS { group: 0 },
        RelocKind::Aarch64_MOVW_UABS { group: 1 },
        RelocKind::Aarch64_MOVW_UABS { group: 2 },
        RelocKind::Aarch64_MOVW_UABS { group: 3 },
    ];
    let field = BASE + 0x123_4568;
    let values = [
        0u64,
        4,
        0x7ff,
        0x1008,
        field,
        field + 0x10,
        field.wrapping_sub(0x7fff_fff0),
        field + 0x8000_0000,
        field + (1 << 27) - 4,
        field + (1 << 27),
        field.wrapping_sub(1 << 27),
        field + 0xFFFF_F000,
        field + 0x1_0000_0000,
        0x7fff_ffff,
        0xffff_ffff,
        0x1_0000_0000,
        u64::MAX,
        (-0x8000_0000i64) as u64,
        0x1122_3344_5566_7788,
    ];
    for kind in kinds {
        let insn = insn_for(kind);
        patch::check_field(&insn, 0, kind).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let op = patch::Op::of(kind);
        assert_eq!(op.size(), insn.len(), "{kind:?}");
        for &value in &values {
            let mut a = insn.clone();
            let ra = patch::apply(&mut a, 0, kind, field, value);
            let mut b = insn.clone();
            let ok = unsafe { patch::apply_op(b.as_mut_ptr(), op, field, value) };
            assert_eq!(ra.is_ok(), ok, "{kind:?} {value:#x}: {ra:?}");
            if ok {
                assert_eq!(a, b, "{kind:?} {value:#x}");
            } else {
                assert_eq!(b, insn, "{kind:?} {value:#x}: a refused value leaves the field");
            }
        }
    }
}

#[test]
fn check_field_refuses_what_apply_refuses() {
    // Outside the code.
    assert!(matches!(
        patch::check_field(&[0; 6], 0, RelocKind::X86_64_64),
        Err(PatchError::OutOfBounds { .. })
    ));
    // Not the instruction the kind patches.
    assert!(matches!(
        patch::check_field(&words(B), 0, RelocKind::Aarch64_ADR_GOT_PAGE),
        Err(PatchError::UnexpectedInstruction { .. })
    ));
    // movz of the wrong group.
    assert!(matches!(
        patch::check_field(&words(0xD280_0010), 0, RelocKind::Aarch64_MOVW_UABS { group: 1 }),
        Err(PatchError::UnexpectedInstruction { .. })
    ));
    assert!(patch::check_field(&words(0xD2A0_0010), 0, RelocKind::Aarch64_MOVW_UABS { group: 1 }).is_ok());
}
