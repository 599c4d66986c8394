//! Running clang: one object per C file, in parallel, with the flags of
//! README.md ("Compiler flags").

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use crate::{Config, Error};

/// The pinned clang: the stencils' machine code (and so the tables) depend
/// on the compiler version, so one version is used everywhere.
pub const DEFAULT_CLANG: &str = "clang-21";
pub const CLANG_MAJOR: u32 = 21;

/// Flags for every target (the target-specific ones are in target.rs).
const COMMON_FLAGS: &[&str] = &[
    "-c",
    "-O3",
    "-std=c11",
    "-DPy_BUILD_CORE",
    // CPython's release build: no assert() in the inline helpers.
    "-DNDEBUG",
    // CPython is compiled with it (sysconfig CFLAGS): wrapping signed
    // arithmetic, the semantics its inline helpers are written for.
    "-fno-strict-overflow",
    // One section per function and per datum: a stencil copies exactly the
    // sections it references.
    "-ffunction-sections",
    "-fdata-sections",
    // Absolute addressing for data (patched as immediates); no PLT/GOT
    // assumptions about where the code will live.
    "-fno-pic",
    // Calls to external functions go through a GOT slot (`call *slot(%rip)`,
    // `adrp/ldr/blr`), which tier 1 can place next to the code, instead of a
    // rel32/26-bit call that must reach libpython directly.
    "-fno-plt",
    // No .eh_frame to copy or patch.
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    // Canaries would reference __stack_chk_guard (TLS / writable data).
    "-fno-stack-protector",
    // Jump tables would add data sections with code addresses; branches
    // are as fast for the small switches in stencils. (Supported anyway:
    // the table is copied and its entries become Code holes.)
    "-fno-jump-tables",
    // Stencils are glued together by tail calls; a frame pointer would be
    // set up and torn down in every one of them.
    "-fomit-frame-pointer",
    // Uninitialised globals must be an error, not a common symbol.
    "-fno-common",
];

/// One compiled object.
pub(crate) struct Object {
    pub source: PathBuf,
    pub bytes: Vec<u8>,
    /// clang's warnings, if it printed any.
    pub diagnostics: Option<String>,
}

/// CPython's include directory: `$EMBER_PYTHON_INCLUDE`, else what
/// `$PYO3_PYTHON` (default `python3.14`) reports (as pyabi/build.rs does).
pub fn python_include_dir() -> Result<PathBuf, Error> {
    if let Ok(dir) = env::var("EMBER_PYTHON_INCLUDE") {
        return Ok(PathBuf::from(dir));
    }
    let python = env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3.14".into());
    let out = Command::new(&python)
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
        .output()
        .map_err(|e| Error::new(format!("cannot run {python} to find CPython's headers ({e}); set EMBER_PYTHON_INCLUDE")))?;
    if !out.status.success() {
        return Err(Error::new(format!("{python} failed to report its include directory")));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Checks that `clang` is the pinned major version.
fn check_clang(clang: &Path) -> Result<(), Error> {
    let out = Command::new(clang)
        .arg("--version")
        .output()
        .map_err(|e| Error::new(format!("cannot run {} ({e}); stencils need clang {CLANG_MAJOR}", clang.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let major = text
        .split("clang version ")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .and_then(|m| m.trim().parse::<u32>().ok());
    match major {
        Some(CLANG_MAJOR) => Ok(()),
        _ => Err(Error::new(format!(
            "{} is not clang {CLANG_MAJOR} (it says: {})",
            clang.display(),
            text.lines().next().unwrap_or("nothing")
        ))),
    }
}

/// The full clang command line for one source (without `-o`).
pub(crate) fn clang_args(config: &Config, system_includes: &[PathBuf], source: &Path) -> Vec<String> {
    let mut args = vec![format!("--target={}", config.target.triple())];
    args.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
    args.extend(config.target.clang_flags().iter().map(|s| s.to_string()));
    // Paths that could end up in the object (__FILE__) are made relative,
    // so the tables do not depend on where the repository is checked out.
    if let Some(dir) = source.parent().filter(|d| !d.as_os_str().is_empty()) {
        args.push(format!("-ffile-prefix-map={}=.", dir.display()));
    }
    for dir in &config.include_dirs {
        args.push(format!("-I{}", dir.display()));
    }
    args.push(format!("-I{}", config.python_include.display()));
    args.push(format!("-I{}", config.python_include.join("internal").display()));
    for dir in system_includes {
        args.push("-isystem".into());
        args.push(dir.display().to_string());
    }
    args.extend(config.extra_flags.iter().cloned());
    args.push(source.display().to_string());
    args
}

/// Compiles every source of `config`, in order.
pub(crate) fn compile_all(config: &Config) -> Result<Vec<Object>, Error> {
    check_clang(&config.clang)?;
    fs::create_dir_all(&config.work_dir)
        .map_err(|e| Error::new(format!("{}: {e}", config.work_dir.display())))?;
    let system_includes = config
        .target
        .system_includes(&config.python_include, &config.work_dir)
        .map_err(Error::new)?;

    // Object names come from the source names: they must be unique.
    let mut stems = std::collections::BTreeSet::new();
    for source in &config.sources {
        let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if !stems.insert(stem.clone()) {
            return Err(Error::new(format!("two sources named {stem}.c")).in_file(source));
        }
    }

    let jobs = match config.jobs {
        0 => thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(config.sources.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Object, Error>>>> =
        Mutex::new((0..config.sources.len()).map(|_| None).collect());
    thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(source) = config.sources.get(i) else { break };
                let result = compile_one(config, &system_includes, source);
                results.lock().unwrap()[i] = Some(result);
            });
        }
    });
    // The first error in source order, so the report does not depend on timing.
    results.into_inner().unwrap().into_iter().map(|r| r.expect("every source compiled")).collect()
}

fn compile_one(config: &Config, system_includes: &[PathBuf], source: &Path) -> Result<Object, Error> {
    let stem = source.file_stem().unwrap_or_default().to_string_lossy();
    let object = config.work_dir.join(format!("{stem}.{}.o", config.target.triple()));
    let args = clang_args(config, system_includes, source);
    let out = Command::new(&config.clang)
        .args(&args)
        .arg("-o")
        .arg(&object)
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", config.clang.display())).in_file(source))?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if !out.status.success() {
        return Err(Error::new(format!(
            "clang failed ({}):\n{stderr}\ncommand: {} {}",
            out.status,
            config.clang.display(),
            args.join(" ")
        ))
        .in_file(source));
    }
    let bytes = fs::read(&object).map_err(|e| Error::new(format!("{}: {e}", object.display())).in_file(source))?;
    Ok(Object {
        source: source.to_owned(),
        bytes,
        diagnostics: (!stderr.is_empty()).then_some(stderr),
    })
}
