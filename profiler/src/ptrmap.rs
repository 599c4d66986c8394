//! A map from object addresses to per-object records, for the frame
//! evaluator's hot path.
//!
//! Why not `co_extra`: any `co_extra` data makes CPython 3.14 consider a code
//! object stateful (`_PyCode_CheckNoInternalState`), which changes what
//! subinterpreters may share and what `test_code` sees. A side table keyed by
//! address, with entries removed when the object dies, is invisible.
//!
//! Open addressing, linear probing, deletion by backward shift (no
//! tombstones), at most 3/8 full: a lookup is a multiply, a shift and
//! usually one compare. Key 0 marks an empty slot.
//!
//! A key's cost is the length of its probe, paid on every call of its code
//! object: at half load about one key in 30 lay 5 or more slots from home, and
//! a hot code object that did (the generators benchmark's `__iter__`, by the
//! luck of its address) cost 16% more instructions in all. Insertion is
//! Robin Hood's (a key probing past one nearer its home takes its slot and
//! moves it on), which evens the probes out; with the lower load, about one
//! key in 1,000 needs 5.

const MIN_CAPACITY: usize = 1024;

/// One slot: C code may probe the table (see [`PtrMap::raw`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Slot<V> {
    pub key: usize,
    pub value: V,
}

/// The table as code outside Rust may probe it: `slots[hash(key) & mask]`
/// onward, where hash is [`PtrMap`]'s (the top `64 - shift` bits of
/// `key * 0x9E3779B97F4A7C15`). Valid until the next insert; `slots` is null
/// while the map has never held anything.
#[repr(C)]
pub struct RawMap<V> {
    pub slots: *const Slot<V>,
    pub mask: usize,
    pub shift: u32,
}

pub struct PtrMap<V: Copy> {
    slots: Vec<Slot<V>>,
    len: usize,
    /// `64 - log2(capacity)`: the hash is the top bits of a product.
    shift: u32,
    empty: V,
    /// A bit for every key that may be in the map (see [`PtrMap::may_contain`]):
    /// set on insertion, cleared by rebuilding it from the slots once
    /// removals have made it stale.
    filter: [u64; FILTER_WORDS],
    removals_since_filter: usize,
}

/// 4096 bits: 512 bytes that stay in the first-level cache when absent keys
/// are asked about one after another, as the table's slots do not.
const FILTER_WORDS: usize = 64;

#[inline(always)]
fn filter_bit(key: usize) -> (usize, u64) {
    // The top 12 bits of another product than the slots' hash.
    let h = ((key as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> 52) as usize;
    (h >> 6, 1u64 << (h & 63))
}

#[inline(always)]
fn hash(key: usize, shift: u32) -> usize {
    // Fibonacci hashing: objects are 16-byte aligned, the product's high bits
    // mix all of the address.
    ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

impl<V: Copy> PtrMap<V> {
    /// An empty map; `empty` is what `get` returns for a missing key (a
    /// null pointer, typically). Allocates nothing until the first insert,
    /// so that it can live in a `static`.
    pub const fn new(empty: V) -> Self {
        PtrMap { slots: Vec::new(), len: 0, shift: 64, empty, filter: [0; FILTER_WORDS], removals_since_filter: 0 }
    }

    /// False when `key` is certainly not in the map, from 512 bytes of
    /// filter rather than the slots: for callers that ask mostly about keys
    /// that are absent (a code watcher, told of every code object that dies).
    #[inline(always)]
    pub fn may_contain(&self, key: usize) -> bool {
        let (word, bit) = filter_bit(key);
        self.filter[word] & bit != 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    #[inline(always)]
    pub fn get(&self, key: usize) -> V {
        if self.slots.is_empty() {
            return self.empty;
        }
        let mask = self.mask();
        let mut i = hash(key, self.shift);
        loop {
            // SAFETY: i <= mask < slots.len().
            let slot = unsafe { self.slots.get_unchecked(i) };
            if slot.key == key {
                return slot.value;
            }
            if slot.key == 0 {
                return self.empty;
            }
            i = (i + 1) & mask;
        }
    }

    /// Insert or replace. `key` must not be 0.
    pub fn insert(&mut self, key: usize, value: V) {
        assert!(key != 0, "PtrMap keys are non-null addresses");
        if (self.len + 1) * 8 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.mask();
        let mut i = hash(key, self.shift);
        loop {
            let slot = &mut self.slots[i];
            if slot.key == key {
                slot.value = value;
                return;
            }
            if slot.key == 0 {
                break;
            }
            i = (i + 1) & mask;
        }
        // Not there: Robin Hood insertion from its home slot.
        let (word, bit) = filter_bit(key);
        self.filter[word] |= bit;
        let mut moving = Slot { key, value };
        let mut i = hash(key, self.shift);
        let mut distance = 0usize;
        loop {
            let slot = &mut self.slots[i];
            if slot.key == 0 {
                *slot = moving;
                self.len += 1;
                return;
            }
            let theirs = i.wrapping_sub(hash(slot.key, self.shift)) & mask;
            if theirs < distance {
                std::mem::swap(slot, &mut moving);
                distance = theirs;
            }
            i = (i + 1) & mask;
            distance += 1;
        }
    }

    /// Remove `key`, returning its value if it was there.
    pub fn remove(&mut self, key: usize) -> Option<V> {
        if self.slots.is_empty() || key == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = hash(key, self.shift);
        loop {
            let k = self.slots[i].key;
            if k == key {
                break;
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
        let value = self.slots[i].value;
        // Backward shift: pull later members of the probe run into the hole
        // unless that would move them before their home slot.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].key;
            if k == 0 {
                break;
            }
            let home = hash(k, self.shift);
            // Distance from home to j and from home to hole, cyclically.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = Slot { key: 0, value: self.empty };
        self.len -= 1;
        // Bits of removed keys stay set until the filter is rebuilt, after
        // an eighth of its bits' worth of removals, or the map's length if
        // larger (a rebuild reads every slot: at most about five per removal).
        self.removals_since_filter += 1;
        if self.removals_since_filter >= (FILTER_WORDS * 64 / 8).max(self.len) {
            self.rebuild_filter();
        }
        Some(value)
    }

    fn rebuild_filter(&mut self) {
        self.filter = [0; FILTER_WORDS];
        for s in &self.slots {
            if s.key != 0 {
                let (word, bit) = filter_bit(s.key);
                self.filter[word] |= bit;
            }
        }
        self.removals_since_filter = 0;
    }

    fn grow(&mut self) {
        let capacity = (self.slots.len() * 2).max(MIN_CAPACITY);
        let old = std::mem::replace(&mut self.slots, vec![Slot { key: 0, value: self.empty }; capacity]);
        self.shift = 64 - capacity.trailing_zeros();
        self.len = 0;
        for s in old {
            if s.key != 0 {
                self.insert(s.key, s.value);
            }
        }
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, V)> + '_ {
        self.slots.iter().filter(|s| s.key != 0).map(|s| (s.key, s.value))
    }

    /// The table for probing from C (valid until the next insert).
    pub fn raw(&self) -> RawMap<V> {
        if self.slots.is_empty() {
            return RawMap { slots: core::ptr::null(), mask: 0, shift: 0 };
        }
        RawMap { slots: self.slots.as_ptr(), mask: self.mask(), shift: self.shift }
    }
}

#[cfg(test)]
mod tests {
    use super::PtrMap;
    use std::collections::HashMap;

    /// The probe C code does over `raw()` (tier1/csrc/glue.h,
    /// ember_find_direct) finds what `get` finds.
    #[test]
    fn raw_view_probes_like_get() {
        let mut m = PtrMap::new(0usize);
        assert!(m.raw().slots.is_null());
        for i in 0..3000usize {
            m.insert(0x7f55_0000_0000 + i * 48, i + 1);
        }
        let r = m.raw();
        let probe = |key: usize| unsafe {
            let mut i = ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> r.shift) as usize;
            loop {
                let s = &*r.slots.add(i);
                if s.key == key {
                    return s.value;
                }
                if s.key == 0 {
                    return 0;
                }
                i = (i + 1) & r.mask;
            }
        };
        for i in 0..3000usize {
            assert_eq!(probe(0x7f55_0000_0000 + i * 48), i + 1);
        }
        assert_eq!(probe(0x7f55_0000_0008), 0);
    }

    #[test]
    fn empty_map_finds_nothing() {
        let m: PtrMap<usize> = PtrMap::new(0);
        assert_eq!(m.get(0x1000), 0);
        assert!(m.is_empty());
    }

    #[test]
    fn insert_get_replace_remove() {
        let mut m = PtrMap::new(0usize);
        m.insert(0x7f00_0010, 1);
        m.insert(0x7f00_0020, 2);
        assert_eq!(m.get(0x7f00_0010), 1);
        assert_eq!(m.get(0x7f00_0020), 2);
        m.insert(0x7f00_0010, 3);
        assert_eq!(m.get(0x7f00_0010), 3);
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove(0x7f00_0010), Some(3));
        assert_eq!(m.remove(0x7f00_0010), None);
        assert_eq!(m.get(0x7f00_0010), 0);
        assert_eq!(m.get(0x7f00_0020), 2);
        assert_eq!(m.len(), 1);
    }

    /// Random inserts and removes of clustered, aligned addresses (what code
    /// objects look like), checked against `HashMap` after every step; the
    /// deletions exercise the backward shift across wrap-around.
    #[test]
    fn agrees_with_hashmap_under_churn() {
        let mut m = PtrMap::new(0usize);
        let mut reference = HashMap::new();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for step in 0..200_000usize {
            let key = 0x7f12_3400_0000usize + ((next() % 5000) as usize) * 16;
            if next() % 3 == 0 {
                assert_eq!(m.remove(key), reference.remove(&key), "step {step}");
            } else {
                m.insert(key, step + 1);
                reference.insert(key, step + 1);
            }
            if step % 997 == 0 {
                for (&k, &v) in &reference {
                    assert_eq!(m.get(k), v, "step {step}");
                    assert!(m.may_contain(k), "step {step}");
                }
            }
            assert_eq!(m.len(), reference.len());
        }
        for k in 0..5000usize {
            let key = 0x7f12_3400_0000usize + k * 16;
            assert_eq!(m.get(key), reference.get(&key).copied().unwrap_or(0));
        }
        assert_eq!(m.iter().count(), reference.len());
    }

    #[test]
    fn filter_turns_away_most_absent_keys_and_forgets_removed_ones() {
        let mut m = PtrMap::new(0usize);
        let key = |i: usize| 0x7f00_0000_0000usize + i * 48;
        for i in 0..300 {
            m.insert(key(i), i + 1);
        }
        let passed = |m: &PtrMap<usize>, range: std::ops::Range<usize>| range.filter(|&i| m.may_contain(key(i))).count();
        assert_eq!(passed(&m, 0..300), 300);
        // 300 keys set at most 300 of 4096 bits.
        assert!(passed(&m, 1000..11000) < 1000, "{}", passed(&m, 1000..11000));
        // Churn: removed keys' bits do not pile up.
        for round in 0..20 {
            for i in 0..300 {
                m.insert(key(100_000 * (round + 1) + i), 1);
            }
            for i in 0..300 {
                assert_eq!(m.remove(key(100_000 * (round + 1) + i)), Some(1));
            }
        }
        assert_eq!(m.len(), 300);
        assert!(passed(&m, 1000..11000) < 2500, "{}", passed(&m, 1000..11000));
    }

    /// Probes stay short for every key, not only on average: 3,000
    /// aligned addresses (a full table, just before it grows) need at most
    /// 5 slots each and 1.4 on average.
    #[test]
    fn every_probe_is_short() {
        let mut m = PtrMap::new(0usize);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut keys = Vec::new();
        // Up to the load at which the next insert would grow the table.
        while m.len() < 3000 || (m.len() + 1) * 8 <= m.slots.len() * 3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let key = 0x7f12_0000_0000usize + ((seed % (1 << 24)) as usize) * 16;
            m.insert(key, 1);
            keys.push(key);
        }
        let probes: Vec<usize> = keys
            .iter()
            .map(|&k| {
                let mut i = super::hash(k, m.shift);
                let mut n = 1;
                while m.slots[i].key != k {
                    i = (i + 1) & m.mask();
                    n += 1;
                }
                n
            })
            .collect();
        let mean = probes.iter().sum::<usize>() as f64 / probes.len() as f64;
        assert!(*probes.iter().max().unwrap() <= 5, "max {}", probes.iter().max().unwrap());
        assert!(mean < 1.4, "mean {mean}");
    }
}
