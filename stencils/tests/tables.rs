//! The generated tables for the target being built: well-formed whatever
//! stencils c/ holds (stencil-build's own tests check the contents on
//! fixtures).

use ember_stencils::{lookup, HoleValue, RelocKind, STENCILS, SYMBOLS, TARGET};

fn field_size(kind: RelocKind) -> usize {
    match kind {
        RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => 8,
        _ => 4,
    }
}

#[test]
fn target_is_the_one_being_built() {
    let arch = TARGET.split('-').next().unwrap();
    assert_eq!(arch, std::env::consts::ARCH);
}

#[test]
fn stencils_are_sorted_and_found_by_name() {
    assert!(STENCILS.windows(2).all(|w| w[0].name < w[1].name));
    for s in STENCILS {
        assert!(std::ptr::eq(lookup(s.name).unwrap(), s));
    }
    assert!(lookup("NO_SUCH_STENCIL").is_none());
}

#[test]
fn holes_lie_in_their_blobs_and_symbols_resolve() {
    assert!(SYMBOLS.windows(2).all(|w| w[0] < w[1]));
    for s in STENCILS {
        assert!(s.data_align.is_power_of_two(), "{}", s.name);
        for (holes, len) in [(s.code_holes, s.code.len()), (s.data_holes, s.data.len())] {
            for h in holes {
                assert!(h.offset as usize + field_size(h.kind) <= len, "{}: {h:?}", s.name);
                if let HoleValue::Symbol(i) = h.value {
                    assert!((i as usize) < SYMBOLS.len(), "{}: {h:?}", s.name);
                }
            }
        }
        if let Some(tail) = s.trailing_continue {
            assert!((tail as usize) < s.code.len(), "{}", s.name);
            assert!(
                s.code_holes.iter().any(|h| h.offset >= tail && h.value == HoleValue::Continue),
                "{}: the trailing jump's hole",
                s.name
            );
        }
    }
}

#[test]
fn conditional_jumps_fall_through_to_the_next_instruction() {
    // clang ends `if (c) JUMP(); CONTINUE();` with `jcc Continue; jmp Jump`;
    // stencil-build inverts it (x86-64) so that the final jump, to the next
    // instruction, can be dropped: the not-taken path runs straight on.
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    for name in ["POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE"] {
        let s = ember_stencils::lookup(name).unwrap();
        assert!(s.trailing_continue.is_some(), "{name} does not end with a jump to the next instruction");
    }
}
