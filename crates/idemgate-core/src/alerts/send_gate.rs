//! One call to the alert object at a time per isolate, and never one that
//! silences the isolate for ever: a call that has not finished within
//! [`SEND_BOUND_MS`] (it hangs, or the `waitUntil` that carried it was
//! cancelled, so nothing will ever say it ended) no longer holds the gate.

/// How long one flush may hold the gate. Longer than a call to a Durable
/// Object takes when it answers at all; shorter than a person waits for an
/// alert.
pub const SEND_BOUND_MS: u64 = 30_000;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendGate {
    /// When the flush that holds the gate started.
    held_since: Option<u64>,
}

impl SendGate {
    /// Takes the gate at `now`: `false` while another flush holds it and
    /// is within its bound.
    pub fn try_take(&mut self, now: u64) -> bool {
        if self
            .held_since
            .is_some_and(|since| now < since.saturating_add(SEND_BOUND_MS))
        {
            return false;
        }
        self.held_since = Some(now);
        true
    }

    /// The flush that took the gate at `taken_at` ended. A flush that
    /// outlived its bound, whose gate another has taken since, frees
    /// nothing.
    pub fn release(&mut self, taken_at: u64) {
        if self.held_since == Some(taken_at) {
            self.held_since = None;
        }
    }

    /// Whether a flush holds the gate at `now`.
    pub fn is_held(&self, now: u64) -> bool {
        self.held_since
            .is_some_and(|since| now < since.saturating_add(SEND_BOUND_MS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flush_at_a_time() {
        let mut gate = SendGate::default();
        assert!(gate.try_take(1_000));
        assert!(!gate.try_take(1_001));
        gate.release(1_000);
        assert!(gate.try_take(1_002));
    }

    /// The review's item 6: a call that never resolves held the flag for
    /// ever, and the isolate sent no alert again.
    #[test]
    fn a_flush_that_never_ends_holds_the_gate_no_longer_than_its_bound() {
        let mut gate = SendGate::default();
        assert!(gate.try_take(1_000));
        assert!(gate.is_held(1_000 + SEND_BOUND_MS - 1));
        assert!(!gate.try_take(1_000 + SEND_BOUND_MS - 1));
        assert!(!gate.is_held(1_000 + SEND_BOUND_MS));
        assert!(gate.try_take(1_000 + SEND_BOUND_MS));
        // The hung flush ends at last: the newer one keeps the gate.
        gate.release(1_000);
        assert!(gate.is_held(1_000 + SEND_BOUND_MS + 1));
    }
}
