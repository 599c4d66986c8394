//! `stencil-build`: build the stencils for one or both targets and report
//! them (name, code and data size, holes by kind), or write the tables.
//!
//!     stencil-build [--target TRIPLE|all] [--clang PATH] [--python-include DIR]
//!                   [-I DIR]... [--work-dir DIR] [--emit DIR] [SOURCE|DIR]...
//!
//! Sources default to `stencils/c`; a directory stands for its `*.c` files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{env, fs};

use stencil_build::{build, emit_rust, python_include_dir, Config, StencilSet, Target, DEFAULT_CLANG};

const USAGE: &str = "usage: stencil-build [--target x86_64-linux-gnu|aarch64-linux-gnu|all] [--clang PATH] \
[--python-include DIR] [-I DIR]... [--work-dir DIR] [--emit DIR] [SOURCE.c|DIR]...";

struct Options {
    targets: Vec<Target>,
    clang: PathBuf,
    python_include: Option<PathBuf>,
    includes: Vec<PathBuf>,
    work_dir: PathBuf,
    emit: Option<PathBuf>,
    sources: Vec<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options {
        targets: Target::ALL.to_vec(),
        clang: env::var_os("EMBER_CLANG").map_or_else(|| PathBuf::from(DEFAULT_CLANG), PathBuf::from),
        python_include: None,
        includes: Vec::new(),
        work_dir: PathBuf::from("target/stencil-build"),
        emit: None,
        sources: Vec::new(),
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or_else(|| format!("{arg} needs {what}"));
        match arg.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--target" => {
                let t = value("a target")?;
                opts.targets = if t == "all" {
                    Target::ALL.to_vec()
                } else {
                    vec![Target::from_name(&t).ok_or_else(|| format!("unknown target {t}"))?]
                };
            }
            "--clang" => opts.clang = value("a path")?.into(),
            "--python-include" => opts.python_include = Some(value("a directory")?.into()),
            "-I" => opts.includes.push(value("a directory")?.into()),
            "--work-dir" => opts.work_dir = value("a directory")?.into(),
            "--emit" => opts.emit = Some(value("a directory")?.into()),
            _ if arg.starts_with("-I") => opts.includes.push(arg[2..].into()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg}")),
            _ => opts.sources.push(arg.into()),
        }
    }
    if opts.sources.is_empty() {
        opts.sources.push("stencils/c".into());
    }
    Ok(opts)
}

/// Files stand for themselves, directories for their `*.c` files (sorted).
fn expand_sources(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = fs::read_dir(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "c"))
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

fn report(set: &StencilSet) {
    println!("# {} — {} stencils, {} external symbols", set.target, set.stencils.len(), set.symbols.len());
    println!("{:<40} {:>6} {:>6} {:>6}  {:<5} holes by kind", "name", "code", "data", "holes", "tail");
    let mut totals: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &set.stencils {
        let counts = s.hole_counts();
        let n: usize = counts.values().sum();
        let kinds: Vec<String> = counts.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        for (k, v) in &counts {
            *totals.entry(k).or_insert(0) += v;
        }
        println!(
            "{:<40} {:>6} {:>6} {:>6}  {:<5} {}",
            s.name,
            s.code.len(),
            s.data.len(),
            n,
            if s.trailing_continue.is_some() { "yes" } else { "-" },
            kinds.join(" ")
        );
    }
    let code: usize = set.stencils.iter().map(|s| s.code.len()).sum();
    let kinds: Vec<String> = totals.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    println!("{:<40} {:>6} {:>6} {:>6}  {:<5} {}", "total", code, "", totals.values().sum::<usize>(), "", kinds.join(" "));
    for w in &set.warnings {
        println!("warning: {w}");
    }
}

fn run() -> Result<(), String> {
    let opts = parse_args()?;
    let sources = expand_sources(&opts.sources)?;
    let python_include = match &opts.python_include {
        Some(dir) => dir.clone(),
        None => python_include_dir().map_err(|e| e.to_string())?,
    };
    for (i, &target) in opts.targets.iter().enumerate() {
        let mut config = Config::new(target, &python_include, opts.work_dir.join(target.triple()));
        config.clang = opts.clang.clone();
        config.include_dirs = opts.includes.clone();
        config.sources = sources.clone();
        let set = build(&config).map_err(|e| e.to_string())?;
        if i > 0 {
            println!();
        }
        report(&set);
        if let Some(dir) = &opts.emit {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let path: PathBuf = Path::new(dir).join(format!("stencils-{}.rs", target.triple()));
            fs::write(&path, emit_rust(&set)).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}
