//! Executable memory for compiled code: an arena of large regions that
//! compiled code objects take blocks of, instead of a mapping each. No page
//! is ever writable and executable at once (W^X).
//!
//! Two backings, chosen when the first region is made:
//!
//! * **memfd** (the default): a region is a `memfd` file mapped
//!   read-execute, and never mapped writable anywhere. Code is built in a
//!   staging buffer and copied into the file with `pwrite`: one system call
//!   per compilation and no page-table change, so publishing code costs
//!   no `mprotect`. The file's pages are allocated ahead in chunks (cheaper
//!   than page by page as `pwrite` would) of an eighth of what the region
//!   has allocated, from 64 KiB to 2 MiB: little a short program never uses
//!   (chunks doubling to 2 MiB made chaos run once spend about 150 us more
//!   compiling, allocating and zeroing pages it did not use), and few
//!   compilations that pay for a chunk in one that compiles much; and
//!   mapped by the first execution in them (with their neighbours, the
//!   kernel's fault-around). Mapping ahead as well (`MADV_POPULATE_READ`)
//!   was measured slower: much of what it maps is never executed (cold parts).
//! * **anon** (when `memfd_create` is unavailable, from the first write a
//!   lowered `RLIMIT_FSIZE` refuses, or with `EMBER_DEV_JIT_MEMORY=anon`):
//!   private anonymous pages, blocks rounded to whole pages, each block made
//!   read-write, written, and made read-execute (two `mprotect`s per
//!   compilation).
//!
//! A region starts with a header the compiler supplies (the process-wide
//! GOT and the stencils' shared data), so every block reaches it with a
//! 32-bit (x86-64) or ADRP (aarch64) displacement: regions are 1 GiB.
//!
//! A block comes from the region's allocated fresh space, else from its
//! freed blocks (best fit, coalesced), else from more allocated space. Freed
//! memory is kept for reuse (memfd) or released to the system (anon, whole
//! pages). An address that held code which may have run is
//! mapped afresh (memfd) or has its pages' protection changed (anon) before
//! new code goes there: on hardware the instruction cache is flushed after
//! every write anyway, but emulators (qemu-user) cache translations of guest
//! code per page and drop them only when the page's mapping or protection
//! changes, not when a file behind it is written. A memfd region maps afresh
//! in batches: blocks freed since its last refresh wait (unused) until they
//! add up to `STALE_BATCH` bytes, or until the region cannot grow, and then
//! the span of them all is mapped afresh at once and they join the freed
//! ranges. Once per reused block, that `mmap` (about 4 us on the development
//! VM) made compiling the median stdlib function into freed memory 2.3
//! times as slow as into fresh memory. Live code in the span is mapped afresh
//! with it, which changes nothing but its next page faults.
//!
//! After `fork`, a memfd region is shared by parent and child: the child
//! never writes to the regions it inherited (it makes its own), and the
//! parent never reuses a block that was live at the fork (the child may
//! still run it).
//!
//! The memfd's descriptor is kept at a high number (512 or more) so that a
//! program closing "all" its descriptors and opening files again does not
//! get it back; one closed under Ember is noticed at the next write (the
//! region is then abandoned for a new one).

use core::ffi::{c_char, c_int, c_long, c_void};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};

/// The message of the error [`Block::write`] returns when the arena has just
/// switched to anonymous pages: the same code, compiled again, will fit.
pub const RETRY_ANON: &str = "memfd write over the file size limit; arena switched to anonymous pages";

/// Bytes of executable memory held by live compiled code (and region
/// headers), process-wide: what `EMBER_CODE_LIMIT_MB` limits.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

pub fn mapped_bytes() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

/// Address space of one region. Every block must reach the region's header
/// (x86-64: ±2 GiB; aarch64 ADRP: ±4 GiB).
pub const REGION_SIZE: usize = 1 << 30;
/// Blocks of the memfd backing start at multiples of this.
pub const BLOCK_ALIGN: usize = 16;
/// Bytes of a memfd region's file allocated at a time: an eighth of what
/// it has, within these bounds.
const MIN_CHUNK: usize = 64 << 10;
const MAX_CHUNK: usize = 2 << 20;
/// Freed bytes of a memfd region that are mapped afresh (and reused) together.
const STALE_BATCH: usize = 16 << 10;

mod sys {
    use super::*;
    pub const PROT_NONE: c_int = 0;
    pub const PROT_READ: c_int = 1;
    pub const PROT_WRITE: c_int = 2;
    pub const PROT_EXEC: c_int = 4;
    pub const MAP_SHARED: c_int = 0x01;
    pub const MAP_PRIVATE: c_int = 0x02;
    pub const MAP_FIXED: c_int = 0x10;
    pub const MAP_ANONYMOUS: c_int = 0x20;
    pub const MAP_NORESERVE: c_int = 0x4000;
    pub const MFD_CLOEXEC: u32 = 1;
    pub const MADV_DONTNEED: c_int = 4;
    pub const F_DUPFD_CLOEXEC: c_int = 1030;
    pub const EINTR: c_int = 4;
    pub const EBADF: c_int = 9;
    pub const EINVAL: c_int = 22;
    pub const ESPIPE: c_int = 29;
    pub const EFBIG: c_int = 27;
    pub const SC_PAGESIZE: c_int = 30;

    extern "C" {
        /// Instruction-cache maintenance after writing code (a no-op on x86-64).
        pub fn ember_clear_cache(start: *mut u8, end: *mut u8);
        pub fn memfd_create(name: *const c_char, flags: u32) -> c_int;
        pub fn ftruncate(fd: c_int, len: i64) -> c_int;
        pub fn fallocate(fd: c_int, mode: c_int, offset: i64, len: i64) -> c_int;
        pub fn pwrite(fd: c_int, buf: *const c_void, n: usize, offset: i64) -> isize;
        pub fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void;
        pub fn munmap(addr: *mut c_void, len: usize) -> c_int;
        pub fn mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int;
        pub fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
        pub fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
        pub fn close(fd: c_int) -> c_int;
        pub fn sysconf(name: c_int) -> c_long;
        pub fn pthread_atfork(
            prepare: Option<unsafe extern "C" fn()>,
            parent: Option<unsafe extern "C" fn()>,
            child: Option<unsafe extern "C" fn()>,
        ) -> c_int;
    }

    pub fn failed(p: *mut c_void) -> bool {
        p as usize == usize::MAX
    }
}

/// Incremented in the child after every fork: regions made under another
/// value were inherited, and are shared with the parent.
static CHILD_GEN: AtomicU64 = AtomicU64::new(0);
/// Incremented in parent and child after every fork: blocks allocated under
/// another value were live at a fork, and the other process may run them.
static FORK_EPOCH: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn after_fork_parent() {
    FORK_EPOCH.fetch_add(1, Ordering::Relaxed);
}

unsafe extern "C" fn after_fork_child() {
    FORK_EPOCH.fetch_add(1, Ordering::Relaxed);
    CHILD_GEN.fetch_add(1, Ordering::Relaxed);
}

fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            let p = unsafe { sys::sysconf(sys::SC_PAGESIZE) };
            let p = if p > 0 && (p as usize).is_power_of_two() { p as usize } else { 4096 };
            PAGE.store(p, Ordering::Relaxed);
            p
        }
        p => p,
    }
}

fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    Memfd,
    Anon,
}

fn default_backing() -> Backing {
    match std::env::var("EMBER_DEV_JIT_MEMORY").as_deref() {
        Ok("anon") => Backing::Anon,
        _ => Backing::Memfd,
    }
}

struct Region {
    base: u64,
    /// The memfd (-1: none, or closed).
    fd: c_int,
    backing: Backing,
    /// `CHILD_GEN` when made.
    generation: u64,
    /// Bytes of the header.
    header: usize,
    /// Next never-used offset.
    bump: usize,
    /// Offsets below this have their pages allocated (memfd).
    allocated: usize,
    /// Freed ranges (offset -> length), coalesced, and the same by size.
    free: BTreeMap<usize, usize>,
    free_by_size: BTreeSet<(usize, usize)>,
    /// Blocks freed since the region was last mapped afresh, not yet among
    /// the freed ranges (memfd; see the module documentation), and their bytes.
    stale: Vec<(usize, usize)>,
    stale_bytes: usize,
    /// A write failed: take no more blocks from it.
    broken: bool,
}

impl Region {
    fn usable(&self) -> bool {
        !self.broken && (self.backing == Backing::Anon || self.generation == CHILD_GEN.load(Ordering::Relaxed))
    }

    fn granule(&self) -> usize {
        match self.backing {
            Backing::Memfd => BLOCK_ALIGN,
            Backing::Anon => page_size(),
        }
    }

    fn add_free(&mut self, mut off: usize, mut len: usize) {
        if let Some((&prev, &plen)) = self.free.range(..off).next_back() {
            if prev + plen == off {
                self.free.remove(&prev);
                self.free_by_size.remove(&(plen, prev));
                off = prev;
                len += plen;
            }
        }
        if let Some(nlen) = self.free.remove(&(off + len)) {
            self.free_by_size.remove(&(nlen, off + len));
            len += nlen;
        }
        self.free.insert(off, len);
        self.free_by_size.insert((len, off));
    }

    /// Best fit among the freed ranges.
    fn take_free(&mut self, len: usize) -> Option<usize> {
        let &(flen, off) = self.free_by_size.range((len, 0)..).next()?;
        self.free_by_size.remove(&(flen, off));
        self.free.remove(&off);
        if flen > len {
            self.free.insert(off + len, flen - len);
            self.free_by_size.insert((flen - len, off + len));
        }
        Some(off)
    }

    /// Allocates the file's pages up to `end` (at least one chunk more).
    fn allocate(&mut self, end: usize) {
        if self.backing != Backing::Memfd || end <= self.allocated {
            return;
        }
        let page = page_size();
        let chunk = (self.allocated / 8).clamp(MIN_CHUNK, MAX_CHUNK);
        let new_end = align_up(end.max(self.allocated + chunk), page).min(REGION_SIZE);
        // An optimisation only: without it pwrite allocates them as it fills them.
        unsafe { sys::fallocate(self.fd, 0, self.allocated as i64, (new_end - self.allocated) as i64) };
        self.allocated = new_end;
    }

    /// Maps the span of the blocks freed since the last refresh afresh, and
    /// makes them freed ranges that blocks may be taken from.
    fn refresh_stale(&mut self) -> io::Result<()> {
        let start = self.stale.iter().map(|&(off, _)| off).min().unwrap_or(0);
        let end = self.stale.iter().map(|&(off, len)| off + len).max().unwrap_or(0);
        self.refresh(start, end - start)?;
        for (off, len) in std::mem::take(&mut self.stale) {
            self.add_free(off, len);
        }
        self.stale_bytes = 0;
        Ok(())
    }

    /// Memory that may have held code which ran: drop every cached
    /// translation of its pages (see the module documentation).
    fn refresh(&self, off: usize, len: usize) -> io::Result<()> {
        if self.backing != Backing::Memfd {
            // Anon blocks change protection when written.
            return Ok(());
        }
        let page = page_size();
        let start = off & !(page - 1);
        let end = align_up(off + len, page);
        let p = unsafe {
            sys::mmap(
                (self.base as usize + start) as *mut c_void,
                end - start,
                sys::PROT_READ | sys::PROT_EXEC,
                sys::MAP_SHARED | sys::MAP_FIXED,
                self.fd,
                start as i64,
            )
        };
        if sys::failed(p) {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

struct State {
    regions: Vec<Region>,
    backing: Option<Backing>,
}

/// The executable arena: regions, each beginning with the same header.
pub struct Arena {
    header: Vec<u8>,
    state: Mutex<State>,
    /// Times freed memory was mapped afresh before reuse.
    refreshes: AtomicU64,
}

/// A block of executable memory, returned to its arena when dropped.
pub struct Block {
    arena: Arc<Arena>,
    region: u32,
    region_base: u64,
    off: usize,
    len: usize,
    epoch: u64,
    fd: c_int,
    backing: Backing,
    written: bool,
}

impl Arena {
    /// An arena whose regions start with `header` (read-only to compiled
    /// code; at most a few pages).
    pub fn new(header: Vec<u8>) -> Arc<Arena> {
        Arc::new(Arena {
            header,
            state: Mutex::new(State { regions: Vec::new(), backing: None }),
            refreshes: AtomicU64::new(0),
        })
    }

    /// An arena with the given backing (memfd falls back to anon where it
    /// cannot be had).
    pub fn with_backing(header: Vec<u8>, backing: Backing) -> Arc<Arena> {
        Arc::new(Arena {
            header,
            state: Mutex::new(State { regions: Vec::new(), backing: Some(backing) }),
            refreshes: AtomicU64::new(0),
        })
    }

    /// Offset in every region where blocks may start (after the header).
    fn header_len(&self) -> usize {
        align_up(self.header.len().max(1), 64)
    }

    /// A block of at least `len` bytes, not yet executable: write it with
    /// [`Block::write`] before running it.
    pub fn alloc(self: &Arc<Self>, len: usize) -> io::Result<Block> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let backing = *st.backing.get_or_insert_with(default_backing);
        // Inherited regions: the fd belongs to the parent's arena now.
        for r in st.regions.iter_mut() {
            if !r.usable() && r.fd >= 0 && r.backing == Backing::Memfd && !r.broken {
                unsafe { sys::close(r.fd) };
                r.fd = -1;
            }
        }
        let header = self.header_len();
        if len == 0 || len > REGION_SIZE - header {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("block of {len} bytes")));
        }
        // Newest usable region first: fresh space, then freed space.
        for (i, r) in st.regions.iter_mut().enumerate().rev() {
            if !r.usable() {
                continue;
            }
            let len = align_up(len, r.granule());
            if r.bump + len <= r.allocated {
                let off = r.bump;
                r.bump += len;
                return Ok(self.block(i, r, off, len));
            }
            if let Some(off) = r.take_free(len) {
                return Ok(self.block(i, r, off, len));
            }
            if !r.stale.is_empty() && (r.stale_bytes >= STALE_BATCH || r.bump + len > REGION_SIZE) {
                r.refresh_stale()?;
                self.refreshes.fetch_add(1, Ordering::Relaxed);
                if let Some(off) = r.take_free(len) {
                    return Ok(self.block(i, r, off, len));
                }
            }
            if r.bump + len <= REGION_SIZE {
                let off = r.bump;
                r.allocate(off + len);
                r.bump += len;
                return Ok(self.block(i, r, off, len));
            }
        }
        let mut r = match backing {
            Backing::Memfd => match self.new_memfd_region() {
                Ok(r) => r,
                Err(_) => {
                    // No memfd here (seccomp, an old kernel): anonymous pages.
                    st.backing = Some(Backing::Anon);
                    self.new_anon_region()?
                }
            },
            Backing::Anon => self.new_anon_region()?,
        };
        let len = align_up(len, r.granule());
        let off = r.bump;
        r.allocate(off + len);
        r.bump += len;
        MAPPED.fetch_add(header, Ordering::Relaxed);
        st.regions.push(r);
        let i = st.regions.len() - 1;
        let r = &st.regions[i];
        Ok(self.block(i, r, off, len))
    }

    fn block(self: &Arc<Self>, i: usize, r: &Region, off: usize, len: usize) -> Block {
        MAPPED.fetch_add(len, Ordering::Relaxed);
        Block {
            arena: self.clone(),
            region: i as u32,
            region_base: r.base,
            off,
            len,
            epoch: FORK_EPOCH.load(Ordering::Relaxed),
            fd: r.fd,
            backing: r.backing,
            written: false,
        }
    }

    fn new_memfd_region(&self) -> io::Result<Region> {
        static ATFORK: Once = Once::new();
        ATFORK.call_once(|| unsafe {
            sys::pthread_atfork(None, Some(after_fork_parent), Some(after_fork_child));
        });
        unsafe {
            let fd = sys::memfd_create(c"ember-tier1".as_ptr(), sys::MFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // Out of the way of the low numbers programs open and close
            // themselves (a daemon closing "all" descriptors then opening
            // files must not get this one back).
            let high = sys::fcntl(fd, sys::F_DUPFD_CLOEXEC, 512 as c_int);
            let fd = if high >= 0 {
                sys::close(fd);
                high
            } else {
                fd
            };
            let fail = |fd: c_int| {
                let e = io::Error::last_os_error();
                sys::close(fd);
                Err(e)
            };
            if sys::ftruncate(fd, REGION_SIZE as i64) != 0 {
                return fail(fd);
            }
            let p = sys::mmap(
                core::ptr::null_mut(),
                REGION_SIZE,
                sys::PROT_READ | sys::PROT_EXEC,
                sys::MAP_SHARED,
                fd,
                0,
            );
            if sys::failed(p) {
                return fail(fd);
            }
            let mut r = Region {
                base: p as u64,
                fd,
                backing: Backing::Memfd,
                generation: CHILD_GEN.load(Ordering::Relaxed),
                header: self.header_len(),
                bump: self.header_len(),
                allocated: 0,
                free: BTreeMap::new(),
                free_by_size: BTreeSet::new(),
                stale: Vec::new(),
                stale_bytes: 0,
                broken: false,
            };
            r.allocate(r.header);
            if let Err(e) = pwrite_all(fd, &self.header, 0) {
                sys::munmap(p, REGION_SIZE);
                sys::close(fd);
                return Err(e);
            }
            Ok(r)
        }
    }

    fn new_anon_region(&self) -> io::Result<Region> {
        let page = page_size();
        unsafe {
            let p = sys::mmap(
                core::ptr::null_mut(),
                REGION_SIZE,
                sys::PROT_NONE,
                sys::MAP_PRIVATE | sys::MAP_ANONYMOUS | sys::MAP_NORESERVE,
                -1,
                0,
            );
            if sys::failed(p) {
                return Err(io::Error::last_os_error());
            }
            let header = align_up(self.header_len(), page);
            if sys::mprotect(p, header, sys::PROT_READ | sys::PROT_WRITE) != 0 {
                let e = io::Error::last_os_error();
                sys::munmap(p, REGION_SIZE);
                return Err(e);
            }
            core::ptr::copy_nonoverlapping(self.header.as_ptr(), p as *mut u8, self.header.len());
            if sys::mprotect(p, header, sys::PROT_READ) != 0 {
                let e = io::Error::last_os_error();
                sys::munmap(p, REGION_SIZE);
                return Err(e);
            }
            Ok(Region {
                base: p as u64,
                fd: -1,
                backing: Backing::Anon,
                generation: CHILD_GEN.load(Ordering::Relaxed),
                header,
                bump: header,
                allocated: REGION_SIZE,
                free: BTreeMap::new(),
                free_by_size: BTreeSet::new(),
                stale: Vec::new(),
                stale_bytes: 0,
                broken: false,
            })
        }
    }

    fn free(&self, b: &Block) {
        MAPPED.fetch_sub(b.len, Ordering::Relaxed);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(r) = st.regions.get_mut(b.region as usize) else { return };
        if !r.usable() {
            return;
        }
        match r.backing {
            Backing::Memfd => {
                // Live at a fork: the other process may still run it.
                if b.epoch != FORK_EPOCH.load(Ordering::Relaxed) {
                    return;
                }
                r.stale.push((b.off, b.len));
                r.stale_bytes += b.len;
                return;
            }
            Backing::Anon => unsafe {
                let p = (r.base as usize + b.off) as *mut c_void;
                if sys::mprotect(p, b.len, sys::PROT_NONE) != 0 {
                    return;
                }
                sys::madvise(p, b.len, sys::MADV_DONTNEED);
            },
        }
        r.add_free(b.off, b.len);
    }

    /// How many times freed memory was mapped afresh before reuse (memfd).
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Bytes of the memfd regions' files allocated, and bytes of them used
    /// (headers and blocks, freed ones too).
    pub fn file_bytes(&self) -> (usize, usize) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let memfd = st.regions.iter().filter(|r| r.backing == Backing::Memfd);
        memfd.fold((0, 0), |(allocated, used), r| (allocated + r.allocated, used + r.bump))
    }

    /// The backing the arena uses (once it has made a region).
    pub fn backing(&self) -> Option<Backing> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).backing
    }
}

fn pwrite_all(fd: c_int, mut bytes: &[u8], mut offset: usize) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = unsafe { sys::pwrite(fd, bytes.as_ptr() as *const c_void, bytes.len(), offset as i64) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(sys::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwrite wrote nothing"));
        }
        bytes = &bytes[n as usize..];
        offset += n as usize;
    }
    Ok(())
}

impl Block {
    pub fn addr(&self) -> u64 {
        self.region_base + self.off as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the region the block lies in (where the header is).
    pub fn region_base(&self) -> u64 {
        self.region_base
    }

    /// Copies `bytes` to the start of the block and makes it executable
    /// (instruction cache included). Once only.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        assert!(bytes.len() <= self.len && !self.written, "block overrun or rewritten");
        let addr = self.addr() as usize;
        match self.backing {
            Backing::Memfd => {
                if let Err(e) = pwrite_all(self.fd, bytes, self.off) {
                    // Out of memory: this compilation fails. The descriptor
                    // is gone (closed by the program, or not a file any
                    // more): the region takes no more code.
                    if matches!(e.raw_os_error(), Some(sys::EBADF | sys::EINVAL | sys::ESPIPE)) {
                        let mut st = self.arena.state.lock().unwrap_or_else(|e| e.into_inner());
                        st.regions[self.region as usize].broken = true;
                    }
                    // The program lowered RLIMIT_FSIZE (which limits writes
                    // to a memfd as to any file): from now on the arena
                    // takes anonymous pages, which no file limit applies to.
                    if e.raw_os_error() == Some(sys::EFBIG) {
                        let mut st = self.arena.state.lock().unwrap_or_else(|e| e.into_inner());
                        for r in st.regions.iter_mut().filter(|r| r.backing == Backing::Memfd) {
                            r.broken = true;
                        }
                        st.backing = Some(Backing::Anon);
                        return Err(io::Error::new(io::ErrorKind::Interrupted, RETRY_ANON));
                    }
                    return Err(e);
                }
            }
            Backing::Anon => unsafe {
                let p = addr as *mut c_void;
                if sys::mprotect(p, self.len, sys::PROT_READ | sys::PROT_WRITE) != 0 {
                    return Err(io::Error::last_os_error());
                }
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len());
                if sys::mprotect(p, self.len, sys::PROT_READ | sys::PROT_EXEC) != 0 {
                    return Err(io::Error::last_os_error());
                }
            },
        }
        unsafe { sys::ember_clear_cache(addr as *mut u8, (addr + bytes.len()) as *mut u8) };
        self.written = true;
        Ok(())
    }

    /// The block's bytes as they are in memory.
    pub fn bytes(&self) -> &[u8] {
        if !self.written {
            return &[];
        }
        // SAFETY: the block is mapped readable while it lives.
        unsafe { core::slice::from_raw_parts(self.addr() as *const u8, self.len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        self.arena.free(self);
    }
}
