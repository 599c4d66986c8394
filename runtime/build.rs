// Link GCC's unwinder statically (libgcc_eh.a) instead of depending on
// libgcc_s.so.1: loading that library in every process that imports Ember
// cost about 0.15 ms on the development VM (a dlopen, and its constructor
// runs CPUID, which traps under virtualisation). Whole-archive, so that
// every unwinder symbol the standard library uses is defined before the
// linker reaches -lgcc_s (which --as-needed then drops).
fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_env == "gnu" {
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
        // Relative relocations packed (DT_RELR, glibc 2.36 and later): the
        // stencil tables' pointers are thousands of them, whose 24-byte
        // entries the loader would otherwise read, page by page, in every
        // process that imports Ember.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,pack-relative-relocs");
    }
}
