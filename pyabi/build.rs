use std::env;
use std::path::PathBuf;
use std::process::Command;

fn python_include() -> PathBuf {
    if let Ok(dir) = env::var("EMBER_PYTHON_INCLUDE") {
        return PathBuf::from(dir);
    }
    let python = env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3.14".into());
    let out = Command::new(&python)
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} to find CPython's headers: {e}; set EMBER_PYTHON_INCLUDE"));
    assert!(out.status.success(), "{python} failed to report its include directory");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn main() {
    println!("cargo:rerun-if-changed=src/layout.c");
    println!("cargo:rerun-if-changed=src/opcodes.c");
    println!("cargo:rerun-if-env-changed=EMBER_PYTHON_INCLUDE");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    let include = python_include();
    assert!(
        include.join("internal/pycore_interpframe_structs.h").exists(),
        "{} lacks CPython 3.14's internal headers (install python3.14-dev)",
        include.display()
    );
    cc::Build::new()
        .file("src/layout.c")
        .file("src/opcodes.c")
        .include(&include)
        .include(include.join("internal"))
        .define("Py_BUILD_CORE", "1")
        .warnings(true)
        // CPython's own inline functions have unused parameters.
        .flag("-Wno-unused-parameter")
        .compile("ember_pyabi_layout");
    // For crates that compile C against the same headers (links metadata).
    println!("cargo:include={}", include.display());
}
