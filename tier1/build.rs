// Compiles csrc/glue.c, tier 1's run-time helpers, with the pinned clang:
// it calls stencils through the `preserve_none` convention, which gcc lacks.
fn main() {
    println!("cargo:rerun-if-changed=csrc/glue.c");
    println!("cargo:rerun-if-changed=../stencils/c/ember_stencil.h");
    println!("cargo:rerun-if-env-changed=EMBER_CLANG");
    let include = std::env::var("DEP_EMBER_PYABI_INCLUDE").expect("ember-pyabi exports the CPython include directory");
    let clang = std::env::var("EMBER_CLANG").unwrap_or_else(|_| "clang-21".into());
    cc::Build::new()
        .compiler(clang)
        .file("csrc/glue.c")
        .include(&include)
        .include(format!("{include}/internal"))
        .define("Py_BUILD_CORE", "1")
        .flag("-std=c11")
        .flag("-fno-strict-aliasing")
        .warnings(true)
        // CPython's own inline functions have unused parameters.
        .flag("-Wno-unused-parameter")
        .compile("ember_tier1_glue");
}
