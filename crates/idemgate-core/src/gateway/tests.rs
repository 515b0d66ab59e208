//! The gateway's steps against an edge held in memory: which requests
//! reach an object, which the isolate answers alone, and where the
//! upgrade's lookup goes.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use futures::executor::block_on;

use super::*;
use crate::headers::HeaderList;

const NOW: u64 = 1_700_000_000_000;

/// An edge whose objects answer from a script, and which keeps what it
/// was asked.
struct MemoryEdge {
    now: Cell<u64>,
    config: Result<Rc<Config>, Problem>,
    headers: HeaderList,
    body: Vec<u8>,
    replays: RefCell<ReplayCache>,
    index: bool,
    upgrade_since: Option<u64>,
    /// Every call, with the body sent beside it.
    calls: RefCell<Vec<(ObjectCall, Vec<u8>)>>,
    /// What the objects answer, in turn; a stored replay once it runs out.
    replies: RefCell<Vec<Reply>>,
    deliveries: Cell<u64>,
}

impl MemoryEdge {
    fn new(vars: &[(&str, &str)], body: &str) -> MemoryEdge {
        let vars: HashMap<String, String> = [("ORIGIN_URL", "http://origin:9")]
            .iter()
            .chain(vars)
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        MemoryEdge {
            now: Cell::new(NOW),
            config: Config::from_lookup(|name| vars.get(name).cloned()).map(Rc::new),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("idempotency-key".into(), "k-1".into()),
            ],
            body: body.as_bytes().to_vec(),
            replays: RefCell::new(ReplayCache::default()),
            index: true,
            upgrade_since: None,
            calls: RefCell::new(Vec::new()),
            replies: RefCell::new(Vec::new()),
            deliveries: Cell::new(0),
        }
    }

    fn with_body(&mut self, body: &str) {
        self.body = body.as_bytes().to_vec();
    }

    fn objects_called(&self) -> Vec<String> {
        let calls = self.calls.borrow();
        calls.iter().map(|(call, _)| call.object.clone()).collect()
    }
}

fn stored_replay(until: u64) -> Reply {
    Reply {
        response: HttpResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"charged\":true}".to_vec(),
        },
        replayable_until: Some(until),
        unknown_key: false,
        already_received: false,
    }
}

fn unknown_key() -> Reply {
    Reply {
        response: HttpResponse {
            status: 204,
            headers: vec![],
            body: vec![],
        },
        replayable_until: None,
        unknown_key: true,
        already_received: false,
    }
}

impl Edge for MemoryEdge {
    type Response = String;
    type Error = String;

    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn config(&self) -> Result<Rc<Config>, Problem> {
        self.config.clone()
    }

    fn headers(&self) -> HeaderList {
        self.headers.clone()
    }

    async fn operator(&self, normalized_path: &str, _: Option<&str>) -> Result<String, String> {
        Ok(format!("operator {normalized_path}"))
    }

    async fn passthrough(
        &self,
        url: &str,
        _: &HeaderList,
        _: Option<&str>,
    ) -> Result<String, Problem> {
        Ok(format!("passthrough {url}"))
    }

    async fn read_body(&self, _: BodyFraming, limit: u64) -> Result<Option<Vec<u8>>, String> {
        Ok((self.body.len() as u64 <= limit).then(|| self.body.clone()))
    }

    async fn check_public_keys(&self, _: &[PublicKeyCheck]) -> PublicKeyChecked {
        PublicKeyChecked::Rejected
    }

    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T {
        f(&mut self.replays.borrow_mut())
    }

    fn has_index(&self) -> bool {
        self.index
    }

    async fn upgrade_since(&self) -> Option<u64> {
        self.upgrade_since
    }

    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
        self.calls.borrow_mut().push((call, body));
        let mut replies = self.replies.borrow_mut();
        Ok(match replies.is_empty() {
            true => stored_replay(NOW + 60_000),
            false => replies.remove(0),
        })
    }

    fn count_delivery(&self) {
        self.deliveries.set(self.deliveries.get() + 1);
    }
}

fn post(edge: &MemoryEdge) -> Handled<String> {
    block_on(handle(edge, "post", "https://edge.test/pay?x=1")).expect("no runtime error")
}

#[test]
fn a_first_delivery_goes_to_its_object_with_its_body_and_its_replay_stays_here() {
    let edge = MemoryEdge::new(&[], r#"{"amount": 10}"#);
    let Handled::Answered(reply) = post(&edge) else {
        panic!("the object answers a first delivery")
    };
    assert_eq!(reply.response.status, 201);
    let calls = edge.calls.borrow();
    let [(call, body)] = calls.as_slice() else {
        panic!("one call")
    };
    assert_eq!(body, br#"{"amount": 10}"#);
    let ObjectOp::Deliver(delivery) = &call.op else {
        panic!("a delivery")
    };
    assert_eq!(delivery.identity.key, "k-1");
    assert_eq!(delivery.request.method, "POST", "the standard spelling");
    assert_eq!(delivery.request.url, "http://origin:9/pay?x=1");
    assert!(delivery.request.body.is_empty(), "the body travels beside");
    assert_eq!(edge.replays.borrow().len(), 1);
    assert_eq!(edge.deliveries.get(), 1);
}

#[test]
fn a_byte_identical_retry_is_answered_here_before_its_body_is_read() {
    let edge = MemoryEdge::new(&[], r#"{"amount": 10}"#);
    post(&edge);
    let Handled::EdgeReplay {
        object,
        replay,
        fast,
        ..
    } = post(&edge)
    else {
        panic!("the isolate answers the retry")
    };
    assert!(fast);
    assert_eq!(edge.objects_called(), vec![object]);
    assert_eq!(replay.body, b"{\"charged\":true}");
    assert_eq!(edge.deliveries.get(), 2, "a replay is a delivery too");
}

#[test]
fn a_retry_in_other_bytes_is_answered_here_by_its_key_and_fingerprint() {
    let mut edge = MemoryEdge::new(&[], r#"{"amount": 10}"#);
    post(&edge);
    edge.with_body(r#"{ "amount":10 }"#);
    let Handled::EdgeReplay { fast, .. } = post(&edge) else {
        panic!("the isolate answers the retry")
    };
    assert!(!fast, "found after admission");
    assert_eq!(edge.calls.borrow().len(), 1);
    // Now known by these bytes too.
    let Handled::EdgeReplay { fast, .. } = post(&edge) else {
        panic!("the isolate answers the retry")
    };
    assert!(fast);
}

#[test]
fn an_expired_replay_goes_back_to_the_object() {
    let edge = MemoryEdge::new(&[], "{}");
    post(&edge);
    edge.now.set(NOW + 60_001);
    assert!(matches!(post(&edge), Handled::Answered(_)));
    assert_eq!(edge.calls.borrow().len(), 2);
}

#[test]
fn a_delivery_another_payload_under_the_same_key_is_never_answered_here() {
    let mut edge = MemoryEdge::new(&[], r#"{"amount": 10}"#);
    post(&edge);
    edge.with_body(r#"{"amount": 11}"#);
    assert!(matches!(post(&edge), Handled::Answered(_)));
    assert_eq!(edge.calls.borrow().len(), 2, "its object decides (422)");
}

#[test]
fn after_an_upgrade_a_retry_is_asked_for_where_the_second_version_kept_it() {
    let mut edge = MemoryEdge::new(
        &[("KEY_SOURCES", "json:/a+json:/b")],
        r#"{"a":"x:y","b":"z"}"#,
    );
    edge.upgrade_since = Some(NOW - 1_000);
    edge.replies.borrow_mut().push(unknown_key());
    assert!(matches!(post(&edge), Handled::Answered(_)));
    let calls = edge.calls.borrow();
    let [(previous, previous_body), (current, current_body)] = calls.as_slice() else {
        panic!("two calls")
    };
    let (ObjectOp::Deliver(previous_delivery), ObjectOp::Deliver(current_delivery)) =
        (&previous.op, &current.op)
    else {
        panic!("two deliveries")
    };
    assert!(previous_delivery.if_known && !current_delivery.if_known);
    assert_eq!(previous_delivery.identity.key, "x:y:z");
    assert_eq!(current_delivery.identity.key, "x%3Ay:z");
    assert_ne!(previous.object, current.object);
    assert_eq!(previous_body, current_body);
}

#[test]
fn a_receipt_the_second_version_kept_answers_and_the_new_object_is_not_asked() {
    let mut edge = MemoryEdge::new(
        &[("KEY_SOURCES", "json:/a+json:/b")],
        r#"{"a":"x:y","b":"z"}"#,
    );
    edge.upgrade_since = Some(NOW - 1_000);
    assert!(matches!(post(&edge), Handled::Answered(_)));
    assert_eq!(edge.calls.borrow().len(), 1);
    // Its replay is kept under the object that answered it.
    let Handled::EdgeReplay { object, .. } = post(&edge) else {
        panic!("the isolate answers the retry")
    };
    assert_eq!(edge.objects_called(), vec![object]);
}

#[test]
fn long_after_an_upgrade_or_without_a_changed_key_there_is_no_lookup() {
    let mut edge = MemoryEdge::new(
        &[("KEY_SOURCES", "json:/a+json:/b")],
        r#"{"a":"x:y","b":"z"}"#,
    );
    // RETENTION_SECONDS is a day by default: the second version's receipts are gone.
    edge.upgrade_since = Some(NOW - 2 * 86_400_000);
    post(&edge);
    assert_eq!(edge.calls.borrow().len(), 1);
    let mut unchanged = MemoryEdge::new(&[], "{}");
    unchanged.upgrade_since = Some(NOW - 1_000);
    post(&unchanged);
    assert_eq!(unchanged.calls.borrow().len(), 1);
}

#[test]
fn an_async_route_without_its_index_takes_nothing() {
    let mut edge = MemoryEdge::new(&[("DELIVERY", "async")], "{}");
    edge.index = false;
    let Handled::Rejected { route, problem } = post(&edge) else {
        panic!("refused")
    };
    assert_eq!(route.as_deref(), Some("default"));
    assert_eq!(problem.name(), "misconfigured");
    assert!(edge.calls.borrow().is_empty());
}

#[test]
fn reads_pass_through_and_the_operator_api_is_answered_before_the_configuration() {
    let mut edge = MemoryEdge::new(&[], "{}");
    let get = block_on(handle(&edge, "GET", "https://edge.test/pay?x=1")).unwrap();
    assert!(
        matches!(get, Handled::Response(text) if text == "passthrough http://origin:9/pay?x=1")
    );
    edge.config = Err(Problem::Misconfigured {
        variable: "ORIGIN_URL".into(),
        reason: "missing".into(),
    });
    let operator = block_on(handle(&edge, "GET", "https://edge.test/__idemgate/health")).unwrap();
    assert!(matches!(operator, Handled::Response(text) if text == "operator /__idemgate/health"));
    assert!(matches!(
        post(&edge),
        Handled::Rejected { route: None, problem } if problem.name() == "misconfigured"
    ));
    assert!(edge.calls.borrow().is_empty());
    assert_eq!(edge.deliveries.get(), 0);
}

#[test]
fn bad_input_is_refused_before_any_object_and_a_bad_path_before_the_route() {
    let mut edge = MemoryEdge::new(&[("MAX_BODY_BYTES", "8")], r#"{"amount": 10}"#);
    let Handled::Rejected { problem, .. } = post(&edge) else {
        panic!("refused")
    };
    assert_eq!(problem.name(), "payload-too-large");
    edge.with_body("{");
    let Handled::Rejected { problem, .. } = post(&edge) else {
        panic!("refused")
    };
    assert_eq!(problem.status(), 400);
    let bad_path = block_on(handle(&edge, "POST", "https://edge.test/a%2Fb")).unwrap();
    assert!(matches!(bad_path, Handled::Rejected { route: None, .. }));
    assert!(edge.calls.borrow().is_empty());
}
