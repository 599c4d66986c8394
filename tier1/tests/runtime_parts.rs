//! Tier 1's disassembler and helper table.

use ember_tier1::disasm::{disassemble, Isa};
use ember_tier1::glue;

#[test]
fn decodes_both_isas() {
    // x86-64: `mov eax, 1; ret`
    let x = disassemble(Isa::X86_64, &[0xb8, 1, 0, 0, 0, 0xc3], 0x1000);
    assert_eq!(x.len(), 2);
    assert_eq!(x[0].2, "mov eax,1");
    assert_eq!(x[1].0, 0x1005);
    // aarch64: `ret` is d65f03c0
    let a = disassemble(Isa::Aarch64, &0xd65f03c0u32.to_le_bytes(), 0);
    assert_eq!(a[0].2, "ret");
}

#[test]
fn helpers_are_listed() {
    assert!(glue::symbol("ember_unwind").is_some());
    assert!(glue::symbol("ember_call").is_some());
    assert_ne!(glue::symbol("ember_unwind"), glue::symbol("ember_call"));
    assert!(glue::symbol("ember_nonexistent").is_none());
}
