//! A receipt as storage holds it: one flat JSON object, the state's name
//! in `state` and its fields beside it. Read and written through this
//! plain struct rather than serde's `flatten` and internally tagged enums,
//! whose buffering made the receipt's parser a tenth of the worker's wasm;
//! the JSON is the same, field for field, so records of earlier versions
//! still parse.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Indexed;
use super::{
    AsyncTerms, Attempt, DeliveryKind, HttpResponse, Identity, Receipt, ReceiptState,
    StoredResponse,
};
use crate::canonical::Fingerprint;
use crate::headers::HeaderList;
use crate::key::IdempotencyKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StateName {
    Queued,
    InFlight,
    Completed,
    Failed,
    Dead,
    Superseded,
}

#[derive(Serialize, Deserialize)]
struct ResponseRecord {
    status: u16,
    headers: HeaderList,
    body_bytes: usize,
    body_stored: bool,
}

#[derive(Serialize, Deserialize)]
struct ReceiptRecord {
    #[serde(default = "second_version")]
    record_version: u32,
    receipt_id: String,
    route: String,
    object: String,
    scope: String,
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant_sha256: Option<String>,
    state: StateName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    completed_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<ResponseRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dead_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expiry_warned: Option<bool>,
    delivery: DeliveryKind,
    fingerprint: Fingerprint,
    epoch: u64,
    first_seen_at: u64,
    updated_at: u64,
    expires_at: u64,
    duplicates: u64,
    attempts: Vec<Attempt>,
    #[serde(default)]
    schedule_step: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    terms: Option<AsyncTerms>,
    #[serde(default, deserialize_with = "Indexed::read_stored")]
    indexed: Indexed,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    waiting_for_permit_since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch: Option<String>,
}

fn second_version() -> u32 {
    2
}

impl Serialize for Receipt {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut record = ReceiptRecord {
            record_version: self.record_version,
            receipt_id: self.identity.receipt_id.clone(),
            route: self.identity.route.clone(),
            object: self.identity.object.clone(),
            scope: self.identity.scope.clone(),
            key: self.identity.key.as_str().to_string(),
            path: self.identity.path.clone(),
            tenant_sha256: self.identity.tenant_sha256.clone(),
            state: StateName::Queued,
            next_attempt_at: None,
            lease_expires_at: None,
            completed_at: None,
            response: None,
            failed_at: None,
            dead_at: None,
            expiry_warned: None,
            delivery: self.delivery,
            fingerprint: self.fingerprint.clone(),
            epoch: self.epoch,
            first_seen_at: self.first_seen_at,
            updated_at: self.updated_at,
            expires_at: self.expires_at,
            duplicates: self.duplicates,
            attempts: self.attempts.clone(),
            schedule_step: self.schedule_step,
            terms: self.terms.clone(),
            indexed: self.indexed.clone(),
            waiting_for_permit_since: self.waiting_for_permit_since,
            batch: self.batch.clone(),
        };
        match &self.state {
            ReceiptState::Queued { next_attempt_at } => {
                record.next_attempt_at = Some(*next_attempt_at)
            }
            ReceiptState::InFlight { lease_expires_at } => {
                record.state = StateName::InFlight;
                record.lease_expires_at = Some(*lease_expires_at);
            }
            ReceiptState::Completed {
                completed_at,
                response,
            } => {
                record.state = StateName::Completed;
                record.completed_at = Some(*completed_at);
                record.response = Some(ResponseRecord {
                    status: response.response.status,
                    headers: response.response.headers.clone(),
                    body_bytes: response.body_bytes,
                    body_stored: response.body_stored,
                });
            }
            ReceiptState::Failed {
                failed_at,
                next_attempt_at,
            } => {
                record.state = StateName::Failed;
                record.failed_at = Some(*failed_at);
                record.next_attempt_at = *next_attempt_at;
            }
            ReceiptState::Dead {
                dead_at,
                expiry_warned,
                superseded,
            } => {
                record.state = match superseded {
                    true => StateName::Superseded,
                    false => StateName::Dead,
                };
                record.dead_at = Some(*dead_at);
                record.expiry_warned = Some(*expiry_warned);
            }
        }
        record.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Receipt {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Receipt, D::Error> {
        let record = ReceiptRecord::deserialize(deserializer)?;
        let missing = |field: &'static str| serde::de::Error::missing_field(field);
        let state = match record.state {
            StateName::Queued => ReceiptState::Queued {
                next_attempt_at: record
                    .next_attempt_at
                    .ok_or_else(|| missing("next_attempt_at"))?,
            },
            StateName::InFlight => ReceiptState::InFlight {
                lease_expires_at: record
                    .lease_expires_at
                    .ok_or_else(|| missing("lease_expires_at"))?,
            },
            StateName::Completed => {
                let response = record.response.ok_or_else(|| missing("response"))?;
                ReceiptState::Completed {
                    completed_at: record.completed_at.ok_or_else(|| missing("completed_at"))?,
                    response: StoredResponse {
                        response: HttpResponse {
                            status: response.status,
                            headers: response.headers,
                            body: Vec::new(),
                        },
                        body_bytes: response.body_bytes,
                        body_stored: response.body_stored,
                    },
                }
            }
            StateName::Failed => ReceiptState::Failed {
                failed_at: record.failed_at.ok_or_else(|| missing("failed_at"))?,
                next_attempt_at: record.next_attempt_at,
            },
            StateName::Dead | StateName::Superseded => ReceiptState::Dead {
                dead_at: record.dead_at.ok_or_else(|| missing("dead_at"))?,
                expiry_warned: record.expiry_warned.unwrap_or(false),
                superseded: record.state == StateName::Superseded,
            },
        };
        // Through the key's parser: a receipt holds a valid key or is not
        // read at all (a record a later version wrote, with a key this one
        // cannot send, is then only expired, like any record it cannot read).
        let key = IdempotencyKey::parse(&record.key, "stored receipt")
            .map_err(|problem| serde::de::Error::custom(problem.detail()))?;
        Ok(Receipt {
            record_version: record.record_version,
            identity: Identity {
                receipt_id: record.receipt_id,
                route: record.route,
                object: record.object,
                scope: record.scope,
                key,
                path: record.path,
                tenant_sha256: record.tenant_sha256,
            },
            state,
            delivery: record.delivery,
            fingerprint: record.fingerprint,
            epoch: record.epoch,
            first_seen_at: record.first_seen_at,
            updated_at: record.updated_at,
            expires_at: record.expires_at,
            duplicates: record.duplicates,
            attempts: record.attempts,
            schedule_step: record.schedule_step,
            terms: record.terms,
            indexed: record.indexed,
            waiting_for_permit_since: record.waiting_for_permit_since,
            batch: record.batch,
        })
    }
}
