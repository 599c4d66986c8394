//! Reading one relocatable object (ELF, through the `object` crate) and
//! turning each `ember_stencil_<NAME>` function into a stencil: its section
//! plus every section it references (transitively) copied in, and every
//! relocation turned into a hole. Then linking the stencils of all objects
//! into one [`StencilSet`] with a shared, sorted symbol list.

use std::collections::{BTreeMap, BTreeSet};

use object::elf;
use object::read::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SymbolSection};
use object::{ObjectKind, RelocationFlags, SectionFlags, SectionIndex, SymbolFlags, SymbolKind};

use crate::target::Target;
use crate::types::{Hole, HoleValue, RelocKind};
use crate::{BuiltStencil, Error, StencilSet, STENCIL_PREFIX};

/// The `_EMBER_*` symbols and the holes they stand for (stencils/README.md).
const HOLE_SYMBOLS: &[(&str, HoleValue)] = &[
    ("_EMBER_OPARG", HoleValue::Oparg),
    ("_EMBER_OPERAND0", HoleValue::Operand0),
    ("_EMBER_OPERAND0_U32", HoleValue::Operand0),
    ("_EMBER_OPERAND1", HoleValue::Operand1),
    ("_EMBER_OPERAND1_U32", HoleValue::Operand1),
    ("_EMBER_THIS_INSTR", HoleValue::ThisInstr),
    ("_EMBER_DISPATCH_INSTR", HoleValue::DispatchInstr),
    ("_EMBER_NEXT_INSTR", HoleValue::NextInstr),
    ("_EMBER_SITE", HoleValue::Site),
    ("_EMBER_CONTINUE", HoleValue::Continue),
    ("_EMBER_JUMP", HoleValue::Jump),
    ("_EMBER_ERROR", HoleValue::Error),
    ("_EMBER_DEOPT", HoleValue::Deopt),
];
const HOLE_PREFIX: &str = "_EMBER_";

/// A hole before the symbol list is known.
#[derive(Clone, Debug)]
pub(crate) struct RawHole {
    offset: u32,
    kind: RelocKind,
    value: RawValue,
    addend: i64,
}

#[derive(Clone, Debug)]
enum RawValue {
    Known(HoleValue),
    Symbol(String),
}

/// A stencil as extracted from one object.
#[derive(Clone, Debug)]
pub(crate) struct RawStencil {
    name: String,
    source: String,
    code: Vec<u8>,
    code_holes: Vec<RawHole>,
    data: Vec<u8>,
    data_holes: Vec<RawHole>,
    data_align: u32,
    trailing_continue: Option<u32>,
    home_len: u32,
    /// Reaches a continuation through a GOT slot (see [`got_warning`]).
    got_continuation: bool,
}

/// Where a section's bytes go in a stencil.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blob {
    Code,
    Data,
}

/// A copied section: which blob, at which offset.
#[derive(Clone, Copy, Debug)]
struct Placement {
    blob: Blob,
    offset: u64,
}

/// What a section is, as far as stencils are concerned.
enum SectionClass {
    Text,
    ReadOnly,
    /// Why it cannot be copied into a stencil.
    Unsupported(String),
}

fn classify(section: &object::read::Section<'_, '_>) -> SectionClass {
    let name = section.name().unwrap_or("?");
    let SectionFlags::Elf { sh_type, sh_flags } = section.flags() else {
        return SectionClass::Unsupported(format!("section {name} is not an ELF section"));
    };
    let flags = sh_flags.0;
    if flags & elf::SHF_ALLOC.0 == 0 {
        return SectionClass::Unsupported(format!("section {name} is not loaded at run time (no SHF_ALLOC)"));
    }
    if flags & elf::SHF_TLS.0 != 0 {
        return SectionClass::Unsupported(format!("thread-local section {name}"));
    }
    if flags & elf::SHF_WRITE.0 != 0 {
        return SectionClass::Unsupported(format!(
            "writable data section {name}: stencils are copied per instruction, so mutable globals are not supported"
        ));
    }
    if sh_type != elf::SHT_PROGBITS && sh_type != elf::SHT_NOBITS {
        return SectionClass::Unsupported(format!("section {name} of type {:?}", sh_type));
    }
    if flags & elf::SHF_EXECINSTR.0 != 0 {
        SectionClass::Text
    } else {
        SectionClass::ReadOnly
    }
}

fn section_bytes(section: &object::read::Section<'_, '_>) -> Result<Vec<u8>, String> {
    let SectionFlags::Elf { sh_type, .. } = section.flags() else { unreachable!("classified as ELF") };
    if sh_type == elf::SHT_NOBITS {
        return Ok(vec![0; section.size() as usize]);
    }
    section.data().map(<[u8]>::to_vec).map_err(|e| format!("section {}: {e}", section.name().unwrap_or("?")))
}

/// Extracts every stencil of one object.
pub(crate) fn extract(target: Target, bytes: &[u8], source: &str) -> Result<Vec<RawStencil>, Error> {
    let file = object::File::parse(bytes).map_err(|e| Error::new(format!("not an object file: {e}")))?;
    let want_arch = target.object_architecture();
    if file.format() != object::BinaryFormat::Elf
        || file.architecture() != want_arch
        || !file.is_64()
        || !file.is_little_endian()
        || file.kind() != ObjectKind::Relocatable
    {
        return Err(Error::new(format!(
            "expected a relocatable 64-bit little-endian ELF object for {target}, got {:?} {:?} {:?}",
            file.format(),
            file.architecture(),
            file.kind()
        )));
    }

    let mut stencils = Vec::new();
    for symbol in file.symbols() {
        let Ok(name) = symbol.name() else { continue };
        let Some(stencil_name) = name.strip_prefix(STENCIL_PREFIX) else { continue };
        if symbol.is_undefined() {
            // A declaration (one stencil calling another across files): not a definition here.
            continue;
        }
        let stencil = extract_stencil(target, &file, &symbol, stencil_name, source)
            .map_err(|message| Error::new(message).in_stencil(stencil_name))?;
        stencils.push(stencil);
    }
    Ok(stencils)
}

fn extract_stencil(
    target: Target,
    file: &object::File<'_>,
    symbol: &object::read::Symbol<'_, '_>,
    name: &str,
    source: &str,
) -> Result<RawStencil, String> {
    if symbol.kind() != SymbolKind::Text {
        return Err(format!("is a {:?} symbol, not a function", symbol.kind()));
    }
    let SymbolSection::Section(home) = symbol.section() else {
        return Err(format!("is not defined in a section ({:?})", symbol.section()));
    };
    if symbol.address() != 0 {
        // With -ffunction-sections a function starts its own section; the
        // stencil's entry point is the start of its code.
        return Err(format!(
            "does not start its section (offset {:#x}); compile with -ffunction-sections",
            symbol.address()
        ));
    }

    let mut builder = Builder {
        target,
        file,
        code: Vec::new(),
        data: Vec::new(),
        data_align: 1,
        placed: BTreeMap::new(),
        queue: Vec::new(),
        code_holes: Vec::new(),
        data_holes: Vec::new(),
        got_continuation: false,
    };
    if builder.place(home)?.blob != Blob::Code {
        return Err("is not in an executable section".into());
    }
    let home_len = builder.code.len() as u32;
    // Sections are processed in the order they were first referenced, so
    // the layout depends only on the object.
    let mut next = 0;
    while next < builder.queue.len() {
        let index = builder.queue[next];
        next += 1;
        builder.relocate(index)?;
    }

    let Builder { mut code, data, data_align, placed, mut code_holes, mut data_holes, got_continuation, .. } = builder;
    code_holes.sort_by_key(|h| h.offset);
    data_holes.sort_by_key(|h| h.offset);
    // Only when the function's own section is all the code: dropping the
    // final jump must not drop a helper laid out after it.
    let only_home = placed.values().filter(|p| p.blob == Blob::Code).count() == 1;
    if only_home {
        swap_tail_branches(target, &mut code, &mut code_holes);
    }
    let trailing_continue = if only_home { target.trailing_continue(&code, &resolved_for_tail(&code_holes)) } else { None };
    if code.len() > u32::MAX as usize || data.len() > u32::MAX as usize {
        return Err("is larger than 4 GiB".into());
    }
    Ok(RawStencil {
        name: name.to_owned(),
        source: source.to_owned(),
        code,
        code_holes,
        data,
        data_holes,
        data_align,
        trailing_continue,
        home_len,
        got_continuation,
    })
}

/// `jcc Continue; jmp X` at the end of the code becomes `j!cc X; jmp
/// Continue` (see [`Target::tail_branch_pair`]): the same branches, with a
/// final jump to the continuation that tier 1 drops.
fn swap_tail_branches(target: Target, code: &mut [u8], holes: &mut [RawHole]) {
    let Some((cond_field, jump_field)) = target.tail_branch_pair(code) else {
        return;
    };
    let pc32 = |h: &RawHole| h.kind == RelocKind::X86_64_PC32 && h.addend == -4;
    let is_continue = |h: &RawHole| matches!(h.value, RawValue::Known(HoleValue::Continue));
    let (Some(c), Some(j)) =
        (holes.iter().position(|h| h.offset == cond_field), holes.iter().position(|h| h.offset == jump_field))
    else {
        return;
    };
    if !(pc32(&holes[c]) && pc32(&holes[j]) && is_continue(&holes[c]) && !is_continue(&holes[j])) {
        return;
    }
    let jump_value = holes[j].value.clone();
    holes[j].value = holes[c].value.clone();
    holes[c].value = jump_value;
    target.invert_branch(code, cond_field);
}

/// The holes with known values only (enough to recognise a trailing jump).
fn resolved_for_tail(holes: &[RawHole]) -> Vec<Hole> {
    holes
        .iter()
        .filter_map(|h| match h.value {
            RawValue::Known(value) => Some(Hole { offset: h.offset, kind: h.kind, value, addend: h.addend }),
            RawValue::Symbol(_) => None,
        })
        .collect()
}

struct Builder<'a, 'data> {
    target: Target,
    file: &'a object::File<'data>,
    code: Vec<u8>,
    data: Vec<u8>,
    data_align: u32,
    placed: BTreeMap<usize, Placement>,
    queue: Vec<SectionIndex>,
    code_holes: Vec<RawHole>,
    data_holes: Vec<RawHole>,
    got_continuation: bool,
}

impl Builder<'_, '_> {
    /// Copies a section into the stencil (once), aligned, and queues its
    /// relocations.
    fn place(&mut self, index: SectionIndex) -> Result<Placement, String> {
        if let Some(p) = self.placed.get(&index.0) {
            return Ok(*p);
        }
        let section = self.file.section_by_index(index).map_err(|e| e.to_string())?;
        let blob = match classify(&section) {
            SectionClass::Text => Blob::Code,
            SectionClass::ReadOnly => Blob::Data,
            SectionClass::Unsupported(why) => return Err(format!("references {why}")),
        };
        let bytes = section_bytes(&section)?;
        let align = section.align().max(1);
        if !align.is_power_of_two() || align > 4096 {
            return Err(format!("section {} has alignment {align}", section.name().unwrap_or("?")));
        }
        let (buf, pad) = match blob {
            Blob::Code => (&mut self.code, self.target.code_padding()),
            Blob::Data => {
                self.data_align = self.data_align.max(align as u32);
                (&mut self.data, 0)
            }
        };
        let offset = (buf.len() as u64).next_multiple_of(align);
        buf.resize(offset as usize, pad);
        buf.extend_from_slice(&bytes);
        let placement = Placement { blob, offset };
        self.placed.insert(index.0, placement);
        self.queue.push(index);
        Ok(placement)
    }

    /// Turns the relocations of a placed section into holes.
    fn relocate(&mut self, index: SectionIndex) -> Result<(), String> {
        let section = self.file.section_by_index(index).map_err(|e| e.to_string())?;
        let here = self.placed[&index.0];
        let section_name = section.name().unwrap_or("?").to_owned();
        let mut relocations: Vec<_> = section.relocations().collect();
        relocations.sort_by_key(|(offset, _)| *offset);
        for (offset, reloc) in relocations {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                return Err(format!("non-ELF relocation in {section_name}"));
            };
            let r_type = r_type.0;
            let context = format!("{} at {section_name}+{offset:#x}", self.target.reloc_name(r_type));
            let kind = self.target.reloc_kind(r_type).map_err(|why| format!("{why} at {section_name}+{offset:#x}"))?;
            if reloc.has_implicit_addend() {
                return Err(format!("{context}: implicit addends (REL) are not supported"));
            }
            let addend = reloc.addend();
            let (value, addend) = match reloc.target() {
                RelocationTarget::Symbol(sym_index) => {
                    let symbol = self.file.symbol_by_index(sym_index).map_err(|e| e.to_string())?;
                    self.symbol_value(&symbol, addend).map_err(|why| format!("{context}: {why}"))?
                }
                RelocationTarget::Section(target_index) => {
                    let placement = self.place(target_index).map_err(|why| format!("{context}: {why}"))?;
                    intra(placement, 0, addend)
                }
                other => return Err(format!("{context}: unsupported relocation target {other:?}")),
            };
            if Target::is_got(kind) {
                if !self.target.got_addend_ok(addend) {
                    return Err(format!("{context}: GOT reference with addend {addend}"));
                }
                if matches!(value, RawValue::Known(HoleValue::Continue | HoleValue::Jump | HoleValue::Error | HoleValue::Deopt)) {
                    self.got_continuation = true;
                }
            }
            let offset = here.offset + offset;
            let hole = RawHole { offset: offset as u32, kind, value, addend };
            match here.blob {
                Blob::Code => self.code_holes.push(hole),
                Blob::Data => self.data_holes.push(hole),
            }
        }
        Ok(())
    }

    /// The hole value of a relocation against `symbol`, and its final addend.
    fn symbol_value(
        &mut self,
        symbol: &object::read::Symbol<'_, '_>,
        addend: i64,
    ) -> Result<(RawValue, i64), String> {
        let name = symbol.name().map_err(|e| e.to_string())?;
        let SymbolFlags::Elf { st_info, .. } = symbol.flags() else {
            return Err(format!("symbol {name} is not an ELF symbol"));
        };
        let st_type = st_info.st_type();
        if st_type == elf::STT_TLS || symbol.kind() == SymbolKind::Tls {
            return Err(format!("thread-local symbol {name} is not supported"));
        }
        if st_type == elf::STT_GNU_IFUNC {
            return Err(format!("IFUNC symbol {name} is not supported"));
        }
        if !matches!(st_type, elf::STT_NOTYPE | elf::STT_OBJECT | elf::STT_FUNC | elf::STT_SECTION) {
            return Err(format!("symbol {name} of type {st_type:?} is not supported"));
        }
        match symbol.section() {
            SymbolSection::Undefined => {
                if let Some(rest) = name.strip_prefix(HOLE_PREFIX) {
                    let value = HOLE_SYMBOLS
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| *v)
                        .ok_or_else(|| format!("unknown hole symbol {name} (_EMBER_{rest} is not in stencils/README.md)"))?;
                    return Ok((RawValue::Known(value), addend));
                }
                if symbol.is_weak() {
                    return Err(format!("weak undefined symbol {name}: tier 1 resolves symbols eagerly"));
                }
                if name.is_empty() {
                    return Err("relocation against an unnamed undefined symbol".into());
                }
                Ok((RawValue::Symbol(name.to_owned()), addend))
            }
            SymbolSection::Section(index) => {
                if name.starts_with(HOLE_PREFIX) {
                    return Err(format!("hole symbol {name} must not be defined"));
                }
                let placement = self.place(index)?;
                Ok(intra(placement, symbol.address(), addend))
            }
            SymbolSection::Common => Err(format!("common symbol {name} (writable data) is not supported")),
            SymbolSection::Absolute => Err(format!("absolute symbol {name} is not supported")),
            other => Err(format!("symbol {name} in {other:?} is not supported")),
        }
    }
}

/// A reference into the stencil's own code or data.
fn intra(placement: Placement, symbol_offset: u64, addend: i64) -> (RawValue, i64) {
    let value = match placement.blob {
        Blob::Code => HoleValue::Code,
        Blob::Data => HoleValue::Data,
    };
    (RawValue::Known(value), (placement.offset + symbol_offset) as i64 + addend)
}

/// Puts the stencils of all objects together: sorted by name (duplicates are
/// an error), external symbols deduplicated and sorted, holes indexed.
pub(crate) fn link(target: Target, mut raw: Vec<RawStencil>) -> Result<StencilSet, Error> {
    raw.sort_by(|a, b| a.name.cmp(&b.name));
    for pair in raw.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(Error::new(format!("defined twice (in {} and {})", pair[0].source, pair[1].source))
                .in_stencil(&pair[0].name));
        }
    }
    let names: BTreeSet<&str> = raw
        .iter()
        .flat_map(|s| s.code_holes.iter().chain(&s.data_holes))
        .filter_map(|h| match &h.value {
            RawValue::Symbol(name) => Some(name.as_str()),
            RawValue::Known(_) => None,
        })
        .collect();
    let symbols: Vec<String> = names.into_iter().map(str::to_owned).collect();
    if symbols.len() > u16::MAX as usize + 1 {
        return Err(Error::new(format!("{} external symbols: more than Symbol(u16) can index", symbols.len())));
    }
    let index = |name: &str| symbols.binary_search_by(|s| s.as_str().cmp(name)).expect("collected above") as u16;
    let finish = |holes: &[RawHole]| -> Vec<Hole> {
        holes
            .iter()
            .map(|h| Hole {
                offset: h.offset,
                kind: h.kind,
                value: match &h.value {
                    RawValue::Known(v) => *v,
                    RawValue::Symbol(name) => HoleValue::Symbol(index(name)),
                },
                addend: h.addend,
            })
            .collect()
    };
    let stencils = raw
        .iter()
        .map(|s| BuiltStencil {
            name: s.name.clone(),
            source: s.source.clone(),
            code: s.code.clone(),
            code_holes: finish(&s.code_holes),
            data: s.data.clone(),
            data_holes: finish(&s.data_holes),
            data_align: s.data_align,
            trailing_continue: s.trailing_continue,
            cold: Vec::new(),
            cold_holes: Vec::new(),
            home_len: s.home_len,
        })
        .collect();
    let through_got: Vec<&str> = raw.iter().filter(|s| s.got_continuation).map(|s| s.name.as_str()).collect();
    let warnings = got_warning(&through_got).into_iter().collect();
    Ok(StencilSet { target, stencils, symbols, warnings })
}

/// A continuation reached through the GOT builds and works, but costs a
/// load and a GOT slot per jump, and a trailing jump cannot be dropped: it
/// means the header forgot to make the continuation symbols dso-local.
fn got_warning(stencils: &[&str]) -> Option<String> {
    let (first, rest) = stencils.split_first()?;
    let others = match rest.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{STENCIL_PREFIX}{first}{others} reach continuations through a GOT slot: declare _EMBER_CONTINUE, \
         _EMBER_JUMP, _EMBER_ERROR and _EMBER_DEOPT with __attribute__((visibility(\"hidden\"))) so that clang \
         jumps to them directly (and a trailing jump to _EMBER_CONTINUE can be dropped)"
    ))
}
