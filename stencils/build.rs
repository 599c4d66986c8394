//! Compiles `c/*.c` with stencil-build for the target being built and writes
//! the tables to `$OUT_DIR/stencils.rs` (included by src/lib.rs).
//!
//! Environment: `EMBER_CLANG` (default clang-21), `EMBER_PYTHON_INCLUDE`
//! (default: what `$PYO3_PYTHON`/python3.14 reports).

use std::env;
use std::fs;
use std::path::PathBuf;

use stencil_build::{build, emit_rust, python_include_dir, Config, Target, DEFAULT_CLANG};

fn main() {
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed=src/types.rs");
    for var in ["EMBER_CLANG", "EMBER_PYTHON_INCLUDE", "PYO3_PYTHON"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let target = Target::from_name(&arch)
        .unwrap_or_else(|| panic!("Ember's stencils support x86_64 and aarch64, not {arch}"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let c_dir = manifest.join("c");
    let mut sources: Vec<PathBuf> = match fs::read_dir(&c_dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect(),
        Err(_) => Vec::new(),
    };
    sources.sort();

    let python_include = python_include_dir().unwrap_or_else(|e| panic!("{e}"));
    let mut config = Config::new(target, python_include, out.join("objects"));
    config.clang = env::var_os("EMBER_CLANG").map_or_else(|| DEFAULT_CLANG.into(), PathBuf::from);
    config.include_dirs.push(c_dir);
    config.sources = sources;
    let set = build(&config).unwrap_or_else(|e| panic!("{e}"));
    for warning in &set.warnings {
        for line in warning.lines() {
            println!("cargo:warning={line}");
        }
    }
    let tables = emit_rust(&set);
    let path = out.join("stencils.rs");
    // Rewrite only when different: an unchanged table keeps dependents fresh.
    if fs::read_to_string(&path).ok().as_deref() != Some(tables.as_str()) {
        fs::write(&path, tables).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
