//! stencil-build: compiles Ember's C stencils with the pinned clang for one
//! target, reads the object files with the `object` crate, turns every
//! `ember_stencil_<NAME>` function into a [`BuiltStencil`] (code, read-only
//! data, holes), and emits the tables as Rust source. The contract it
//! implements is `stencils/README.md`; the flags and the relocations handled
//! are in this crate's README.md.
//!
//! ```no_run
//! use stencil_build::{build, emit_rust, Config, Target};
//! let mut config = Config::new(Target::X86_64, "/usr/include/python3.14", "target/stencil-objects");
//! config.sources.push("stencils/c/core.c".into());
//! let set = build(&config).unwrap();
//! std::fs::write("stencils.rs", emit_rust(&set)).unwrap();
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod compile;
mod emit;
mod extract;
mod split;
mod target;

/// The table types shared with the `ember-stencils` crate (one source file,
/// so the generated tables and the types they are written in cannot drift).
#[path = "../../stencils/src/types.rs"]
pub mod types;

pub use compile::{python_include_dir, CLANG_MAJOR, DEFAULT_CLANG};
pub use emit::emit_rust;
pub use target::Target;
pub use types::{Hole, HoleValue, RelocKind};

/// Prefix of the functions that are stencils; the rest of the name is the
/// stencil's name in the tables.
pub const STENCIL_PREFIX: &str = "ember_stencil_";

/// What to build.
#[derive(Clone, Debug)]
pub struct Config {
    pub target: Target,
    /// The clang to run: must be major version [`CLANG_MAJOR`].
    pub clang: PathBuf,
    /// CPython's include directory (`.../python3.14`); its `internal/`
    /// subdirectory is added too.
    pub python_include: PathBuf,
    /// More `-I` directories.
    pub include_dirs: Vec<PathBuf>,
    /// More clang flags, after the defaults (so they can override them).
    pub extra_flags: Vec<String>,
    /// The C files; each is compiled to one object.
    pub sources: Vec<PathBuf>,
    /// Where objects (and generated headers for cross builds) go.
    pub work_dir: PathBuf,
    /// Parallel clang processes (0: one per available core).
    pub jobs: usize,
    /// Move each stencil's rarely taken paths to its cold part (x86-64;
    /// see `split.rs`).
    pub split_cold: bool,
}

impl Config {
    pub fn new(target: Target, python_include: impl Into<PathBuf>, work_dir: impl Into<PathBuf>) -> Config {
        Config {
            target,
            clang: PathBuf::from(DEFAULT_CLANG),
            python_include: python_include.into(),
            include_dirs: Vec::new(),
            extra_flags: Vec::new(),
            sources: Vec::new(),
            work_dir: work_dir.into(),
            jobs: 0,
            split_cold: false,
        }
    }
}

/// A build error. Names the stencil (and the source file) whenever one is
/// concerned: nothing is dropped silently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub file: Option<PathBuf>,
    pub stencil: Option<String>,
    pub message: String,
}

impl Error {
    pub(crate) fn new(message: impl Into<String>) -> Error {
        Error { file: None, stencil: None, message: message.into() }
    }
    pub(crate) fn in_file(mut self, file: &Path) -> Error {
        self.file.get_or_insert_with(|| file.to_owned());
        self
    }
    pub(crate) fn in_stencil(mut self, name: &str) -> Error {
        self.stencil.get_or_insert_with(|| name.to_owned());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stencil-build: ")?;
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if let Some(stencil) = &self.stencil {
            write!(f, "stencil {STENCIL_PREFIX}{stencil}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// One stencil, owned (the emitted tables hold the same as `&'static`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltStencil {
    /// The name after [`STENCIL_PREFIX`].
    pub name: String,
    /// The source file's name (no directory), for reports.
    pub source: String,
    pub code: Vec<u8>,
    pub code_holes: Vec<Hole>,
    pub data: Vec<u8>,
    pub data_holes: Vec<Hole>,
    pub data_align: u32,
    pub trailing_continue: Option<u32>,
    /// The cold part (see `Stencil::cold`): filled by [`split::split_cold`].
    pub cold: Vec<u8>,
    pub cold_holes: Vec<Hole>,
    /// Bytes of the stencil function's own section, at the start of `code`
    /// (helper functions copied after it follow): a split cuts within it.
    pub home_len: u32,
}

impl BuiltStencil {
    /// Hole counts by value kind (`Symbol(_)` counted together), for reports.
    pub fn hole_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for hole in self.code_holes.iter().chain(&self.data_holes).chain(&self.cold_holes) {
            *counts.entry(hole_value_name(hole.value)).or_insert(0) += 1;
        }
        counts
    }
}

/// A short name for a hole's value kind.
pub fn hole_value_name(value: HoleValue) -> &'static str {
    match value {
        HoleValue::Oparg => "Oparg",
        HoleValue::Operand0 => "Operand0",
        HoleValue::Operand1 => "Operand1",
        HoleValue::ThisInstr => "ThisInstr",
        HoleValue::DispatchInstr => "DispatchInstr",
        HoleValue::NextInstr => "NextInstr",
        HoleValue::Site => "Site",
        HoleValue::Continue => "Continue",
        HoleValue::Jump => "Jump",
        HoleValue::Error => "Error",
        HoleValue::Deopt => "Deopt",
        HoleValue::Code => "Code",
        HoleValue::Data => "Data",
        HoleValue::Cold => "Cold",
        HoleValue::Symbol(_) => "Symbol",
    }
}

/// All stencils of one target, sorted by name, with the external symbols
/// they use (sorted; `HoleValue::Symbol(i)` indexes `symbols`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StencilSet {
    pub target: Target,
    pub stencils: Vec<BuiltStencil>,
    pub symbols: Vec<String>,
    /// Things that build but are probably not what the C author meant
    /// (clang's own warnings, continuations reached through the GOT).
    pub warnings: Vec<String>,
}

impl StencilSet {
    pub fn get(&self, name: &str) -> Option<&BuiltStencil> {
        self.stencils.binary_search_by(|s| s.name.as_str().cmp(name)).ok().map(|i| &self.stencils[i])
    }

    /// Builds the set from object files already compiled for `target`:
    /// `(source name, object bytes)` pairs.
    pub fn from_objects<'a>(
        target: Target,
        objects: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
    ) -> Result<StencilSet, Error> {
        let mut raw = Vec::new();
        for (path, bytes) in objects {
            let source = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
            raw.extend(extract::extract(target, bytes, &source).map_err(|e| e.in_file(path))?);
        }
        extract::link(target, raw)
    }
}

/// Compiles `config.sources` and extracts their stencils.
pub fn build(config: &Config) -> Result<StencilSet, Error> {
    let objects = compile::compile_all(config)?;
    let mut set = StencilSet::from_objects(
        config.target,
        objects.iter().map(|o| (o.source.as_path(), o.bytes.as_slice())),
    )?;
    if config.split_cold && config.target == Target::X86_64 {
        for s in &mut set.stencils {
            split::split_cold(s);
        }
    }
    let mut warnings: Vec<String> = objects.iter().filter_map(|o| o.diagnostics.clone()).collect();
    warnings.append(&mut set.warnings);
    set.warnings = warnings;
    Ok(set)
}
