//! CPython-version knowledge for Ember: layouts and private entry points.
//! One module per supported CPython version; today only 3.14.

pub mod locations;
pub mod opcodes;
pub mod v3_14;
pub use v3_14 as current;

use core::ffi::{c_char, CStr};

#[repr(C)]
struct LayoutEntry {
    name: *const c_char,
    value: usize,
}

extern "C" {
    static ember_layout_3_14: [LayoutEntry; 0];
}

/// The table compiled from the headers, as (name, value) pairs.
pub fn header_layout() -> Vec<(String, usize)> {
    let mut out = Vec::new();
    // SAFETY: layout.c terminates the table with a NULL name.
    unsafe {
        let mut p = ember_layout_3_14.as_ptr();
        while !(*p).name.is_null() {
            out.push((CStr::from_ptr((*p).name).to_string_lossy().into_owned(), (*p).value));
            p = p.add(1);
        }
    }
    out
}

/// Compare the Rust definitions with the headers Ember was built against.
/// Returns one line per disagreement.
pub fn check_layout() -> Result<(), String> {
    let headers = header_layout();
    let mut errors = Vec::new();
    for (name, value) in v3_14::expected() {
        match headers.iter().find(|(n, _)| n == name) {
            Some((_, v)) if *v == value => {}
            Some((_, v)) => errors.push(format!("{name}: Rust says {value}, headers say {v}")),
            None => errors.push(format!("{name}: missing from layout.c")),
        }
    }
    if headers.len() != v3_14::expected().len() {
        errors.push(format!(
            "layout.c has {} entries, Rust checks {}",
            headers.len(),
            v3_14::expected().len()
        ));
    }
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rust_layout_matches_headers() {
        super::check_layout().unwrap();
    }

    #[test]
    fn header_table_is_not_empty() {
        assert!(super::header_layout().len() >= 15);
    }
}
