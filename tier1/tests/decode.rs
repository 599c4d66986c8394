//! Decoding quickened bytecode: EXTENDED_ARG prefixes stay instructions of
//! their own, their oparg folds into the next, and every instruction knows
//! where the interpreter must dispatch to run it with its full oparg.

use ember_pyabi::opcodes;
use ember_tier1::compile::{decode, opcode_signature};

fn op(name: &str) -> u16 {
    opcodes::by_name(name).unwrap_or_else(|| panic!("no opcode {name}")) as u16
}

#[test]
fn extended_args_fold_and_dispatch_at_the_first_prefix() {
    let (ext, nop, load_fast) = (op("EXTENDED_ARG"), op("NOP"), op("LOAD_FAST"));
    let code = [nop, ext | 1 << 8, ext | 2 << 8, load_fast | 3 << 8, load_fast | 4 << 8];
    let instrs = decode(&code).unwrap();
    assert_eq!(instrs.len(), 5);
    let (index, dispatch, oparg): (Vec<u32>, Vec<u32>, Vec<u32>) =
        (instrs.iter().map(|i| i.index).collect(), instrs.iter().map(|i| i.dispatch).collect(), instrs.iter().map(|i| i.oparg).collect());
    assert_eq!(index, [0, 1, 2, 3, 4]);
    assert_eq!(dispatch, [0, 1, 1, 1, 4]);
    assert_eq!(oparg, [0, 1, (1 << 8) | 2, (1 << 16) | (2 << 8) | 3, 4]);
    assert!(instrs.iter().zip(instrs.iter().skip(1)).all(|(a, b)| a.next == b.index));
}

#[test]
fn caches_are_skipped_and_signed() {
    // LOAD_GLOBAL has inline caches; their contents (not the counter) are
    // part of the signature.
    let load_global = op("LOAD_GLOBAL");
    let caches = opcodes::caches(load_global as u8);
    assert!(caches >= 2);
    let mut code = vec![load_global];
    code.extend(std::iter::repeat_n(0u16, caches));
    code.push(op("NOP"));
    let instrs = decode(&code).unwrap();
    assert_eq!(instrs.len(), 2);
    assert_eq!(instrs[0].next as usize, 1 + caches);
    let sig = opcode_signature(&code);
    code[1] = 77; // the counter
    assert_eq!(opcode_signature(&code), sig);
    code[2] = 77; // a cached value
    assert_ne!(opcode_signature(&code), sig);
}

#[test]
fn caches_of_polymorphic_sites_are_not_signed() {
    // LOAD_ATTR_INSTANCE_VALUE's stencil keeps a site cache that follows the
    // interpreter's re-specialisations for other types: a new type version
    // in the inline cache is no reason to recompile; another opcode is.
    let specialised = op("LOAD_ATTR_INSTANCE_VALUE");
    let caches = opcodes::caches(op("LOAD_ATTR") as u8);
    let mut code = vec![specialised];
    code.extend(std::iter::repeat_n(0u16, caches));
    code.push(op("NOP"));
    let sig = opcode_signature(&code);
    code[2] = 77; // the type version
    assert_eq!(opcode_signature(&code), sig);
    code[0] = op("LOAD_ATTR_SLOT");
    assert_ne!(opcode_signature(&code), sig);
}
