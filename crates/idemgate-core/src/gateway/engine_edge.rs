//! An edge for the gateway's native tests: the request is a signed
//! [`Message`], and each key's object is the real [`Engine`] over a
//! [`MemoryBackend`], made on its first call, so what a sender's
//! deliveries do reaches what the origin got.

use std::cell::RefCell;
use std::collections::HashMap;

use futures::executor::block_on;

use super::*;
use crate::answer::render_problem;
use crate::engine::{Engine, Policy};
use crate::memory_backend::MemoryBackend;
use crate::object_call::ObjectOp;
use crate::signature::{Message, SignatureScheme};

/// An edge whose objects are engines in memory, made on first call.
pub(super) struct EngineEdge {
    now: u64,
    pub(super) config: Rc<Config>,
    pub(super) request: RefCell<Message>,
    replays: RefCell<ReplayCache>,
    pub(super) objects: RefCell<HashMap<String, Rc<Engine<MemoryBackend>>>>,
    pub(super) calls: RefCell<u64>,
    /// The route's scheme, which signs as its sender does.
    pub(super) scheme: SignatureScheme,
    /// What the origin answers each batch event's next forward, by event
    /// id (a 201 for any other).
    pub(super) origin_answers: RefCell<HashMap<String, u16>>,
}

impl EngineEdge {
    /// One route at `/` of `vars` (an origin and a `FORWARD_SECRET` by
    /// default), at the clock's `now`.
    pub(super) fn new(now: u64, vars: &[(&str, &str)]) -> EngineEdge {
        let vars: HashMap<String, String> = [
            ("ORIGIN_URL", "http://origin:9"),
            ("FORWARD_SECRET", "forward-secret"),
        ]
        .iter()
        .chain(vars)
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let config = Config::from_lookup(|name| vars.get(name).cloned()).unwrap();
        assert!(config.broken.is_empty(), "{:?}", config.broken);
        EngineEdge {
            now,
            scheme: config.route_for("/").unwrap().signature_scheme.clone(),
            config: Rc::new(config),
            request: RefCell::new(Message::default()),
            replays: RefCell::new(ReplayCache::default()),
            objects: RefCell::new(HashMap::new()),
            calls: RefCell::new(0),
            origin_answers: RefCell::new(HashMap::new()),
        }
    }

    /// Sends `message` as a POST to `url`.
    pub(super) fn send(&self, message: Message, url: &str) -> Handled<String> {
        *self.request.borrow_mut() = message;
        block_on(handle(self, "POST", url)).unwrap()
    }

    /// What the origin got, in every object.
    pub(super) fn forwarded(&self) -> Vec<crate::origin::OutboundRequest> {
        self.objects
            .borrow()
            .values()
            .flat_map(|engine| engine.backend().forwarded.borrow().clone())
            .collect()
    }
}

impl Edge for EngineEdge {
    type Response = String;
    type Error = String;

    fn now_ms(&self) -> u64 {
        self.now
    }

    fn config(&self) -> Result<Rc<Config>, Problem> {
        Ok(self.config.clone())
    }

    fn headers(&self) -> HeaderList {
        self.request.borrow().headers.clone()
    }

    async fn operator(&self, _: &str, _: Option<&str>) -> Result<String, String> {
        Err("no operator here".into())
    }

    async fn passthrough(
        &self,
        _: &str,
        _: &HeaderList,
        _: Option<&str>,
    ) -> Result<String, Problem> {
        Err(Problem::NotFound)
    }

    async fn read_body(&self, _: BodyFraming, _: u64) -> Result<Option<Vec<u8>>, String> {
        Ok(Some(self.request.borrow().body.clone()))
    }

    async fn check_public_keys(&self, _: &[PublicKeyCheck]) -> PublicKeyChecked {
        PublicKeyChecked::Rejected
    }

    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T {
        f(&mut self.replays.borrow_mut())
    }

    fn has_index(&self) -> bool {
        true
    }

    async fn upgrade_since(&self) -> Option<u64> {
        None
    }

    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
        *self.calls.borrow_mut() += 1;
        let engine = self
            .objects
            .borrow_mut()
            .entry(call.object.clone())
            .or_insert_with(|| {
                let backend = MemoryBackend::new(self.now);
                backend.set_secret("FORWARD_SECRET", "forward");
                Rc::new(Engine::new(backend))
            })
            .clone();
        let policy = Policy::from(self.config.route(&call.route).unwrap());
        let ObjectOp::Deliver(_) = &call.op else {
            return Err(Problem::NotFound);
        };
        let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let id = event["events"][0]["id"].as_str().unwrap_or_default();
        if let Some(status) = self.origin_answers.borrow_mut().remove(id) {
            let answer = crate::receipt::ForwardResult::Answered(HttpResponse {
                status,
                headers: vec![],
                body: b"{}".to_vec(),
            });
            engine.backend().script.borrow_mut().push_back(answer);
        }
        let delivery = call.into_delivery(body)?;
        let answer = match delivery.if_known {
            true => engine.deliver_if_known(delivery, &policy).await,
            false => Some(engine.deliver(delivery, &policy).await),
        };
        Ok(match answer {
            None => Reply {
                response: render_problem(&Problem::NotFound),
                replayable_until: None,
                unknown_key: true,
                already_received: false,
            },
            Some(answer) => Reply {
                replayable_until: matches!(answer, crate::answer::Answer::Replayed(_))
                    .then(|| engine.replayable_until())
                    .flatten(),
                response: answer.render(),
                unknown_key: false,
                already_received: false,
            },
        })
    }

    fn count_delivery(&self) {}
}
