//! The Durable Object: one per key. A thin adapter that gives the
//! [`Engine`] SQLite storage, alarms, timers, `fetch`, the D1 index and the
//! event sink, and answers the gateway's [`ObjectCall`]s over RPC.

use std::cell::Cell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use worker::js_sys::{Array, Date as JsDate, Number, Uint8Array};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, SqlStorageValue,
    State,
};

use idemgate_core::answer::render_problem;
use idemgate_core::engine::Engine;
use idemgate_core::object_call::{ObjectCall, ObjectOp, ObjectReply, Reply};
use idemgate_core::problem::Problem;
use idemgate_core::receipt::HttpResponse;
use idemgate_core::single_use::{decide_claim, Claim, ClaimDecision};

use crate::durable_backend::{integer, storage_error, DurableBackend, Tables};
use crate::edge_http;

/// A signed transmission's claim, in the object named for it (never a
/// key's object): see `idemgate_core::single_use`.
const CLAIM_TABLE: &str = "CREATE TABLE IF NOT EXISTS single_use (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    claimant TEXT NOT NULL,
    until INTEGER NOT NULL
)";

#[durable_object]
pub struct DedupObject {
    /// Shared with the first attempt of an accepted async delivery, which
    /// runs after the call that accepted it has answered.
    engine: Rc<Engine<DurableBackend>>,
    state: State,
    env: Env,
}

impl DurableObject for DedupObject {
    fn new(state: State, env: Env) -> Self {
        DedupObject {
            engine: Rc::new(Engine::new(DurableBackend {
                storage: state.storage(),
                env: env.clone(),
                tables: Cell::new(Tables::Unknown),
                legacy_request: Cell::new(false),
                ops: Cell::default(),
            })),
            state,
            env,
        }
    }

    /// The gateway calls [`DedupObject::dispatch`] over RPC; nothing
    /// reaches the object by `fetch`.
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Retention and async deliveries. A storage failure is an error, so
    /// the runtime runs the alarm again (with backoff).
    async fn alarm(&self) -> worker::Result<Response> {
        let alarm = self.engine.on_alarm().await;
        crate::alerts::flush_from_object(&self.env, |sent| {
            let _ = self.state.as_raw().wait_until(sent);
        });
        alarm.map_err(worker::Error::RustError)?;
        // An object with no receipt may hold a transmission's claim, which
        // goes once it can no longer matter.
        if let Ok(None) = self.engine.receipt() {
            self.expire_claim()
                .await
                .map_err(worker::Error::RustError)?;
        }
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl DedupObject {
    /// The object's RPC method: an [`ObjectCall`] as JSON and the body
    /// beside it; answers `[reply JSON, body]` (see [`ObjectReply`]).
    #[wasm_bindgen(js_name = dispatch)]
    pub async fn dispatch(&self, call: String, body: Uint8Array) -> Result<JsValue, JsValue> {
        let bytes = body.to_vec();
        drop(body);
        let reply = self.answer(&call, bytes).await;
        if self.engine.has_after_answer() {
            // An async delivery accepted: its index row is written, and
            // its first attempt runs, once this answer (the
            // acknowledgement) has left. Should the object die first, the
            // alarm (at the lease's end, or sooner for the row) takes over.
            let engine = self.engine.clone();
            let env = self.env.clone();
            let attempt = worker::wasm_bindgen_futures::future_to_promise(async move {
                engine.after_answer().await;
                if crate::alerts::pending() {
                    crate::alerts::flush(env).await;
                }
                Ok(JsValue::UNDEFINED)
            });
            // The promise runs either way; the runtime's waitUntil (which
            // `State::wait_until` unwraps) may only keep it company.
            let _ = self.state.as_raw().wait_until(&attempt);
        }
        crate::alerts::flush_from_object(&self.env, |sent| {
            let _ = self.state.as_raw().wait_until(sent);
        });
        let (reply, body) = ObjectReply::encode(reply);
        Ok(Array::of2(&reply.into(), &Uint8Array::from(body.as_slice())).into())
    }
}

impl DedupObject {
    /// A key's call goes to the engine; a transmission's claim (an object
    /// named for the transmission, never a key's) is answered here.
    async fn answer(&self, call: &str, body: Vec<u8>) -> Reply {
        let call = match ObjectCall::from_json(call) {
            Ok(call) => call,
            Err(problem) => return reply(render_problem(&problem)),
        };
        match call.op {
            ObjectOp::ClaimOnce {
                ref claimant,
                until,
            } => reply(self.claim_once(claimant, until).await),
            _ => self.engine.answer(call, body).await,
        }
    }

    /// A signed transmission claimed for `claimant` (a key's object) until
    /// `until`: 204 when it is that key's, 409 when another key's (a
    /// transmission replayed with another body).
    async fn claim_once(&self, claimant: &str, until: u64) -> HttpResponse {
        let now = Date::now().as_millis();
        let decided = self.read_claim().and_then(|existing| {
            let decision = decide_claim(existing.as_ref(), claimant, now);
            if decision == ClaimDecision::Take {
                self.claims()
                    .exec(
                        "INSERT INTO single_use (id, claimant, until) VALUES (1, ?, ?)
                         ON CONFLICT (id) DO UPDATE SET claimant = excluded.claimant, until = excluded.until",
                        Some(vec![claimant.to_string().into(), integer(until)]),
                    )
                    .map_err(storage_error)?;
            }
            Ok(decision)
        });
        match decided {
            Ok(ClaimDecision::Take) => {
                let at = JsDate::new(&Number::from(until as f64));
                // Without its alarm the claim only stays longer (a row).
                let _ = self.state.storage().set_alarm(ScheduledTime::new(at)).await;
                empty(204)
            }
            Ok(ClaimDecision::Held) => empty(204),
            Ok(ClaimDecision::Refused) => empty(409),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    fn claims(&self) -> worker::SqlStorage {
        self.state.storage().sql()
    }

    fn read_claim(&self) -> Result<Option<Claim>, String> {
        self.claims()
            .exec(CLAIM_TABLE, None)
            .map_err(storage_error)?;
        let cursor = self
            .claims()
            .exec("SELECT claimant, until FROM single_use WHERE id = 1", None)
            .map_err(storage_error)?;
        let row = cursor.raw().next().transpose().map_err(storage_error)?;
        Ok(match row.as_deref() {
            Some([SqlStorageValue::String(claimant), SqlStorageValue::Integer(until)]) => {
                Some(Claim {
                    claimant: claimant.clone(),
                    until: *until as u64,
                })
            }
            _ => None,
        })
    }

    /// Deletes a claim that ran out (and the object with it).
    async fn expire_claim(&self) -> Result<(), String> {
        let exists = self
            .claims()
            .exec(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'single_use'",
                None,
            )
            .map_err(storage_error)?
            .raw()
            .next()
            .is_some();
        if !exists {
            return Ok(());
        }
        let now = Date::now().as_millis();
        match self.read_claim()? {
            Some(claim) if claim.until > now => {
                let at = JsDate::new(&Number::from(claim.until as f64));
                self.state
                    .storage()
                    .set_alarm(ScheduledTime::new(at))
                    .await
                    .map_err(storage_error)
            }
            _ => self
                .state
                .storage()
                .delete_all()
                .await
                .map_err(storage_error),
        }
    }
}

fn reply(response: HttpResponse) -> Reply {
    Reply::of(response)
}

fn empty(status: u16) -> HttpResponse {
    HttpResponse::empty(status)
}
