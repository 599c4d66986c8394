//! The C half of tier 1's run-time protocol (`csrc/glue.c`): entering
//! compiled code, and the helpers stencils call by name.

use core::ffi::c_void;

pub type EntryFn = unsafe extern "C" fn();

extern "C" {
    /// Run `frame` in compiled code from `entry` (C ABI; calls the
    /// `preserve_none` stencil chain). Returns the frame's result or NULL.
    pub fn ember_run(tstate: *mut c_void, frame: *mut c_void, entry: u64) -> *mut c_void;
    fn ember_handoff();
    fn ember_handle_pending();
    fn ember_unwind();
    fn ember_do_raise();
    fn ember_call();
    fn ember_build_tuple();
    fn ember_build_list();
}

/// Address of one of Ember's own helpers that stencils call, by name.
pub fn symbol(name: &str) -> Option<u64> {
    let f: EntryFn = match name {
        "ember_handoff" => ember_handoff,
        "ember_handle_pending" => ember_handle_pending,
        "ember_unwind" => ember_unwind,
        "ember_do_raise" => ember_do_raise,
        "ember_call" => ember_call,
        "ember_build_tuple" => ember_build_tuple,
        "ember_build_list" => ember_build_list,
        _ => return None,
    };
    Some(f as usize as u64)
}
