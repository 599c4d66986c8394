//! Executable memory for compiled code: written while read-write, then
//! turned read-execute before anything runs it, so no page is ever writable
//! and executable at once (W^X). Freed when the owner drops it.

use memmap2::{Mmap, MmapMut};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of compiled code currently mapped, process-wide.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

pub fn mapped_bytes() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

pub struct Writable {
    map: MmapMut,
}

pub struct Executable {
    map: Mmap,
}

extern "C" {
    /// Instruction-cache maintenance after writing code (a no-op on x86-64).
    fn ember_clear_cache(start: *mut u8, end: *mut u8);
}

impl Writable {
    pub fn new(len: usize) -> std::io::Result<Writable> {
        let map = MmapMut::map_anon(len.max(1))?;
        Ok(Writable { map })
    }

    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        &mut self.map[..]
    }

    /// Seal: read-execute from now on.
    pub fn finish(mut self) -> std::io::Result<Executable> {
        let range = self.map.as_mut_ptr_range();
        unsafe { ember_clear_cache(range.start, range.end) };
        let map = self.map.make_exec()?;
        MAPPED.fetch_add(map.len(), Ordering::Relaxed);
        Ok(Executable { map })
    }
}

impl Executable {
    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn bytes(&self) -> &[u8] {
        &self.map[..]
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        MAPPED.fetch_sub(self.map.len(), Ordering::Relaxed);
    }
}
