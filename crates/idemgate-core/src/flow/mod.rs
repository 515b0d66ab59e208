//! Flow control (SPEC §2, v3): `MAX_IN_FLIGHT` and `RATE_PER_SECOND` per
//! route, held across every isolate and location by one coordinator per
//! route (a Durable Object in the Worker) that grants permits with leases.
//!
//! A key's object asks for a permit before each forward and gives it back
//! when the origin has answered. A permit lost with a crashed holder comes
//! back when its lease ends, so the limit holds without trusting any
//! holder to release. Async deliveries over a limit wait in the
//! coordinator's queue, oldest accepted first: when a permit frees, the
//! coordinator reserves it for the oldest waiter and wakes that waiter's
//! object, which claims it. A sync delivery over a limit is refused (429
//! `origin-busy`) before its receipt changes.
//!
//! [`coordinator`] is the coordinator's state machine; this module holds
//! what crosses between a key's object and the coordinator.

pub mod coordinator;
#[cfg(test)]
mod tests;
mod wire;

pub use coordinator::{Changes, Coordinator, Meta, Permit, Step, Waiter};

/// A route's limits (a route with flow control sets at least one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowLimits {
    /// Forwards at the origin at once (`MAX_IN_FLIGHT`, 1 to 10000).
    pub max_in_flight: Option<u32>,
    /// Forwards started per second (`RATE_PER_SECOND`), in thousandths
    /// (`0.5` is 500): a token bucket holding one second's worth, and at
    /// least one token. Whole numbers keep the bucket exact.
    pub rate_thousandths: Option<u64>,
    /// How many coordinators share the route's limits (`FLOW_SHARDS`,
    /// SPEC §15 v5): the limits above are the route's, each coordinator
    /// keeping its share ([`FlowLimits::share`]). A coordinator is sent
    /// its share, with 1 here.
    pub shards: u16,
}

/// No limit, one coordinator.
impl Default for FlowLimits {
    fn default() -> FlowLimits {
        FlowLimits {
            max_in_flight: None,
            rate_thousandths: None,
            shards: 1,
        }
    }
}

/// `FLOW_SHARDS`' bound.
pub const MAX_FLOW_SHARDS: u16 = 64;

impl FlowLimits {
    /// The route's limits over `shards` coordinators: refused when a
    /// coordinator's share would be below 1 (in flight, or a forward a
    /// second).
    pub fn split(self, shards: u16) -> Result<FlowLimits, String> {
        let shards = shards.max(1);
        if self
            .max_in_flight
            .is_some_and(|max| max < u32::from(shards))
        {
            return Err(format!(
                "splits MAX_IN_FLIGHT {} over {shards} coordinators: each needs at least 1",
                self.max_in_flight.unwrap_or(0)
            ));
        }
        if self
            .rate_thousandths
            .is_some_and(|rate| rate < 1_000 * u64::from(shards))
        {
            return Err(format!(
                "splits RATE_PER_SECOND over {shards} coordinators: each needs at least 1 a second"
            ));
        }
        Ok(FlowLimits { shards, ..self })
    }

    /// The coordinator `holder` asks, and its share of the limits: even,
    /// the first coordinators taking what does not divide, so the shares
    /// sum to the route's limits exactly.
    pub fn share(self, holder: &str) -> (u16, FlowLimits) {
        let shards = self.shards.max(1);
        let shard = crate::index::shard::shard_of(holder, shards);
        let part = |whole: u64| {
            let (each, rest) = (whole / u64::from(shards), whole % u64::from(shards));
            each + u64::from(u64::from(shard) < rest)
        };
        let share = FlowLimits {
            max_in_flight: self.max_in_flight.map(|max| part(u64::from(max)) as u32),
            rate_thousandths: self.rate_thousandths.map(part),
            shards: 1,
        };
        (shard, share)
    }
}

/// A key's object asks for a permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitRequest {
    /// The asking object's name: a holder has at most one permit.
    pub holder: String,
    /// When the delivery was accepted: waiters are served oldest first.
    pub accepted_at: u64,
    /// How long the forward may hold the permit: its lease.
    pub lease_ms: u64,
    /// Async: wait in the queue when over a limit; sync: refuse.
    pub wait: bool,
    pub limits: FlowLimits,
}

/// The coordinator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermitReply {
    /// Forward now, within the permit's lease of `lease_ms` (counted at
    /// the coordinator from when it answered); give back `grant` when the
    /// origin has answered.
    Granted { grant: u64, lease_ms: u64 },
    /// Queued: the coordinator wakes the holder when its permit is
    /// reserved; `retry_at` is when to ask again should that wake be lost.
    Queued { retry_at: u64 },
    /// Over a limit (sync): retry after this long.
    Busy { retry_after_ms: u64 },
}

/// What a route's coordinator is asked (the Worker's RPC body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowCall {
    Acquire(PermitRequest),
    Release {
        holder: String,
        grant: u64,
        limits: FlowLimits,
    },
    Status,
}

/// What the operator sees of a route's flow control (SPEC §7).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowStatus {
    /// Permits granted or reserved, not yet given back or expired.
    pub permits_in_use: u64,
    /// Async deliveries queued for a permit.
    pub waiting: u64,
    /// How long the oldest of them has waited.
    pub oldest_wait_ms: Option<u64>,
}

/// The name of `route`'s coordinator object, in a class of its own.
pub fn coordinator_name(route: &str) -> String {
    format!("idemgate/flow/v1|{route}")
}

/// The name of `route`'s coordinator number `shard` (`FLOW_SHARDS`):
/// the first keeps the name of the route's only coordinator.
pub fn shard_coordinator_name(route: &str, shard: u16) -> String {
    match shard {
        0 => coordinator_name(route),
        shard => format!("idemgate/flow/v1|{route}|{shard}"),
    }
}

/// The last moment, on the holder's clock, that a forward under a permit
/// granted for `lease_ms` may still run. The lease began at the
/// coordinator no earlier than the holder sent its call (`asked_at`),
/// whatever the two clocks say and however long the answer took to come
/// back, so a forward that ends by `asked_at + lease_ms` ends within it;
/// `margin_ms` (the route's lease less its timeout) is kept for late
/// timers.
pub fn forward_deadline(asked_at: u64, lease_ms: u64, margin_ms: u64) -> u64 {
    asked_at.saturating_add(lease_ms.saturating_sub(margin_ms))
}

/// The timeout of a forward that must end by `deadline`, at `now`: the
/// route's own, or what is left of the permit's lease. `None` when less
/// than half the route's timeout is left (an answer that came back late):
/// the permit goes back unused and the delivery asks again, rather than
/// forward with a timeout the origin cannot meet.
pub fn forward_timeout(deadline: u64, now: u64, origin_timeout_ms: u64) -> Option<u64> {
    let left = deadline.saturating_sub(now);
    (left > 0 && left >= origin_timeout_ms / 2).then(|| left.min(origin_timeout_ms))
}

/// How long a reservation waits for its holder to claim it: the wake may
/// be lost, and the holder then asks again when its own timer runs out.
pub const CLAIM_MS: u64 = 15_000;
/// When a queued holder asks again if no wake came.
pub const REQUEUE_MS: u64 = 30_000;
/// When a holder whose coordinator could not be reached asks again: a
/// limit that cannot be checked delays, it never lets a burst through.
pub const UNREACHABLE_RETRY_MS: u64 = 5_000;
/// When an async holder whose grant came back too late to use asks again.
pub const LATE_GRANT_RETRY_MS: u64 = 1_000;
/// A delivery that waited for its permit longer than this is logged
/// (`waited_for_permit`).
pub const LOGGED_WAIT_MS: u64 = 1_000;
