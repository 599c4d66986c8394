//! End to end: stencils compiled by clang and extracted by stencil-build
//! (the fixtures, for both targets; the real tables, for the host), every
//! hole patched by `patch::apply` as tier 1 does (GOT slots for the GOT
//! kinds, a trampoline when a branch cannot reach), then every patched
//! field read back by an independent decoder (iced-x86, yaxpeax-arm) and
//! compared with the address the hole was meant to refer to.

use std::collections::BTreeMap;
use std::path::Path;

use ember_stencils::{HoleValue, RelocKind};
use ember_tier1::patch::{self, PatchError};
use stencil_build::Target;

/// A stencil in ember-stencils' types, owned.
struct Stencil {
    name: String,
    code: Vec<u8>,
    code_holes: Vec<ember_stencils::Hole>,
    data: Vec<u8>,
    data_holes: Vec<ember_stencils::Hole>,
    data_align: u32,
}

/// stencil-build compiles the same types.rs into its own types: map them.
fn kind_of(k: stencil_build::RelocKind) -> RelocKind {
    use stencil_build::RelocKind as K;
    match k {
        K::X86_64_64 => RelocKind::X86_64_64,
        K::X86_64_32 => RelocKind::X86_64_32,
        K::X86_64_32S => RelocKind::X86_64_32S,
        K::X86_64_PC32 => RelocKind::X86_64_PC32,
        K::X86_64_GOTPCREL => RelocKind::X86_64_GOTPCREL,
        K::Aarch64_ABS64 => RelocKind::Aarch64_ABS64,
        K::Aarch64_BRANCH26 => RelocKind::Aarch64_BRANCH26,
        K::Aarch64_ADR_PREL_PG_HI21 => RelocKind::Aarch64_ADR_PREL_PG_HI21,
        K::Aarch64_ADR_GOT_PAGE => RelocKind::Aarch64_ADR_GOT_PAGE,
        K::Aarch64_ADD_ABS_LO12_NC => RelocKind::Aarch64_ADD_ABS_LO12_NC,
        K::Aarch64_LDST_ABS_LO12_NC { shift } => RelocKind::Aarch64_LDST_ABS_LO12_NC { shift },
        K::Aarch64_LD64_GOT_LO12_NC => RelocKind::Aarch64_LD64_GOT_LO12_NC,
        K::Aarch64_MOVW_UABS { group } => RelocKind::Aarch64_MOVW_UABS { group },
    }
}

fn value_of(v: stencil_build::HoleValue) -> HoleValue {
    use stencil_build::HoleValue as V;
    match v {
        V::Oparg => HoleValue::Oparg,
        V::Operand0 => HoleValue::Operand0,
        V::Operand1 => HoleValue::Operand1,
        V::ThisInstr => HoleValue::ThisInstr,
        V::DispatchInstr => HoleValue::DispatchInstr,
        V::NextInstr => HoleValue::NextInstr,
        V::Site => HoleValue::Site,
        V::Continue => HoleValue::Continue,
        V::Jump => HoleValue::Jump,
        V::Error => HoleValue::Error,
        V::Deopt => HoleValue::Deopt,
        V::Code => HoleValue::Code,
        V::Data => HoleValue::Data,
        V::Cold => HoleValue::Cold,
        V::Symbol(i) => HoleValue::Symbol(i),
    }
}

fn holes_of(holes: &[stencil_build::Hole]) -> Vec<ember_stencils::Hole> {
    holes
        .iter()
        .map(|h| ember_stencils::Hole { offset: h.offset, kind: kind_of(h.kind), value: value_of(h.value), addend: h.addend })
        .collect()
}

fn fixture_stencils(target: Target) -> Vec<Stencil> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../stencil-build/tests/fixtures");
    let work = std::env::temp_dir().join(format!("tier1-patch-stencils-{}-{}", std::process::id(), target.triple()));
    let mut config = stencil_build::Config::new(target, stencil_build::python_include_dir().unwrap(), &work);
    if let Some(clang) = std::env::var_os("EMBER_CLANG") {
        config.clang = clang.into();
    }
    config.sources = vec![fixtures.join("ops.c"), fixtures.join("extra.c")];
    let set = stencil_build::build(&config).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&work);
    set.stencils
        .iter()
        .map(|s| Stencil {
            name: s.name.clone(),
            code: s.code.clone(),
            code_holes: holes_of(&s.code_holes),
            data: s.data.clone(),
            data_holes: holes_of(&s.data_holes),
            data_align: s.data_align,
        })
        .collect()
}

/// Where things are at "run time" (nothing is executed: only addresses).
struct Layout {
    target: Target,
    code_base: u64,
    data_base: u64,
    got_base: u64,
    got: Vec<u8>,
    got_slots: BTreeMap<u64, u64>,
    tramp_base: u64,
    tramps: Vec<u8>,
}

/// How one hole was patched: the address its instruction should now refer
/// to (`value`, as for `apply`) and what S it stands for.
struct Patched {
    hole: ember_stencils::Hole,
    s: u64,
    value: u64,
    slot: Option<u64>,
    trampoline: Option<u64>,
}

impl Layout {
    fn new(target: Target, data_align: u32) -> Layout {
        let code_base = 0x7f12_3456_0000;
        Layout {
            target,
            code_base,
            data_base: (code_base + 0x10_0000).next_multiple_of(data_align as u64),
            got_base: code_base + 0x20_0000,
            got: Vec::new(),
            got_slots: BTreeMap::new(),
            tramp_base: code_base + 0x30_0000,
            tramps: Vec::new(),
        }
    }

    /// S for a hole value. Deopt and the symbols are far away (more than
    /// 4 GiB): reachable only through a GOT slot or a trampoline.
    fn resolve(&self, value: HoleValue) -> u64 {
        match value {
            HoleValue::Oparg => 3,
            HoleValue::Operand0 => 0x7fab_cdef_0120,
            HoleValue::Operand1 => 0x5555_6666_7778,
            HoleValue::ThisInstr => 0x7f99_0000_1234,
            HoleValue::DispatchInstr => 0x7f99_0000_1232,
            HoleValue::NextInstr => 0x7f99_0000_1238,
            HoleValue::Site => 0x5555_7777_0010,
            HoleValue::Continue => self.code_base + 0x10_4000,
            HoleValue::Jump => self.code_base - 0x40_0000,
            HoleValue::Error => self.code_base + 0x60_0000,
            HoleValue::Deopt => self.code_base + 0x2_0000_0000,
            HoleValue::Code => self.code_base,
            HoleValue::Data => self.data_base,
            HoleValue::Cold => self.code_base + 0x8000,
            HoleValue::Symbol(i) => 0x7fee_0000_0000 + 0x100 * i as u64,
        }
    }

    fn slot(&mut self, target: u64) -> u64 {
        if let Some(&slot) = self.got_slots.get(&target) {
            return slot;
        }
        let slot = self.got_base + self.got.len() as u64;
        self.got.extend_from_slice(&patch::got_slot(target));
        self.got_slots.insert(target, slot);
        slot
    }

    fn trampoline(&mut self, target: u64) -> u64 {
        let at = self.tramp_base + self.tramps.len() as u64;
        match self.target {
            Target::X86_64 => self.tramps.extend_from_slice(&patch::x86_64_trampoline(target)),
            Target::Aarch64 => self.tramps.extend_from_slice(&patch::aarch64_trampoline(target)),
        }
        self.tramps.resize(self.tramps.len().next_multiple_of(8), 0);
        at
    }

    /// Patches one hole as tier 1 does.
    fn patch(&mut self, buf: &mut [u8], base: u64, hole: ember_stencils::Hole) -> Patched {
        let mut s = self.resolve(hole.value);
        if matches!(hole.kind, RelocKind::X86_64_32 | RelocKind::X86_64_32S) {
            // A 32-bit hole (the oparg, OPERAND0_U32, OPERAND1_U32) gets a value that fits.
            s &= 0x7fff_ffff;
        }
        let field = base + hole.offset as u64;
        if patch::is_got(hole.kind) {
            let slot = self.slot(s);
            let value = slot.wrapping_add(hole.addend as u64);
            patch::apply(buf, hole.offset as usize, hole.kind, field, value).unwrap();
            return Patched { hole, s, value, slot: Some(slot), trampoline: None };
        }
        let value = s.wrapping_add(hole.addend as u64);
        match patch::apply(buf, hole.offset as usize, hole.kind, field, value) {
            Ok(()) => Patched { hole, s, value, slot: None, trampoline: None },
            Err(PatchError::OutOfRange { .. })
                if matches!(hole.kind, RelocKind::X86_64_PC32 | RelocKind::Aarch64_BRANCH26) =>
            {
                // A branch to S (x86-64: the addend is the -4 bias).
                let bias = if hole.kind == RelocKind::X86_64_PC32 { -4 } else { 0 };
                assert_eq!(hole.addend, bias, "only plain branches go through trampolines");
                let t = self.trampoline(s);
                let value = t.wrapping_add(hole.addend as u64);
                patch::apply(buf, hole.offset as usize, hole.kind, field, value).unwrap();
                Patched { hole, s, value, slot: None, trampoline: Some(t) }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn read_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
}

/// What the checks saw, to make sure they saw something.
#[derive(Default)]
struct Seen {
    holes: usize,
    got: usize,
    trampolines: usize,
    data: usize,
}

fn check_x86(stencil: &Stencil, code: &[u8], layout: &Layout, patched: &[Patched], seen: &mut Seen) {
    use iced_x86::{Decoder, DecoderOptions, OpKind};
    let mut decoder = Decoder::with_ip(64, code, layout.code_base, DecoderOptions::NONE);
    let insns: Vec<_> = decoder.iter().collect();
    for p in patched {
        let field = layout.code_base + p.hole.offset as u64;
        let insn = insns
            .iter()
            .find(|i| i.ip() <= field && field < i.next_ip())
            .unwrap_or_else(|| panic!("{}: no instruction at {:#x}", stencil.name, p.hole.offset));
        assert!(!insn.is_invalid(), "{}: invalid instruction at the hole {:?}", stencil.name, p.hole);
        match p.hole.kind {
            RelocKind::X86_64_64 => {
                let imm = (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Immediate64).map(|i| insn.immediate(i));
                assert_eq!(imm, Some(p.value), "{}: {:?}", stencil.name, p.hole);
            }
            RelocKind::X86_64_PC32 | RelocKind::X86_64_GOTPCREL => {
                // The displacement is the instruction's last field, so what
                // it refers to is value + 4 (the -4 bias undone).
                assert_eq!(insn.next_ip(), field + 4, "{}: field not at the end of {:?}", stencil.name, insn.code());
                let referred = if insn.op0_kind() == OpKind::NearBranch64 {
                    insn.near_branch64()
                } else {
                    assert!(insn.is_ip_rel_memory_operand(), "{}: {:?}", stencil.name, insn.code());
                    insn.ip_rel_memory_address()
                };
                assert_eq!(referred, p.value.wrapping_add(4), "{}: {:?}", stencil.name, p.hole);
                if let Some(slot) = p.slot {
                    assert_eq!(referred, slot, "{}: GOT references have the -4 bias", stencil.name);
                    assert_eq!(read_u64(&layout.got, (slot - layout.got_base) as usize), p.s);
                    seen.got += 1;
                }
                if let Some(t) = p.trampoline {
                    assert_eq!(referred, t);
                    check_trampoline(layout, t, p.s);
                    seen.trampolines += 1;
                }
                if p.hole.value == HoleValue::Code {
                    assert!(referred >= layout.code_base && referred < layout.code_base + code.len() as u64);
                }
            }
            RelocKind::X86_64_32 | RelocKind::X86_64_32S => {
                // An immediate, or (32S: a local's offset in the frame) a
                // memory operand's displacement.
                let imm = (0..insn.op_count())
                    .find(|&i| matches!(insn.op_kind(i), OpKind::Immediate32 | OpKind::Immediate32to64))
                    .map(|i| insn.immediate(i) & 0xffff_ffff)
                    .or_else(|| {
                        ((0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory)
                            && p.hole.kind == RelocKind::X86_64_32S)
                            .then(|| insn.memory_displacement64() & 0xffff_ffff)
                    });
                assert_eq!(imm, Some(p.value), "{}: {:?}", stencil.name, p.hole);
            }
            other => panic!("{}: {other:?} in x86-64 code", stencil.name),
        }
        seen.holes += 1;
    }
}

fn check_aarch64(stencil: &Stencil, code: &[u8], layout: &Layout, patched: &[Patched], seen: &mut Seen) {
    use yaxpeax_arch::{Decoder, U8Reader};
    use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode, Operand};
    let page = |a: u64| a & !0xfff;
    for p in patched {
        let at = p.hole.offset as usize;
        let insn = InstDecoder::default()
            .decode(&mut U8Reader::new(&code[at..at + 4]))
            .unwrap_or_else(|e| panic!("{}: {e:?} at {at:#x}", stencil.name));
        let pc = layout.code_base + at as u64;
        let ops = &insn.operands;
        let pc_offset = || ops.iter().find_map(|o| if let Operand::PCOffset(x) = o { Some(*x) } else { None }).unwrap();
        let what = format!("{}: {:?} `{insn}`", stencil.name, p.hole);
        match p.hole.kind {
            RelocKind::Aarch64_BRANCH26 => {
                assert!(matches!(insn.opcode, Opcode::B | Opcode::BL), "{what}");
                let referred = pc.wrapping_add(pc_offset() as u64);
                assert_eq!(referred, p.value, "{what}");
                if let Some(t) = p.trampoline {
                    assert_eq!(referred, t);
                    check_trampoline(layout, t, p.s);
                    seen.trampolines += 1;
                }
            }
            RelocKind::Aarch64_ADR_PREL_PG_HI21 | RelocKind::Aarch64_ADR_GOT_PAGE => {
                assert_eq!(insn.opcode, Opcode::ADRP, "{what}");
                assert_eq!(page(pc).wrapping_add(pc_offset() as u64), page(p.value), "{what}");
            }
            RelocKind::Aarch64_ADD_ABS_LO12_NC => {
                let imm = ops.iter().find_map(|o| if let Operand::Immediate(i) = o { Some(*i as u64) } else { None });
                assert_eq!(imm, Some(p.value & 0xfff), "{what}");
            }
            RelocKind::Aarch64_LDST_ABS_LO12_NC { .. } | RelocKind::Aarch64_LD64_GOT_LO12_NC => {
                let off = ops.iter().find_map(|o| if let Operand::RegPreIndex(_, off, false) = o { Some(*off as u64) } else { None });
                assert_eq!(off, Some(p.value & 0xfff), "{what}");
            }
            RelocKind::Aarch64_MOVW_UABS { group } => {
                let imm = ops.iter().find_map(|o| if let Operand::ImmShift(i, s) = o { Some((*i, *s)) } else { None });
                let want = ((p.value >> (16 * group as u32)) & 0xffff) as u16;
                assert_eq!(imm, Some((want, 16 * group)), "{what}");
                assert_eq!(insn.opcode == Opcode::MOVZ, group == 0, "{what}: movz starts the sequence");
            }
            other => panic!("{what}: {other:?} in aarch64 code"),
        }
        if let Some(slot) = p.slot {
            assert_eq!(p.value, slot, "aarch64 GOT holes have no addend");
            assert_eq!(read_u64(&layout.got, (slot - layout.got_base) as usize), p.s);
            seen.got += 1;
        }
        seen.holes += 1;
    }
}

/// The trampoline at `at` jumps to `target`, as its decoder reads it.
fn check_trampoline(layout: &Layout, at: u64, target: u64) {
    let off = (at - layout.tramp_base) as usize;
    let bytes = &layout.tramps[off..];
    match layout.target {
        Target::X86_64 => {
            let mut d = iced_x86::Decoder::with_ip(64, bytes, at, iced_x86::DecoderOptions::NONE);
            let jmp = d.decode();
            assert_eq!(jmp.mnemonic(), iced_x86::Mnemonic::Jmp);
            let literal = (jmp.ip_rel_memory_address() - layout.tramp_base) as usize;
            assert_eq!(read_u64(&layout.tramps, literal), target);
        }
        Target::Aarch64 => {
            use yaxpeax_arch::{Decoder, U8Reader};
            use yaxpeax_arm::armv8::a64::{InstDecoder, Operand};
            let ldr = InstDecoder::default().decode(&mut U8Reader::new(&bytes[..4])).unwrap();
            let br = InstDecoder::default().decode(&mut U8Reader::new(&bytes[4..8])).unwrap();
            assert_eq!(br.to_string(), "br x16");
            let Operand::PCOffset(lit) = ldr.operands[1] else { panic!("ldr literal: {ldr}") };
            assert_eq!(read_u64(&layout.tramps, off + lit as usize), target);
        }
    }
}

/// Patches and checks every stencil; returns what was seen.
fn patch_and_check(target: Target, stencils: &[Stencil]) -> Seen {
    let mut seen = Seen::default();
    for stencil in stencils {
        let mut layout = Layout::new(target, stencil.data_align);
        let mut code = stencil.code.clone();
        let mut data = stencil.data.clone();
        let (code_base, data_base) = (layout.code_base, layout.data_base);
        let patched: Vec<Patched> = stencil.code_holes.iter().map(|&h| layout.patch(&mut code, code_base, h)).collect();
        for &h in &stencil.data_holes {
            let p = layout.patch(&mut data, data_base, h);
            assert!(matches!(h.kind, RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64), "{}: {h:?}", stencil.name);
            assert_eq!(read_u64(&data, h.offset as usize), p.value, "{}: {h:?}", stencil.name);
            seen.data += 1;
        }
        match target {
            Target::X86_64 => check_x86(stencil, &code, &layout, &patched, &mut seen),
            Target::Aarch64 => check_aarch64(stencil, &code, &layout, &patched, &mut seen),
        }
    }
    seen
}

#[test]
fn fixture_stencils_patch_and_decode_on_both_targets() {
    for target in Target::ALL {
        let stencils = fixture_stencils(target);
        let seen = patch_and_check(target, &stencils);
        let total: usize = stencils.iter().map(|s| s.code_holes.len()).sum();
        assert_eq!(seen.holes, total);
        assert!(seen.holes > 50, "{target}: {} holes", seen.holes);
        assert!(seen.got > 0, "{target}: no GOT slot exercised");
        assert!(seen.trampolines > 0, "{target}: no trampoline exercised");
        assert!(seen.data > 0, "{target}: no data hole exercised");
    }
}

/// The real tables (stencils/c for the host), patched the same way.
#[test]
fn real_stencils_patch_and_decode() {
    let target = Target::host().expect("x86-64 or aarch64 host");
    let stencils: Vec<Stencil> = ember_stencils::STENCILS
        .iter()
        .map(|s| Stencil {
            name: s.name.to_owned(),
            code: s.code.to_vec(),
            code_holes: s.code_holes.to_vec(),
            data: s.data.to_vec(),
            data_holes: s.data_holes.to_vec(),
            data_align: s.data_align,
        })
        .collect();
    let seen = patch_and_check(target, &stencils);
    let total: usize = stencils.iter().map(|s| s.code_holes.len()).sum();
    assert_eq!(seen.holes, total);
}
