//! Per-code counters and the promotion policy.

pub mod ptrmap;
pub use ptrmap::{PtrMap, RawMap, Slot};

use std::fmt;

/// Where a code object runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Tier {
    /// CPython's own interpreter.
    Interpreter = 0,
    /// The copy-and-patch baseline compiler.
    Baseline = 1,
    /// The optimising compiler.
    Optimizing = 2,
}

impl Tier {
    pub fn from_number(n: i64) -> Option<Tier> {
        match n {
            0 => Some(Tier::Interpreter),
            1 => Some(Tier::Baseline),
            2 => Some(Tier::Optimizing),
            _ => None,
        }
    }
    pub fn number(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

/// Counters kept for one code object. Updated with the GIL held.
#[derive(Debug, Default, Clone)]
pub struct CodeProfile {
    /// Frames started from the first instruction (calls).
    pub calls: u64,
    /// Frames resumed part-way (generators, coroutines resumed after a yield).
    pub resumes: u64,
    /// Back-edges (`JUMP_BACKWARD`: loop iterations) taken in tier-1 code,
    /// which increments this field through its address; the interpreter's
    /// are not seen. The profile must not move while compiled code exists.
    pub back_edges: u64,
    /// Tier the user pinned this code to, if any.
    pub pinned: Option<Tier>,
    /// Tier it currently runs at.
    pub tier: Option<Tier>,
}

impl CodeProfile {
    pub fn current_tier(&self) -> Tier {
        self.tier.unwrap_or(Tier::Interpreter)
    }
}

/// Process-wide totals; they outlive the code objects they counted.
#[derive(Debug, Default, Clone)]
pub struct GlobalCounters {
    /// Frames the hook saw that are not in a live record's counts (those of
    /// freed records, and frames whose record could not be made).
    pub frames: u64,
    /// Code objects that got a profile.
    pub code_objects_seen: u64,
    /// Profiles freed with their code objects.
    pub code_objects_freed: u64,
}

/// Highest tier compiled into this build; pins above it are refused.
pub const MAX_AVAILABLE_TIER: Tier = Tier::Baseline;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_numbers_round_trip() {
        for n in 0..3 {
            assert_eq!(Tier::from_number(n).unwrap().number() as i64, n);
        }
        assert_eq!(Tier::from_number(3), None);
        assert_eq!(Tier::from_number(-1), None);
    }

    #[test]
    fn fresh_profile_runs_in_interpreter() {
        assert_eq!(CodeProfile::default().current_tier(), Tier::Interpreter);
    }
}
