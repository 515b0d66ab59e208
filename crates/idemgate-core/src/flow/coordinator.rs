//! One route's permits: granted, reserved for a queued holder, or given
//! back; the queue of holders waiting, oldest accepted first; and the
//! token bucket of its rate. Pure: the Worker's coordinator object feeds
//! it calls and the time, writes the [`Changes`] it reports (in the same
//! turn, so in one commit), sets its alarm to [`Coordinator::next_alarm`]
//! and sends the wakes it asks for. A restart loses nothing: the state is
//! the rows it wrote ([`Coordinator::restore`]).
//!
//! Why the limit holds: a permit is counted from when it is granted or
//! reserved until it is given back or its lease ends, and no grant is
//! made while the count is at `max_in_flight`. A holder forwards only
//! under a granted permit and only within its lease (the lease is the
//! forward's timeout plus a margin), so forwards at the origin never
//! outnumber the permits counted. A lost reply or release only keeps a
//! permit counted longer; never shorter.

use super::{FlowCall, FlowLimits, FlowStatus, PermitReply, PermitRequest, CLAIM_MS, REQUEUE_MS};

/// What a release answers.
pub const RELEASED: &str = "released";

/// One token of the rate's bucket, in the bucket's unit: a millisecond at
/// a rate given in thousandths per second adds exactly its product.
const TOKEN: u64 = 1_000_000;

/// A permit, as stored: one per holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    pub holder: String,
    /// Which grant this is: a release of an earlier one frees nothing.
    pub grant: u64,
    pub expires_at: u64,
    /// Reserved for a queued holder and not yet claimed.
    pub reserved: bool,
}

/// A holder waiting for a permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub holder: String,
    pub accepted_at: u64,
    pub enqueued_at: u64,
}

/// The coordinator's own row: its bucket (in millionths of a token), its
/// grant counter and the limits it was last told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub tokens: u64,
    pub refilled_at: u64,
    pub next_grant: u64,
    pub limits: FlowLimits,
}

/// The rows a call changed: what the object writes before it answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub permits: Vec<Permit>,
    pub permits_removed: Vec<String>,
    pub waiters: Vec<Waiter>,
    pub waiters_removed: Vec<String>,
    pub meta: Option<Meta>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// Permits are at most `max_in_flight` (10,000) and waiters a backlog's
/// size: plain vectors, the waiters kept in the order they are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    permits: Vec<Permit>,
    waiters: Vec<Waiter>,
    meta: Meta,
    changes: Changes,
    wakes: Vec<String>,
    /// Reservations whose holder never claimed them before their claim
    /// ran out (a lost or late wake), since last taken: the benchmark's
    /// count of permits lost to expired claims.
    claims_expired: u64,
}

impl Coordinator {
    /// One call, as the route's coordinator object answers it: the reply's
    /// line.
    pub fn apply(&mut self, call: &FlowCall, now: u64) -> String {
        match call {
            FlowCall::Acquire(request) => self.acquire(request, now).encode(),
            FlowCall::Release {
                holder,
                grant,
                limits,
            } => {
                self.release(holder, *grant, *limits, now);
                RELEASED.to_string()
            }
            FlowCall::Status => self.status(now).encode(),
        }
    }

    /// The limits a call carries (the route's, as its configuration says
    /// now); none for a status read.
    pub fn limits_of(call: &FlowCall) -> FlowLimits {
        match call {
            FlowCall::Acquire(request) => request.limits,
            FlowCall::Release { limits, .. } => *limits,
            FlowCall::Status => FlowLimits::default(),
        }
    }

    pub fn new(limits: FlowLimits, now: u64) -> Coordinator {
        Coordinator::restore(Vec::new(), Vec::new(), None, limits, now)
    }

    /// The coordinator its stored rows describe (`meta` is `None` before
    /// its first write).
    pub fn restore(
        permits: Vec<Permit>,
        mut waiters: Vec<Waiter>,
        meta: Option<Meta>,
        limits: FlowLimits,
        now: u64,
    ) -> Coordinator {
        let meta = meta.unwrap_or(Meta {
            tokens: bucket_size(&limits),
            refilled_at: now,
            next_grant: 1,
            limits,
        });
        waiters.sort_unstable_by(|a, b| order(a).cmp(&order(b)));
        // A holder both waiting and holding a permit (rows an earlier
        // version left, or a write cut short) keeps its permit: reserving
        // it again would shorten a forward's lease to a claim's.
        let mut changes = Changes::default();
        waiters.retain(|waiter| {
            let holds = permits.iter().any(|permit| permit.holder == waiter.holder);
            if holds {
                changes.waiters_removed.push(waiter.holder.clone());
            }
            !holds
        });
        Coordinator {
            permits,
            waiters,
            meta,
            changes,
            wakes: Vec::new(),
            claims_expired: 0,
        }
    }

    /// A holder asks for a permit.
    pub fn acquire(&mut self, request: &PermitRequest, now: u64) -> PermitReply {
        self.settle(request.limits, now);
        if let Some(held) = self
            .permit_of(&request.holder)
            .filter(|permit| !permit.reserved)
        {
            // Granted and not given back: a forward under it may still be
            // at the origin (its holder restarted, its answer or release
            // was lost, or its key began a new life), so the holder waits
            // for that lease to end; granting it again would be a second
            // forward under one permit.
            let expires_at = held.expires_at;
            return match request.wait {
                true => PermitReply::Queued {
                    retry_at: expires_at,
                },
                false => PermitReply::Busy {
                    retry_after_ms: expires_at.saturating_sub(now).max(1),
                },
            };
        }
        if request.wait && self.permit_of(&request.holder).is_none() {
            self.enqueue(request, now);
            self.dispatch(now);
        }
        if let Some(grant) = self.permit_of(&request.holder).map(|permit| permit.grant) {
            // Its reservation: claimed for the forward's lease.
            self.wakes.retain(|holder| *holder != request.holder);
            return self.grant(&request.holder, grant, request.lease_ms, now);
        }
        if request.wait {
            return PermitReply::Queued {
                retry_at: now + REQUEUE_MS,
            };
        }
        // Sync: never ahead of a waiter, never over a limit.
        if self.waiters.is_empty() && self.has_room() && self.has_token() {
            self.take_token();
            let grant = self.next_grant();
            return self.grant(&request.holder, grant, request.lease_ms, now);
        }
        PermitReply::Busy {
            retry_after_ms: self.retry_after_ms(),
        }
    }

    /// A holder gives back its permit `grant`; the next waiter may have it.
    pub fn release(&mut self, holder: &str, grant: u64, limits: FlowLimits, now: u64) {
        self.settle(limits, now);
        if self
            .permit_of(holder)
            .is_some_and(|permit| permit.grant == grant)
        {
            self.remove_permit(holder);
        }
        self.dispatch(now);
    }

    /// The object's alarm: leases that ended come back, and waiters get
    /// what is free.
    pub fn on_alarm(&mut self, now: u64) {
        let limits = self.meta.limits;
        self.settle(limits, now);
        self.dispatch(now);
    }

    /// When the alarm should run next: the first lease to end, or, with
    /// waiters held back by the rate, the next token.
    pub fn next_alarm(&self) -> Option<u64> {
        let lease_end = self.permits.iter().map(|permit| permit.expires_at).min();
        let next_token = match self.waiters.is_empty() {
            false if self.has_room() => {
                self.next_token_in_ms().map(|ms| self.meta.refilled_at + ms)
            }
            _ => None,
        };
        match (lease_end, next_token) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The holders whose permit was reserved: wake each, so it claims it.
    pub fn take_wakes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.wakes)
    }

    /// Reservations that ran out unclaimed since the last call.
    pub fn take_claims_expired(&mut self) -> u64 {
        std::mem::take(&mut self.claims_expired)
    }

    /// The rows changed since the last call.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    pub fn status(&self, now: u64) -> FlowStatus {
        FlowStatus {
            permits_in_use: self.permits.len() as u64,
            waiting: self.waiters.len() as u64,
            oldest_wait_ms: self
                .waiters
                .iter()
                .map(|waiter| now.saturating_sub(waiter.enqueued_at))
                .max(),
        }
    }

    #[cfg(test)]
    pub fn permits(&self) -> &[Permit] {
        &self.permits
    }

    /// The holders waiting, in the order they are served.
    #[cfg(test)]
    pub fn waiting_holders(&self) -> Vec<&str> {
        self.waiters
            .iter()
            .map(|waiter| waiter.holder.as_str())
            .collect()
    }

    /// Permits counted now (granted or reserved, lease not ended).
    pub fn in_use(&self) -> usize {
        self.permits.len()
    }

    fn permit_of(&self, holder: &str) -> Option<&Permit> {
        self.permits.iter().find(|permit| permit.holder == holder)
    }

    /// Takes the limits as the route now sets them, gives back the
    /// permits whose lease ended, and refills the bucket.
    fn settle(&mut self, limits: FlowLimits, now: u64) {
        if limits != self.meta.limits {
            self.meta.limits = limits;
            self.meta.tokens = self.meta.tokens.min(bucket_size(&limits));
            self.changes.meta = Some(self.meta.clone());
        }
        let ended: Vec<String> = self
            .permits
            .iter()
            .filter(|permit| permit.expires_at <= now)
            .map(|permit| permit.holder.clone())
            .collect();
        self.claims_expired += self
            .permits
            .iter()
            .filter(|permit| permit.expires_at <= now && permit.reserved)
            .count() as u64;
        for holder in ended {
            self.remove_permit(&holder);
        }
        if let Some(rate) = self.meta.limits.rate_thousandths {
            let elapsed = now.saturating_sub(self.meta.refilled_at);
            let tokens = self
                .meta
                .tokens
                .saturating_add(elapsed.saturating_mul(rate))
                .min(bucket_size(&limits));
            if elapsed > 0 {
                self.meta.tokens = tokens;
                self.meta.refilled_at = now;
                self.changes.meta = Some(self.meta.clone());
            }
        }
    }

    /// Reserves what is free for the oldest waiters, and wakes them.
    fn dispatch(&mut self, now: u64) {
        while !self.waiters.is_empty() && self.has_room() && self.has_token() {
            let waiter = self.waiters.remove(0);
            self.forget_waiter(&waiter.holder);
            self.take_token();
            let permit = Permit {
                holder: waiter.holder.clone(),
                grant: self.next_grant(),
                expires_at: now + CLAIM_MS,
                reserved: true,
            };
            self.put_permit(permit);
            self.wakes.push(waiter.holder);
        }
    }

    fn enqueue(&mut self, request: &PermitRequest, now: u64) {
        if self
            .waiters
            .iter()
            .any(|waiter| waiter.holder == request.holder)
        {
            return;
        }
        let waiter = Waiter {
            holder: request.holder.clone(),
            accepted_at: request.accepted_at,
            enqueued_at: now,
        };
        let at = self
            .waiters
            .partition_point(|queued| order(queued) < order(&waiter));
        self.waiters.insert(at, waiter.clone());
        self.changes.waiters.push(waiter);
    }

    fn grant(&mut self, holder: &str, grant: u64, lease_ms: u64, now: u64) -> PermitReply {
        if let Some(at) = self
            .waiters
            .iter()
            .position(|waiter| waiter.holder == holder)
        {
            self.waiters.remove(at);
            self.forget_waiter(holder);
        }
        self.put_permit(Permit {
            holder: holder.to_string(),
            grant,
            expires_at: now + lease_ms,
            reserved: false,
        });
        PermitReply::Granted { grant, lease_ms }
    }

    fn put_permit(&mut self, permit: Permit) {
        self.changes
            .permits_removed
            .retain(|holder| *holder != permit.holder);
        self.changes
            .permits
            .retain(|changed| changed.holder != permit.holder);
        self.changes.permits.push(permit.clone());
        match self
            .permits
            .iter_mut()
            .find(|held| held.holder == permit.holder)
        {
            Some(held) => *held = permit,
            None => self.permits.push(permit),
        }
    }

    /// A waiter served: its row goes, and so does its insert if it was
    /// queued in this same step, since rows are written removals first.
    fn forget_waiter(&mut self, holder: &str) {
        self.changes
            .waiters
            .retain(|changed| changed.holder != holder);
        self.changes.waiters_removed.push(holder.to_string());
    }

    fn remove_permit(&mut self, holder: &str) {
        self.permits.retain(|permit| permit.holder != holder);
        self.changes
            .permits
            .retain(|changed| changed.holder != holder);
        self.changes.permits_removed.push(holder.to_string());
    }

    fn has_room(&self) -> bool {
        self.meta
            .limits
            .max_in_flight
            .is_none_or(|max| self.permits.len() < max as usize)
    }

    fn has_token(&self) -> bool {
        self.meta.limits.rate_thousandths.is_none() || self.meta.tokens >= TOKEN
    }

    fn take_token(&mut self) {
        if self.meta.limits.rate_thousandths.is_some() {
            self.meta.tokens -= TOKEN;
            self.changes.meta = Some(self.meta.clone());
        }
    }

    fn next_grant(&mut self) -> u64 {
        let grant = self.meta.next_grant;
        self.meta.next_grant += 1;
        self.changes.meta = Some(self.meta.clone());
        grant
    }

    /// How long until the bucket holds a token, when the rate limits.
    fn next_token_in_ms(&self) -> Option<u64> {
        let rate = self.meta.limits.rate_thousandths?.max(1);
        let missing = TOKEN.saturating_sub(self.meta.tokens);
        Some(missing.div_ceil(rate))
    }

    /// A sync caller's wait: until the next token when the rate holds it
    /// back, else a second (a forward's end cannot be known).
    fn retry_after_ms(&self) -> u64 {
        match self.next_token_in_ms() {
            Some(ms) if !self.has_token() => ms.max(1),
            _ => 1_000,
        }
    }
}

/// The order waiters are served in: accepted first.
fn order(waiter: &Waiter) -> (u64, &str) {
    (waiter.accepted_at, waiter.holder.as_str())
}

/// One second's worth of tokens, and at least one.
fn bucket_size(limits: &FlowLimits) -> u64 {
    limits
        .rate_thousandths
        .map_or(0, |rate| rate.saturating_mul(1_000).max(TOKEN))
}

/// What one step of a coordinator object changed: the rows to write, and
/// how many claims expired in it (counted for the benchmark's figures).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub changes: Changes,
    pub claims_expired: u64,
}

/// A route's coordinator object is a host of this book, kept as rows.
impl crate::host::Book for Coordinator {
    type Call = FlowCall;
    type Reply = String;
    type Changes = Step;

    fn apply(&mut self, call: &FlowCall, now: u64) -> String {
        Coordinator::apply(self, call, now)
    }

    /// Leases that ended come back; waiters get what is free. A
    /// coordinator is never forgotten: its route's limits live in it.
    fn alarm(&mut self, now: u64) -> crate::host::AlarmStep {
        self.on_alarm(now);
        crate::host::AlarmStep::Keep
    }

    fn next_alarm(&self) -> Option<u64> {
        Coordinator::next_alarm(self)
    }

    fn take_wakes(&mut self) -> Vec<String> {
        Coordinator::take_wakes(self)
    }

    fn take_changes(&mut self) -> Step {
        Step {
            changes: Coordinator::take_changes(self),
            claims_expired: self.take_claims_expired(),
        }
    }
}
