//! Deliberately broken variants of the receipt protocol, one per invariant
//! of the simulator ([`crate::simulation`]), so that the checker itself is
//! tested. Outside `cargo test` builds [`is_active`] is the constant
//! `false` and every hook compiles away.

/// A single, named defect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// A takeover forwards with the epoch it took over (breaks invariant 1).
    ReuseEpochOnTakeover,
    /// A live lease does not stop a second forward (breaks invariant 2).
    IgnoreLiveLease,
    /// A completed receipt is forwarded again (breaks invariant 3).
    ForwardCompleted,
    /// The fingerprint is not compared (breaks invariant 4).
    SkipFingerprintCheck,
    /// A waiting duplicate is acknowledged at once (breaks invariant 5).
    AcknowledgeWhileWaiting,
    /// A failed receipt is treated as forever in flight (breaks invariant 6).
    FailedStaysInFlight,
    /// Epochs restart from the key's last one, forgetting purged lives
    /// (breaks invariant 1 across purges and expiries).
    EpochRestartsEachLife,
    /// A forward that lost its key still wakes the key's waiters (breaks
    /// the engine's waiter test).
    WakeWaitersOfStaleForward,
    /// A replay answers a body other than the stored one (breaks
    /// invariant 3's byte-for-byte check, on its own).
    CorruptReplayBody,
    /// An async delivery is acknowledged before it is stored (breaks
    /// invariant 7).
    AcknowledgeBeforeDurable,
    /// An accepted async delivery is queued without an alarm (breaks
    /// invariant 8).
    QueueWithoutAlarm,
    /// An async delivery is acknowledged without its index row, its
    /// receipt believing the row written, so nothing writes it again and
    /// the sweep cannot find it when its alarms fail (breaks invariant 9).
    AcknowledgeWithoutIndexRow,
    /// The sweep's wake runs the object's step but leaves its index row
    /// as it is, so a row that lags its receipt stays (breaks invariant 10).
    WakeWithoutReconcile,
    /// A holder forwards for its whole timeout whenever its grant comes
    /// back, as before round 4 (breaks invariant 11).
    ForwardPastItsPermit,
}

#[cfg(test)]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<Mutation>> = const { std::cell::Cell::new(None) };
}

#[cfg(test)]
pub fn activate(mutation: Option<Mutation>) {
    ACTIVE.with(|active| active.set(mutation));
}

#[inline(always)]
pub fn is_active(mutation: Mutation) -> bool {
    #[cfg(test)]
    {
        ACTIVE.with(|active| active.get() == Some(mutation))
    }
    #[cfg(not(test))]
    {
        let _ = mutation;
        false
    }
}
