//! What the engine needs from the world: the key's object's storage and
//! alarm, the origin, the index, the route's coordinator and entity
//! objects, time and randomness. The Durable Object implements it over
//! workers-rs; the native tests and the simulation in memory.

use std::future::Future;

use crate::decision_log::DecisionLog;
use crate::delivery::DeliveryRequest;
use crate::flow::{FlowLimits, PermitReply, PermitRequest};
use crate::index::shard::IndexPlace;
use crate::index::{IndexUpdate, IndexWrite};
use crate::origin::OutboundRequest;
use crate::problem::Problem;
use crate::receipt::{ForwardResult, Receipt};
use crate::signature::Secret;

use super::{Policy, StorageOps};

/// What the engine needs from the world.
#[allow(async_fn_in_trait)] // single-threaded (wasm32): no Send bound wanted
pub trait Backend {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    fn load(&self) -> Result<Option<Receipt>, String>;
    /// Writes the receipt, with its stored response's body, in one row
    /// write: with `request` (an async delivery as accepted) stored beside
    /// it; and a receipt that no longer keeps its request
    /// ([`Receipt::keeps_request`]) drops it in the same write.
    fn save(&self, receipt: &Receipt, request: Option<&DeliveryRequest>) -> Result<(), String>;
    fn load_request(&self) -> Result<Option<DeliveryRequest>, String>;
    /// Deletes everything the object stores, its alarm included; answers
    /// whether a receipt was there. Never parses the receipt.
    async fn delete_all(&self) -> Result<bool, String>;
    /// When the stored receipt may be deleted, read without parsing it:
    /// `Ok(None)` when there is no receipt or it must be kept.
    fn stored_deletable_at(&self) -> Result<Option<u64>, String>;
    async fn set_alarm(&self, at_ms: u64) -> Result<(), String>;
    /// Sends the request; gives up after `timeout_ms` with `TimedOut`.
    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult;
    fn sleep(&self, ms: u64) -> impl Future<Output = ()>;
    /// Random bits (retry jitter).
    fn random(&self) -> u64;
    /// A UUIDv7 for a new life of the key, from `now_ms` and random bits.
    fn new_receipt_id(&self, now_ms: u64) -> String;
    /// One event per decision: counted, and logged when `logged`.
    fn emit(&self, event: &DecisionLog, logged: bool);
    /// Tells health that a receipt's row did not land, or landed after
    /// all ([`crate::index::owed`]); off the delivery's path.
    fn report_row(&self, _report: crate::index::owed::RowReport) {}
    /// Writes the receipt index (the route's shard `place` names, SPEC
    /// §15 v5): whether the row changed, or had a write of the same or a
    /// higher version already.
    async fn index(&self, update: IndexUpdate, place: &IndexPlace) -> Result<IndexWrite, String>;
    /// `INDEX_SHARDS`: how many shards a new row's route has.
    fn index_shards(&self) -> u16 {
        1
    }
    /// A Worker secret by its name (an async receipt signs each attempt
    /// with the secret its terms name, as it is now).
    fn secret(&self, name: &str) -> Option<Secret>;
    /// A route's current policy, if the route exists and is valid: the
    /// terms of an async receipt stored before receipts kept their own,
    /// and the flow-control limits a waiting delivery obeys now.
    fn route_policy(&self, route: &str) -> Option<Policy>;
    /// The policy of a delivery's route; the error says why there is none.
    fn delivery_policy(&self, route: &str) -> Result<Policy, Problem> {
        self.route_policy(route)
            .ok_or_else(|| Problem::Misconfigured {
                variable: format!("ROUTES.{route}"),
                reason: "the gateway named a route this object does not know".into(),
            })
    }
    /// The storage operations of the object's current lifetime, which the
    /// operator's view of a receipt shows.
    fn storage_ops(&self) -> StorageOps {
        StorageOps::default()
    }
    /// Asks `route`'s flow coordinator for a permit (SPEC §2, v3); an
    /// error is a coordinator that could not be reached.
    async fn acquire_permit(
        &self,
        route: &str,
        request: PermitRequest,
    ) -> Result<PermitReply, String>;
    /// Gives permit `grant` back; a failure leaves it to its lease.
    async fn release_permit(&self, route: &str, holder: &str, grant: u64, limits: FlowLimits);
    /// Calls an entity's order object (SPEC §12, v4); an error is an
    /// object that could not be reached.
    async fn order_call(
        &self,
        object: &str,
        call: crate::order::OrderCall,
    ) -> Result<crate::order::OrderReply, String>;
}
