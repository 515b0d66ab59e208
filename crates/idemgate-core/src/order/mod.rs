//! Order per entity (SPEC §12, v4): on an async route with `order_key`,
//! deliveries of one entity reach the origin one at a time, the oldest
//! `order_time` first, and one older than what the origin already has is
//! marked stale (or, with `on_stale = "skip"`, ended `superseded`).
//!
//! One order object per route, scope and order key (a Durable Object in
//! the Worker, [`object_name`]) keeps that entity's [`OrderBook`]: who
//! waits, who holds the turn, the newest time delivered. A key's object
//! asks it for the turn before each attempt ([`OrderCall::Ask`]) and
//! tells it how the attempt ended ([`OrderCall::Done`]). The turn is a
//! lease, as a flow permit is: a holder that dies gives it up when the
//! lease ends, and the book then asks the holder how its delivery stands
//! before anyone else goes.
//!
//! - [`book`]: the book's rules, pure;
//! - [`time`]: reading an event's own time.

pub mod book;
#[cfg(test)]
mod tests;
pub mod time;

use serde::{Deserialize, Serialize};

use crate::canonical::sha256_hex;

pub use crate::host::AlarmStep;
pub use book::OrderBook;

/// What an ordered delivery carries from its acceptance to each attempt:
/// kept with the stored request, so a route edited meanwhile changes
/// neither its entity nor its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderTicket {
    /// The entity's order object ([`object_name`]).
    pub object: String,
    /// The event's own time, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// `ORDER_HOLD_MS` when it was accepted.
    pub hold_ms: u64,
    /// `on_stale = "skip"`: a stale delivery ends `superseded` rather than
    /// being forwarded with `Idempotency-Stale: true`. A re-drive clears it
    /// (the operator asked for the forward).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_stale: bool,
}

/// The order object of `order_key` on `route` in `scope` (the route's and
/// its tenant's: tenants never share an entity, paths do). The key's
/// value is hashed: it names an object, and may be long.
pub fn object_name(route: &str, scope: &str, order_key: &str) -> String {
    let entity = sha256_hex(format!("{scope}\n{order_key}").as_bytes());
    format!("idemgate/order/v1|{route}|{entity}")
}

/// The route an order object's name ([`object_name`]) belongs to.
pub fn route_of(object: &str) -> Option<&str> {
    let rest = object.strip_prefix("idemgate/order/v1|")?;
    rest.rsplit_once('|').map(|(route, _)| route)
}

/// A key's object asks for its delivery's turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// The asking key's object: one entry per holder.
    pub holder: String,
    pub time_ms: u64,
    pub accepted_at: u64,
    pub hold_ms: u64,
    /// How long the attempt may hold the turn (the route's lease).
    pub lease_ms: u64,
    /// How long the book remembers the newest time delivered
    /// (`RETENTION_SECONDS`).
    pub retention_ms: u64,
}

/// How an attempt under the turn, or the wait for one, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The origin accepted it: its time is now delivered.
    Delivered,
    /// Dead, superseded or purged: it leaves the book, delivering nothing.
    Ended,
    /// It tries again then (a retry on its schedule, or a wait for a flow
    /// permit), and keeps its place: later ones wait behind it.
    RetryAt(u64),
}

/// What the order object is asked (the Worker's RPC body, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderCall {
    Ask(Ask),
    Done {
        ask: Ask,
        /// The turn the attempt held, if it held one.
        grant: Option<u64>,
        outcome: Outcome,
    },
}

/// The order object's answer to [`OrderCall::Ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderReply {
    /// The turn is this delivery's for `lease_ms` from when the call was
    /// sent; `stale` when its time is older than one already delivered.
    Go {
        grant: u64,
        lease_ms: u64,
        stale: bool,
    },
    /// Not its turn: it asks again at `retry_at`, or when woken.
    Wait { retry_at: u64 },
    /// To [`OrderCall::Done`].
    Noted,
}

/// What a key's object answers the order object's wake: how its delivery
/// stands, which the book needs when a turn's lease ended without a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HolderStatus {
    /// Still to be delivered: it asks again.
    Pending,
    /// Completed: the origin has its time.
    Delivered,
    /// Dead, superseded, purged or expired.
    Ended,
}

impl OrderCall {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("an order call serialises")
    }

    pub fn decode(line: &str) -> Result<OrderCall, String> {
        serde_json::from_str(line).map_err(|error| format!("not an order call: {error}"))
    }
}

impl OrderReply {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("an order reply serialises")
    }

    pub fn decode(line: &str) -> Result<OrderReply, String> {
        serde_json::from_str(line).map_err(|error| format!("not an order reply: {error}"))
    }
}

impl HolderStatus {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a holder status serialises")
    }

    pub fn decode(line: &str) -> Result<HolderStatus, String> {
        serde_json::from_str(line).map_err(|error| format!("not a holder status: {error}"))
    }
}
