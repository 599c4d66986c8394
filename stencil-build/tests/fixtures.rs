//! stencil-build on the C fixtures in tests/fixtures/, for both targets:
//! holes, copied sections, trailing jumps, rejected objects, determinism.
//! Needs clang-21 and CPython's headers (run through `dev/env`).

use std::fs;
use std::path::{Path, PathBuf};

use stencil_build::{
    build, emit_rust, python_include_dir, BuiltStencil, Config, Error, Hole, HoleValue, RelocKind, StencilSet, Target,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-build-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn config(target: Target, sources: &[PathBuf], work: &Path) -> Config {
    let mut config = Config::new(target, python_include_dir().unwrap(), work.join(target.triple()));
    if let Some(clang) = std::env::var_os("EMBER_CLANG") {
        config.clang = clang.into();
    }
    config.sources = sources.to_vec();
    config
}

fn build_fixture(target: Target, file: &str, test: &str) -> StencilSet {
    let work = scratch(&format!("{test}-{}", target.triple()));
    let set = build(&config(target, &[fixtures().join(file)], &work)).unwrap_or_else(|e| panic!("{e}"));
    let _ = fs::remove_dir_all(&work);
    set
}

fn build_err(target: Target, file: &str, test: &str) -> Error {
    let work = scratch(&format!("{test}-{}", target.triple()));
    let result = build(&config(target, &[fixtures().join(file)], &work));
    let _ = fs::remove_dir_all(&work);
    match result {
        Ok(set) => panic!("{file} built for {target}: {:?}", set.stencils.iter().map(|s| &s.name).collect::<Vec<_>>()),
        Err(e) => e,
    }
}

fn field_size(kind: RelocKind) -> usize {
    match kind {
        RelocKind::X86_64_64 | RelocKind::Aarch64_ABS64 => 8,
        _ => 4,
    }
}

fn values(holes: &[Hole]) -> Vec<HoleValue> {
    holes.iter().map(|h| h.value).collect()
}

fn symbol<'a>(set: &'a StencilSet, value: HoleValue) -> Option<&'a str> {
    match value {
        HoleValue::Symbol(i) => Some(set.symbols[i as usize].as_str()),
        _ => None,
    }
}

fn symbols_used<'a>(set: &'a StencilSet, s: &BuiltStencil) -> Vec<&'a str> {
    let mut names: Vec<&str> =
        s.code_holes.iter().chain(&s.data_holes).filter_map(|h| symbol(set, h.value)).collect();
    names.sort();
    names.dedup();
    names
}

/// Checks that hold for every stencil set.
fn check_invariants(set: &StencilSet) {
    assert!(set.stencils.windows(2).all(|w| w[0].name < w[1].name), "stencils sorted by name");
    assert!(set.symbols.windows(2).all(|w| w[0] < w[1]), "symbols sorted and unique");
    for s in &set.stencils {
        for (holes, len) in
            [(&s.code_holes, s.code.len()), (&s.data_holes, s.data.len()), (&s.cold_holes, s.cold.len())]
        {
            assert!(holes.windows(2).all(|w| w[0].offset < w[1].offset), "{}: holes sorted", s.name);
            for h in holes.iter() {
                assert!(h.offset as usize + field_size(h.kind) <= len, "{}: hole {h:?} outside its blob", s.name);
                if let HoleValue::Symbol(i) = h.value {
                    assert!((i as usize) < set.symbols.len());
                }
                let is_x86 = matches!(
                    h.kind,
                    RelocKind::X86_64_64
                        | RelocKind::X86_64_32
                        | RelocKind::X86_64_32S
                        | RelocKind::X86_64_PC32
                        | RelocKind::X86_64_GOTPCREL
                );
                assert_eq!(is_x86, set.target == Target::X86_64, "{}: {h:?} is of the wrong target", s.name);
            }
        }
        assert!(s.data_align.is_power_of_two());
        assert!(s.data.is_empty() || !s.data_holes.is_empty() || s.code_holes.iter().any(|h| h.value == HoleValue::Data));
    }
}

/// The size of the trailing jump and where its field is relative to it.
fn tail_shape(target: Target) -> (usize, u32) {
    match target {
        Target::X86_64 => (5, 1),
        Target::Aarch64 => (4, 0),
    }
}

#[test]
fn basic_stencils_on_both_targets() {
    for target in Target::ALL {
        let set = build_fixture(target, "ops.c", "basic");
        check_invariants(&set);
        let names: Vec<&str> = set.stencils.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ADD", "LOAD_SMALL", "POP_JUMP_IF_NONE", "RAISE_MSG", "RETURN", "SWITCH"], "{target}");
        assert_eq!(set.stencils.iter().map(|s| s.source.as_str()).collect::<Vec<_>>(), ["ops.c"; 6]);

        // Value holes and a trailing jump to the next stencil.
        let s = set.get("LOAD_SMALL").unwrap();
        let v = values(&s.code_holes);
        for want in [HoleValue::Oparg, HoleValue::Operand0, HoleValue::Continue] {
            assert!(v.contains(&want), "{target} LOAD_SMALL lacks {want:?}: {v:?}");
        }
        let (tail_len, field) = tail_shape(target);
        let tail = s.trailing_continue.expect("LOAD_SMALL ends with a jump to _EMBER_CONTINUE");
        assert_eq!(tail as usize, s.code.len() - tail_len, "{target}");
        let last = s.code_holes.last().unwrap();
        assert_eq!((last.offset, last.value), (tail + field, HoleValue::Continue));

        // A call into CPython (through a GOT slot, -fno-plt), an error exit.
        let s = set.get("ADD").unwrap();
        assert_eq!(symbols_used(&set, s), ["PyNumber_Add"], "{target}");
        let call_kinds: Vec<RelocKind> =
            s.code_holes.iter().filter(|h| symbol(&set, h.value).is_some()).map(|h| h.kind).collect();
        match target {
            Target::X86_64 => assert_eq!(call_kinds, [RelocKind::X86_64_GOTPCREL]),
            Target::Aarch64 => {
                assert_eq!(call_kinds, [RelocKind::Aarch64_ADR_GOT_PAGE, RelocKind::Aarch64_LD64_GOT_LO12_NC])
            }
        }
        let v = values(&s.code_holes);
        assert!(v.contains(&HoleValue::Error) && v.contains(&HoleValue::ThisInstr) && v.contains(&HoleValue::Continue));
        assert_eq!(s.trailing_continue, None, "{target}: ADD's last jump is to _EMBER_ERROR");

        // A conditional jump.
        let s = set.get("POP_JUMP_IF_NONE").unwrap();
        let v = values(&s.code_holes);
        assert!(v.contains(&HoleValue::Jump) && v.contains(&HoleValue::Continue), "{target}: {v:?}");
        assert_eq!(symbols_used(&set, s), ["_Py_NoneStruct"]);

        // A string literal: copied into the data blob, referenced by a Data hole.
        let s = set.get("RAISE_MSG").unwrap();
        let msg = b"ember fixture: raised on purpose\0";
        let at = s.data.windows(msg.len()).position(|w| w == msg).expect("the literal is in the data blob");
        let data_refs: Vec<&Hole> = s.code_holes.iter().filter(|h| h.value == HoleValue::Data).collect();
        assert!(!data_refs.is_empty());
        assert!(data_refs.iter().all(|h| h.addend == at as i64), "{target}: {data_refs:?}");
        let v = values(&s.code_holes);
        for want in [HoleValue::Deopt, HoleValue::NextInstr, HoleValue::Error, HoleValue::Oparg] {
            assert!(v.contains(&want), "{target} RAISE_MSG lacks {want:?}");
        }
        assert_eq!(symbols_used(&set, s), ["PyErr_SetString", "PyExc_RuntimeError"]);

        // A switch over the oparg (no jump table: -fno-jump-tables).
        let s = set.get("SWITCH").unwrap();
        assert!(s.data.is_empty(), "{target}");
        let v = values(&s.code_holes);
        assert!(v.contains(&HoleValue::Operand0) && v.contains(&HoleValue::Operand1));
        assert_eq!(
            symbols_used(&set, s),
            ["_Py_EllipsisObject", "_Py_FalseStruct", "_Py_NoneStruct", "_Py_NotImplementedStruct", "_Py_TrueStruct"]
        );

        // Returns: no holes, no continuation.
        let s = set.get("RETURN").unwrap();
        assert!(s.code_holes.is_empty() && s.data.is_empty() && s.trailing_continue.is_none());
        assert!(set.warnings.is_empty(), "{target}: {:?}", set.warnings);
    }
}

#[test]
fn helpers_and_tables_are_copied() {
    for target in Target::ALL {
        let set = build_fixture(target, "extra.c", "extra");
        check_invariants(&set);

        // The helper's section follows the stencil's code; the call is a
        // PC-relative Code hole, and the final jump can no longer be dropped.
        let s = set.get("CALL_HELPER").unwrap();
        let call = s.code_holes.iter().find(|h| h.value == HoleValue::Code).expect("a call to the copied helper");
        let (kind, bias) = match target {
            Target::X86_64 => (RelocKind::X86_64_PC32, -4),
            Target::Aarch64 => (RelocKind::Aarch64_BRANCH26, 0),
        };
        assert_eq!(call.kind, kind);
        let helper = (call.addend - bias) as usize;
        assert!(helper > call.offset as usize && helper < s.code.len(), "{target}: helper at {helper}");
        assert_eq!(s.trailing_continue, None, "{target}: code after the final jump");
        // The stencil's own code ends with the jump to _EMBER_CONTINUE.
        assert!(s.code_holes.iter().any(|h| h.value == HoleValue::Continue && (h.offset as usize) < helper));

        // Tables: aligned data blob, pointers in it are data holes.
        let s = set.get("TABLES").unwrap();
        assert!(s.data_align >= 16, "{target}: data_align {}", s.data_align);
        let abs = match target {
            Target::X86_64 => RelocKind::X86_64_64,
            Target::Aarch64 => RelocKind::Aarch64_ABS64,
        };
        assert!(s.data_holes.iter().all(|h| h.kind == abs), "{target}: {:?}", s.data_holes);
        let singletons: Vec<&str> = s.data_holes.iter().filter_map(|h| symbol(&set, h.value)).collect();
        assert_eq!(singletons, ["_Py_NoneStruct", "_Py_TrueStruct", "_Py_FalseStruct"]);
        // NAMES points at the strings, also in the data blob.
        let names: Vec<&Hole> = s.data_holes.iter().filter(|h| h.value == HoleValue::Data).collect();
        assert_eq!(names.len(), 4);
        for (hole, word) in names.iter().zip(["zero", "one", "two", "three"]) {
            let at = hole.addend as usize;
            assert_eq!(&s.data[at..at + word.len() + 1], format!("{word}\0").as_bytes(), "{target}");
        }
        // The 16-byte constant is 16-aligned within the blob.
        let scale: Vec<u8> = [1.5f64, 2.5].iter().flat_map(|d| d.to_le_bytes()).collect();
        let at = s.data.windows(16).position(|w| w == scale).expect("SCALE in the data blob");
        assert_eq!(at % 16, 0);
        assert!(s.code_holes.iter().any(|h| h.value == HoleValue::Jump));
    }
}

#[test]
fn jump_tables_are_supported() {
    for target in Target::ALL {
        let work = scratch(&format!("jumptables-{}", target.triple()));
        let mut config = config(target, &[fixtures().join("extra.c")], &work);
        config.extra_flags.push("-fjump-tables".into());
        let set = build(&config).unwrap_or_else(|e| panic!("{e}"));
        let _ = fs::remove_dir_all(&work);
        check_invariants(&set);
        let s = set.get("DENSE_SWITCH").unwrap();
        assert!(!s.data.is_empty(), "{target}: the jump table is copied");
        assert!(s.code_holes.iter().any(|h| h.value == HoleValue::Data), "{target}: the table is addressed");
        match target {
            // Absolute 64-bit entries: one Code hole per case.
            Target::X86_64 => {
                assert!(s.data_holes.len() >= 10);
                assert!(s.data_holes.iter().all(|h| h.value == HoleValue::Code && h.kind == RelocKind::X86_64_64));
                assert!(s.data_holes.iter().all(|h| (h.addend as usize) < s.code.len()));
            }
            // Entries relative to a label in the code: no relocations.
            Target::Aarch64 => assert!(s.data_holes.is_empty()),
        }
    }
}

#[test]
fn writable_data_is_rejected_naming_the_stencil() {
    for target in Target::ALL {
        let e = build_err(target, "bad/writable.c", "writable");
        assert_eq!(e.stencil.as_deref(), Some("COUNTS"), "{e}");
        assert!(e.message.contains("writable data section"), "{e}");
        assert!(e.file.as_ref().is_some_and(|f| f.ends_with("bad/writable.c")), "{e}");
        assert!(e.to_string().contains("ember_stencil_COUNTS"), "{e}");
    }
}

#[test]
fn thread_locals_are_rejected_naming_the_stencil() {
    for target in Target::ALL {
        let e = build_err(target, "bad/tls.c", "tls");
        assert_eq!(e.stencil.as_deref(), Some("USES_TLS"), "{e}");
        // An unsupported relocation type (TPOFF32 / TLSLE_*), named.
        let named = match target {
            Target::X86_64 => "R_X86_64_TPOFF32",
            Target::Aarch64 => "R_AARCH64_TLSLE_",
        };
        assert!(e.message.contains("unsupported relocation") && e.message.contains(named), "{e}");
    }
}

#[test]
fn unknown_hole_symbols_are_rejected() {
    for target in Target::ALL {
        let e = build_err(target, "bad/unknown_hole.c", "unknown-hole");
        assert_eq!(e.stencil.as_deref(), Some("BAD_HOLE"), "{e}");
        assert!(e.message.contains("unknown hole symbol _EMBER_OPARG2"), "{e}");
    }
}

#[test]
fn clang_errors_name_the_file() {
    let work = scratch("clang-error");
    let source = work.join("broken.c");
    fs::write(&source, "#include \"Python.h\"\nint ember_stencil_X(void) { return undeclared; }\n").unwrap();
    let e = build(&config(Target::X86_64, &[source.clone()], &work)).unwrap_err();
    let _ = fs::remove_dir_all(&work);
    assert_eq!(e.file.as_deref(), Some(source.as_path()));
    assert!(e.message.contains("clang failed") && e.message.contains("undeclared"), "{e}");
}

#[test]
fn non_function_stencil_symbols_are_rejected() {
    let work = scratch("non-function");
    let source = work.join("data.c");
    fs::write(&source, "const int ember_stencil_DATA = 1;\n").unwrap();
    let e = build(&config(Target::Aarch64, &[source], &work)).unwrap_err();
    let _ = fs::remove_dir_all(&work);
    assert_eq!(e.stencil.as_deref(), Some("DATA"));
    assert!(e.message.contains("not a function"), "{e}");
}

/// Two builds from copies of the fixtures in different directories (and
/// different object directories) emit byte-identical Rust.
#[test]
fn tables_are_deterministic() {
    let emit_from = |dir: &Path| -> Vec<String> {
        for file in ["fixture.h", "ops.c", "extra.c"] {
            fs::copy(fixtures().join(file), dir.join(file)).unwrap();
        }
        let sources = [dir.join("extra.c"), dir.join("ops.c")];
        Target::ALL
            .iter()
            .map(|&t| {
                let mut config = config(t, &sources, &dir.join("objects"));
                config.jobs = if dir.ends_with("a") { 1 } else { 2 };
                emit_rust(&build(&config).unwrap_or_else(|e| panic!("{e}")))
            })
            .collect()
    };
    let root = scratch("determinism");
    let (a, b) = (root.join("a"), root.join("elsewhere/b"));
    fs::create_dir_all(&a).unwrap();
    fs::create_dir_all(&b).unwrap();
    let first = emit_from(&a);
    let second = emit_from(&b);
    let _ = fs::remove_dir_all(&root);
    for (x, y) in first.iter().zip(&second) {
        assert!(x == y, "the emitted tables differ between two builds");
        assert!(!x.contains(root.to_str().unwrap()), "a build path leaked into the tables");
        assert!(x.contains("pub static STENCILS: &[Stencil]") && x.contains("pub fn lookup"));
    }
    assert!(first[0].contains("\"x86_64-linux-gnu\"") && first[1].contains("\"aarch64-linux-gnu\""));
}

/// The emitted source is valid Rust for the types (checked by compiling it
/// in ember-stencils too); here: one stencil's entry, as text.
#[test]
fn emitted_entries_look_right() {
    let set = build_fixture(Target::Aarch64, "ops.c", "emit");
    let text = emit_rust(&set);
    assert!(text.starts_with("// @generated by stencil-build for aarch64-linux-gnu"));
    assert!(text.contains("name: \"LOAD_SMALL\""));
    assert!(text.contains("kind: RelocKind::Aarch64_MOVW_UABS { group: 3 }, value: HoleValue::Oparg"));
    assert!(text.contains("value: HoleValue::Symbol("));
    let load_small = set.get("LOAD_SMALL").unwrap();
    assert!(text.contains(&format!("trailing_continue: Some({}),", load_small.trailing_continue.unwrap())));
}

/// CPython's structures have the same layout in the aarch64 build as in the
/// x86-64 one (checks the cross headers, including a generated pyconfig.h).
#[test]
fn cpython_layouts_agree_between_targets() {
    let blobs: Vec<Vec<u8>> = Target::ALL
        .iter()
        .map(|&t| {
            let set = build_fixture(t, "layout.c", "layout");
            let s = set.get("LAYOUT").unwrap();
            assert!(s.code_holes.iter().any(|h| h.value == HoleValue::Data));
            s.data.clone()
        })
        .collect();
    assert_eq!(blobs[0].len(), 24 * 8);
    let words = |b: &[u8]| b.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>();
    assert_eq!(words(&blobs[0]), words(&blobs[1]), "x86-64 vs aarch64 layouts");
}

#[test]
fn cold_paths_split_on_x86_64() {
    let work = scratch("split");
    let whole = build(&config(Target::X86_64, &[fixtures().join("ops.c")], &work)).unwrap_or_else(|e| panic!("{e}"));
    let mut with_split = config(Target::X86_64, &[fixtures().join("ops.c")], &work);
    with_split.split_cold = true;
    let split = build(&with_split).unwrap_or_else(|e| panic!("{e}"));
    let _ = fs::remove_dir_all(&work);
    check_invariants(&split);
    // What a stencil refers to is kept; the parts add branches to each
    // other (Code, Cold) and to the next stencil (Continue).
    let kept = |holes: Vec<HoleValue>| {
        let mut v: Vec<String> = holes
            .into_iter()
            .filter(|v| !matches!(v, HoleValue::Code | HoleValue::Cold | HoleValue::Continue))
            .map(|v| format!("{v:?}"))
            .collect();
        v.sort();
        v
    };
    let mut n_split = 0;
    for (w, s) in whole.stencils.iter().zip(&split.stencils) {
        if s.cold.is_empty() {
            assert_eq!(w, s);
            continue;
        }
        n_split += 1;
        let mut both = values(&s.code_holes);
        both.extend(values(&s.cold_holes));
        assert_eq!(kept(values(&w.code_holes)), kept(both), "{}", s.name);
        // The common path ends with its jump to the next stencil.
        let tail = s.trailing_continue.expect("a split stencil ends its common path with a jump to Continue");
        assert_eq!(tail as usize, s.code.len() - 5, "{}", s.name);
        let last = s.code_holes.last().unwrap();
        assert_eq!((last.offset, last.value), (tail + 1, HoleValue::Continue), "{}", s.name);
        assert!(s.code.len() < w.code.len(), "{}: the common path is shorter", s.name);
    }
    assert!(n_split > 0, "no fixture stencil was split");
}
