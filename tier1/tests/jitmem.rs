//! The executable arena: blocks are written once, then readable and
//! executable, never writable; freed blocks are reused; the header every
//! region starts with is there; `mapped_bytes` follows live blocks.

use ember_tier1::jitmem::{mapped_bytes, Arena, Backing, REGION_SIZE};

/// `mov eax, imm32; ret` / `mov w0, #imm16; ret`.
fn returns(value: u16) -> Vec<u8> {
    if cfg!(target_arch = "aarch64") {
        let mut v = (0x5280_0000u32 | ((value as u32) << 5)).to_le_bytes().to_vec();
        v.extend_from_slice(&0xD65F_03C0u32.to_le_bytes());
        v
    } else {
        let mut v = vec![0xB8];
        v.extend_from_slice(&(value as u32).to_le_bytes());
        v.push(0xC3);
        v
    }
}

fn call(addr: u64) -> u32 {
    let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(addr as usize) };
    f()
}

/// Permissions of the mapping holding `addr`, from /proc/self/maps.
fn perms(addr: u64) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let range = parts.next().unwrap();
        let (lo, hi) = range.split_once('-').unwrap();
        let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
        if lo <= addr && addr < hi {
            return parts.next().unwrap().to_string();
        }
    }
    panic!("{addr:#x} is not mapped")
}

fn exercise(backing: Backing) {
    let header: Vec<u8> = (0..200u8).collect();
    let arena = Arena::with_backing(header.clone(), backing);
    let mut blocks = Vec::new();
    for i in 0..50u16 {
        let mut b = arena.alloc(100 + i as usize).unwrap();
        assert!(b.len() >= 100 + i as usize);
        let code = returns(i);
        b.write(&code).unwrap();
        assert_eq!(&b.bytes()[..code.len()], &code[..]);
        assert_eq!(call(b.addr()), i as u32);
        let p = perms(b.addr());
        assert!(p.contains('x') && !p.contains('w'), "{backing:?}: {p}");
        // The header is at the start of the block's region, within reach.
        let base = b.region_base();
        assert!(b.addr() >= base + header.len() as u64 && b.addr() < base + REGION_SIZE as u64);
        let h = unsafe { std::slice::from_raw_parts(base as *const u8, header.len()) };
        assert_eq!(h, &header[..]);
        blocks.push(b);
    }
    // Blocks do not overlap.
    let mut ranges: Vec<_> = blocks.iter().map(|b| (b.addr(), b.addr() + b.len() as u64)).collect();
    ranges.sort();
    assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0));
    // Freed blocks are reused, and what runs there is what was written last.
    let freed: Vec<u64> = blocks.drain(..25).map(|b| b.addr()).collect();
    let mut reused = 0;
    for i in 0..25u16 {
        let mut b = arena.alloc(100).unwrap();
        reused += freed.contains(&b.addr()) as usize;
        b.write(&returns(1000 + i)).unwrap();
        assert_eq!(call(b.addr()), 1000 + i as u32);
        blocks.push(b);
    }
    let _ = reused;
    for b in &blocks {
        assert!(call(b.addr()) >= 25);
    }
}

#[test]
fn memfd_arena() {
    exercise(Backing::Memfd);
}

#[test]
fn anon_arena() {
    exercise(Backing::Anon);
}

#[test]
fn reuse_after_the_bump_space_is_used() {
    // Fill a first chunk, free everything, allocate again: freed space is
    // taken before the region grows, and runs what was written last.
    let arena = Arena::with_backing(vec![0; 64], Backing::Memfd);
    let first: Vec<_> = (0..64)
        .map(|i| {
            let mut b = arena.alloc(1000).unwrap();
            b.write(&returns(i)).unwrap();
            assert_eq!(call(b.addr()), i as u32);
            b
        })
        .collect();
    let addrs: Vec<u64> = first.iter().map(|b| b.addr()).collect();
    drop(first);
    let mut again = Vec::new();
    for i in 0..64u16 {
        let mut b = arena.alloc(1000).unwrap();
        b.write(&returns(500 + i)).unwrap();
        assert_eq!(call(b.addr()), 500 + i as u32);
        again.push(b);
    }
    assert!(again.iter().any(|b| addrs.contains(&b.addr())), "freed blocks are reused");
}

#[test]
fn freed_blocks_are_mapped_afresh_in_one_batch() {
    // Blocks that ran, freed every other one, then taken again once the
    // fresh space is used: each runs what was written last (an emulator's
    // translations of the old code are dropped), the live blocks on the same
    // pages still run theirs, and the freed span was mapped afresh once for
    // all of them, not once per block.
    let arena = Arena::with_backing(vec![0; 64], Backing::Memfd);
    let mut blocks: Vec<Option<_>> = (0..64u16)
        .map(|i| {
            let mut b = arena.alloc(1000).unwrap();
            b.write(&returns(i)).unwrap();
            assert_eq!(call(b.addr()), i as u32);
            Some(b)
        })
        .collect();
    let freed: Vec<u64> = (0..64).step_by(2).map(|i| blocks[i].take().unwrap().addr()).collect();
    let mut again = Vec::new();
    for i in 0..32u16 {
        let mut b = arena.alloc(1000).unwrap();
        assert!(freed.contains(&b.addr()), "the first chunk is used up: freed blocks are taken");
        b.write(&returns(900 + i)).unwrap();
        assert_eq!(call(b.addr()), 900 + i as u32);
        again.push(b);
    }
    assert_eq!(arena.refreshes(), 1, "one mapping afresh for the 32 freed blocks");
    for (i, b) in blocks.iter().enumerate().filter_map(|(i, b)| b.as_ref().map(|b| (i, b))) {
        assert_eq!(call(b.addr()), i as u32);
    }
    // One block freed alone waits for others: the region grows instead of
    // mapping afresh for it. Freed with enough others, it is reused.
    let first = again.pop().unwrap().addr();
    let mut b = arena.alloc(1000).unwrap();
    assert_ne!(b.addr(), first);
    b.write(&returns(5000)).unwrap();
    assert_eq!(call(b.addr()), 5000);
    assert_eq!(arena.refreshes(), 1);
    let mut freed: Vec<u64> = again.drain(..20).map(|b| b.addr()).collect();
    freed.push(first);
    // Use up the fresh space, then the freed blocks come back, mapped afresh once.
    let mut fresh = Vec::new();
    let reused = loop {
        let mut b = arena.alloc(1000).unwrap();
        b.write(&returns(6000)).unwrap();
        assert_eq!(call(b.addr()), 6000);
        if freed.contains(&b.addr()) {
            break b;
        }
        fresh.push(b);
        assert!(fresh.len() < 1000, "freed blocks never reused");
    };
    assert_eq!(call(reused.addr()), 6000);
    assert_eq!(arena.refreshes(), 2);
}

#[test]
fn mapped_bytes_follow_live_blocks() {
    let arena = Arena::with_backing(vec![0; 64], Backing::Memfd);
    // Other tests allocate concurrently: compare with a margin.
    let mut b = arena.alloc(1 << 20).unwrap();
    b.write(&returns(7)).unwrap();
    let during = mapped_bytes();
    assert!(during >= 1 << 20);
    drop(b);
    assert!(mapped_bytes() < during, "freeing a block gives its bytes back");
}

#[test]
fn memfd_pages_allocated_ahead_stay_few() {
    // A short program compiles a few hundred KiB of code: the pages its
    // file has allocated (and zeroed) ahead of use must stay within an
    // eighth of what it uses, or 64 KiB (chunks doubling to 2 MiB had
    // allocated 960 KiB for 520 KiB of code).
    let arena = Arena::with_backing(vec![0; 4096], Backing::Memfd);
    let mut blocks = Vec::new();
    for _ in 0..130 {
        let mut b = arena.alloc(4000).unwrap();
        b.write(&returns(3)).unwrap();
        blocks.push(b);
        let (allocated, used) = arena.file_bytes();
        assert!(allocated >= used);
        assert!(allocated <= used + (used / 8).max(64 << 10) + 4096, "{allocated} allocated for {used} used");
    }
    assert!(arena.file_bytes().1 >= 520_000);
}
