//! SPEC §1 as a sequence of small steps, each returning early with its
//! problem. Everything here is pure; the Worker's `gateway` does the I/O
//! around it (reading the body, calling the Durable Object, proxying).

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use crate::batch::{BatchFormat, BatchPart};
use crate::canonical::{body_sha256, is_json_media_type, read_json, sha256_hex, Fingerprint};
use crate::config::{Config, RouteConfig, Tenant};
use crate::delivery::{Delivery, DeliveryRequest, Identity};
use crate::form;
use crate::headers::{self, HeaderList};
use crate::json::{one_pass::CanonicalBody, PointerLookup};
use crate::key::{
    derive_key, derive_key_joined, json_pointers, tenant_sha256, Joining, KeyInput, KeyPart,
    KeyScope, KeySource, Scope,
};
use crate::order::OrderTicket;
use crate::origin::{target, Target};
use crate::problem::Problem;
use crate::signature::{self, Verdict};

mod authentication;
pub use authentication::{Authentication, PendingAuthentication, PublicKeyChecked};

/// What a request to a route is, from its method (SPEC §1 step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// GET, HEAD, OPTIONS: proxied unchanged, no Durable Object.
    Passthrough,
    /// POST, PUT, PATCH, DELETE.
    Deduplicate,
}

/// The path and query of a URL as the runtime serializes it (WHATWG), read
/// without parsing it again: serialization always writes a path after the
/// host, and percent-encodes every `?` and `#` inside the path and query.
pub fn path_and_query(url: &str) -> (&str, Option<&str>) {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let rest = match url[after_scheme..].find('/') {
        Some(at) => &url[after_scheme + at..],
        None => "/",
    };
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    }
}

/// Steps 0 and 1 for a path that is not the operator API's (the gateway
/// normalises the path and answers the operator API first): the route
/// (404 `no-route` whatever the method), then the method (405).
pub fn route_request<'a>(
    config: &'a Config,
    method: &str,
    normalized_path: &str,
) -> Result<(&'a RouteConfig, Kind), Problem> {
    let route = config.route_for(normalized_path)?;
    let kind = match method.to_ascii_uppercase().as_str() {
        "GET" | "HEAD" | "OPTIONS" => Kind::Passthrough,
        "POST" | "PUT" | "PATCH" | "DELETE" => Kind::Deduplicate,
        _ => {
            return Err(Problem::MethodNotAllowed {
                method: method.to_string(),
            })
        }
    };
    Ok((route, kind))
}

/// How the gateway reads a deduplicated request's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// A declared `Content-Length` within the limit: the runtime delivers
    /// exactly that many bytes, so the body is read whole, in one call.
    Declared,
    /// No usable length (chunked, or a `Transfer-Encoding` beside a length,
    /// which then does not bind): read chunk by chunk, stopping at the limit.
    Streamed,
}

/// Step 2, early: a declared `Content-Length` over the limit is refused
/// before the body is read.
pub fn body_framing(
    max_body_bytes: u64,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Result<BodyFraming, Problem> {
    let declared = content_length.and_then(|value| value.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > max_body_bytes => Err(Problem::PayloadTooLarge {
            limit: max_body_bytes,
        }),
        Some(_) if transfer_encoding.is_none() => Ok(BodyFraming::Declared),
        _ => Ok(BodyFraming::Streamed),
    }
}

/// Whether a body of `length` bytes is over the limit: a body of exactly
/// `max_body_bytes` is accepted.
pub fn over_limit(length: u64, max_body_bytes: u64) -> bool {
    length > max_body_bytes
}

/// A deduplicated request as the pipeline sees it.
pub struct Inbound<'a> {
    pub method: &'a str,
    /// The path as the sender sent it (the origin gets it so).
    pub path: &'a str,
    pub normalized_path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// Unix seconds, for the freshness of sender signatures.
    pub now: u64,
}

/// A delivery that passed every check: ready for its Durable Object (its
/// body stays with the caller, which sends it beside the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub delivery: Delivery,
    /// Who the second version said this delivery was, when that differs
    /// (SPEC §3, v3 "Upgrading"): its receipt is looked up there first for
    /// a while after an upgrade, so that a retry spanning it is not
    /// forwarded again.
    pub previous: Option<Identity>,
}

impl Admitted {
    /// This delivery as the second version addressed it: its previous
    /// identity, when it has one (a deployment before its upgrade, in the
    /// end-to-end tests).
    pub fn as_previous(self) -> Admitted {
        match self.previous {
            Some(previous) => Admitted {
                delivery: Delivery {
                    identity: previous,
                    ..self.delivery
                },
                previous: None,
            },
            None => self,
        }
    }
}

/// A delivery whose size and sender's signature were checked (steps 2
/// and 3). Only [`authenticate`] makes one, and [`admit`] takes nothing
/// else: no later step can run on a delivery that skipped them.
pub struct Authenticated<'a> {
    route: &'a RouteConfig,
    inbound: &'a Inbound<'a>,
    /// Hex SHA-256 of the raw body, computed once: the isolate's replay
    /// lookup and the forward's `Idempotency-Signature` both need it.
    raw_body_sha256: std::cell::OnceCell<String>,
    /// What `body-sha256` hashes, when not the raw body: a batch's event
    /// is keyed by its payload, which leaves out what a re-sent event's
    /// other transmission changes (GoCardless's `meta`).
    key_body_sha256: Option<String>,
}

impl<'a> Authenticated<'a> {
    pub fn route(&self) -> &'a RouteConfig {
        self.route
    }

    pub fn inbound(&self) -> &'a Inbound<'a> {
        self.inbound
    }

    /// Hex SHA-256 of the raw body.
    pub fn raw_body_sha256(&self) -> &str {
        self.raw_body_sha256
            .get_or_init(|| sha256_hex(self.inbound.body))
    }

    /// What names this request as a batch: the first 32 hex digits of its
    /// raw body's SHA-256.
    pub fn batch_id(&self) -> String {
        self.raw_body_sha256()[..32].to_string()
    }

    /// The signed transmission id this delivery may be forwarded under
    /// once, and until when (ms) a replay of it could still verify
    /// ([`crate::single_use`]); `None` for a scheme that binds the body.
    pub fn single_use(&self) -> Option<(String, u64)> {
        let request = self.signed_request();
        let (id, signed_at) = self.route.signature_scheme.single_use_id(&request)?;
        let until = signed_at
            .saturating_add(self.route.signature_tolerance_seconds)
            .saturating_mul(1_000)
            .saturating_add(crate::single_use::CLAIM_MARGIN_MS);
        Some((id.to_string(), until))
    }

    fn signed_request(&self) -> signature::SignedRequest<'a> {
        signature::SignedRequest {
            headers: self.inbound.headers,
            body: self.inbound.body,
            query: self.inbound.query,
        }
    }
}

/// Steps 2 and 3: the size, then the sender's signature, before anything
/// reads the body. A signature only a public key can check comes back
/// [`Authentication::Pending`], for the runtime's WebCrypto.
pub fn authenticate<'a>(
    route: &'a RouteConfig,
    inbound: &'a Inbound<'a>,
) -> Result<Authentication<'a>, Problem> {
    if over_limit(inbound.body.len() as u64, route.max_body_bytes) {
        return Err(Problem::PayloadTooLarge {
            limit: route.max_body_bytes,
        });
    }
    let authenticated = Authenticated {
        route,
        inbound,
        raw_body_sha256: std::cell::OnceCell::new(),
        key_body_sha256: None,
    };
    let verdict = route.signature_scheme.verify(
        &authenticated.signed_request(),
        inbound.now,
        route.signature_tolerance_seconds,
    )?;
    Ok(match verdict {
        Verdict::Verified => Authentication::Done(authenticated),
        Verdict::PublicKey(checks) => Authentication::Pending(PendingAuthentication {
            authenticated,
            checks,
        }),
    })
}

/// The delivery a provider's webhook of a reconciled event would have
/// made (SPEC §11): its key, scope and object derived from `body` through
/// the route's own key sources, as the live delivery's are, so that both
/// reach one object; the fingerprint is the event id; the request is a
/// `POST` of the JSON body to the route's path, marked as reconciliation's.
/// No sender's signature is checked: the provider's own API, over TLS with
/// the route's key, gave the body.
pub fn admit_reconciled(
    route: &RouteConfig,
    body: &[u8],
    event_id: &str,
    now: u64,
) -> Result<Delivery, Problem> {
    let headers = [("content-type".to_string(), "application/json".to_string())];
    let inbound = Inbound {
        method: "POST",
        path: &route.path,
        normalized_path: &route.path,
        query: None,
        headers: &headers,
        body,
        now,
    };
    let authenticated = Authenticated {
        route,
        inbound: &inbound,
        raw_body_sha256: std::cell::OnceCell::new(),
        key_body_sha256: None,
    };
    let mut delivery = admit(&authenticated)?.delivery;
    delivery.fingerprint = Fingerprint::of_event(event_id);
    delivery.if_absent = true;
    delivery.request.body = body.to_vec();
    delivery.request.source = Some(crate::reconcile::RECONCILIATION.to_string());
    Ok(delivery)
}

/// One event of a verified batch as a delivery of its own (SPEC §4, v4):
/// admitted as a request of the batch's method, path and headers (but the
/// sender's signature headers, which covered the whole batch) holding
/// `part`'s body, so that the route's own key sources key it; its
/// fingerprint is its payload's, and it names the batch it came in. The
/// part's body travels beside the delivery, as a request's does.
pub fn admit_batch_part(
    batch: &Authenticated,
    format: &BatchFormat,
    part: &BatchPart,
) -> Result<Admitted, Problem> {
    let headers: HeaderList = batch
        .inbound
        .headers
        .iter()
        .filter(|(name, _)| {
            !format
                .signature_headers
                .iter()
                .any(|signed| name.eq_ignore_ascii_case(signed))
        })
        .cloned()
        .collect();
    let inbound = Inbound {
        headers: &headers,
        body: &part.body,
        ..*batch.inbound
    };
    let authenticated = Authenticated {
        route: batch.route,
        inbound: &inbound,
        raw_body_sha256: std::cell::OnceCell::new(),
        key_body_sha256: Some(part.payload_sha256.clone()),
    };
    let mut admitted = admit(&authenticated)?;
    let delivery = &mut admitted.delivery;
    delivery.fingerprint =
        Fingerprint::of_request(inbound.method, inbound.query, &part.payload_sha256);
    delivery.request.batch = Some(batch.batch_id());
    Ok(admitted)
}

/// Steps 4 and 5: key, fingerprint and scope. The first failing check
/// answers; nothing reaches a Durable Object.
pub fn admit(authenticated: &Authenticated) -> Result<Admitted, Problem> {
    let (route, inbound) = (authenticated.route, authenticated.inbound);
    let content_type = headers::get(inbound.headers, "content-type");
    let json: Option<CanonicalBody> = match content_type {
        Some(media_type) if is_json_media_type(media_type) => {
            Some(read_json(inbound.body, &read_pointers(route))?)
        }
        _ => None,
    };
    let reads = |wanted: fn(&KeyPart) -> bool| {
        route
            .key_sources
            .iter()
            .any(|source| source.parts.iter().any(wanted))
    };
    let form = match content_type {
        Some(media_type)
            if form::is_form_media_type(media_type)
                && reads(|part| matches!(part, KeyPart::Form(_))) =>
        {
            Some(form::pairs(&String::from_utf8_lossy(inbound.body)))
        }
        _ => None,
    };
    let signed = authenticated.signed_request();
    let scheme_key = match reads(|part| *part == KeyPart::SchemeKey) {
        true => route.signature_scheme.scheme_key(&signed),
        false => None,
    };
    let canonical_hash = body_sha256(json.as_ref().map(CanonicalBody::canonical), inbound.body);
    let fingerprint = Fingerprint::of_request(inbound.method, inbound.query, &canonical_hash);
    // On a signed route, `body-sha256` hashes what the signature covers,
    // whatever the (unsigned) Content-Type says (SPEC §3, v3): the raw
    // body's hash, already made, for a scheme that signs the body. Only a
    // route whose key sources read it pays for it.
    let key_hash = match reads(|part| *part == KeyPart::BodySha256) {
        false => String::new(),
        true => match route.signature_scheme.body_for_key(&signed) {
            Some(Cow::Borrowed(_)) => match &authenticated.key_body_sha256 {
                Some(payload) => payload.clone(),
                None => authenticated.raw_body_sha256().to_string(),
            },
            Some(Cow::Owned(signed_fields)) => sha256_hex(&signed_fields),
            None => canonical_hash.clone(),
        },
    };
    let input = |body_sha256| KeyInput {
        headers: inbound.headers,
        content_type,
        json: json.as_ref().map(|json| json as &dyn PointerLookup),
        form: form.as_deref(),
        body_sha256,
        scheme_key: scheme_key.as_deref(),
    };
    let key = derive_key(&route.key_sources, &input(&key_hash))?;
    // A provider whose re-send carries other bytes (Paddle's replay, a new
    // notification id in the body) is compared by event id, which the key
    // is on a reconciled route: a replay of an event already received is a
    // duplicate answered from its receipt, not a 422 (SPEC §11).
    let fingerprint = match &route.reconcile {
        Some(reconcile) if reconcile.source.resends_new_bytes() => {
            Fingerprint::of_event(key.as_str())
        }
        _ => fingerprint,
    };
    let tenant_sha256 = tenant_hash(route, inbound.headers)?;
    let scoped_path = match route.key_scope {
        KeyScope::Path => Some(inbound.normalized_path.to_string()),
        KeyScope::Route => None,
    };
    let scope = Scope::new(
        &route.name,
        scoped_path.as_deref(),
        tenant_sha256.as_deref(),
    );
    let identity = Identity {
        receipt_id: String::new(),
        route: route.name.clone(),
        object: scope.object_name(&key),
        scope: scope.id().to_string(),
        key,
        path: scoped_path,
        tenant_sha256,
    };
    let order = order_ticket(route, &input(&key_hash), identity.tenant_sha256.as_deref());
    let previous = previous_identity(route, &input(&canonical_hash), &identity)
        .filter(|previous| previous.object != identity.object);
    let Target {
        url,
        path_and_query,
    } = target(&route.origin_url, inbound.path, inbound.query);
    Ok(Admitted {
        delivery: Delivery {
            identity,
            fingerprint,
            request: DeliveryRequest {
                method: inbound.method.to_ascii_uppercase(),
                url,
                path_and_query,
                headers: headers::for_origin(inbound.headers),
                raw_body_sha256: authenticated.raw_body_sha256().to_string(),
                body: Vec::new(),
                source: None,
                stale: false,
                batch: None,
                order,
                via: route
                    .origin_binding
                    .as_ref()
                    .map(|binding| binding.name.clone()),
            },
            if_known: false,
            if_absent: false,
        },
        previous,
    })
}

/// The JSON pointers admission reads: the key sources', and an ordered
/// route's `order_key` and `order_time`.
fn read_pointers(route: &RouteConfig) -> Vec<&str> {
    let mut pointers = json_pointers(&route.key_sources);
    if let Some(order) = &route.order {
        pointers.extend(json_pointers(std::slice::from_ref(&order.key)));
        pointers.extend(json_pointers(std::slice::from_ref(&order.time)));
    }
    pointers
}

/// An ordered route's ticket for the delivery (SPEC §12, v4): its
/// entity's order object and its event's time. `None` when the route is
/// not ordered, or either value is missing or unreadable: the delivery
/// then goes unordered, and the engine counts it. An entity is the
/// route's and its tenant's, whatever path its events came to: tenants
/// never share one, paths do.
fn order_ticket(
    route: &RouteConfig,
    input: &KeyInput,
    tenant_sha256: Option<&str>,
) -> Option<OrderTicket> {
    let order = route.order.as_ref()?;
    let entity = derive_key(std::slice::from_ref(&order.key), input).ok()?;
    let time = derive_key(std::slice::from_ref(&order.time), input).ok()?;
    let scope = Scope::new(&route.name, None, tenant_sha256);
    Some(OrderTicket {
        object: crate::order::object_name(&route.name, scope.id(), entity.as_str()),
        time_ms: crate::order::time::order_time_ms(time.as_str())?,
        hold_ms: order.hold_ms,
        skip_stale: order.skip_stale,
    })
}

/// Where the second version kept a delivery's receipt: its `body-sha256`
/// hashed the canonical body on every route, Adyen's default key was that
/// hash, composite parts were joined as they were, and an api route
/// without `TENANT_HEADER` had no tenant. `None` when it derived nothing.
fn previous_identity(route: &RouteConfig, input: &KeyInput, now: &Identity) -> Option<Identity> {
    let sources: Vec<KeySource> = route
        .key_sources
        .iter()
        .map(|source| KeySource {
            parts: source
                .parts
                .iter()
                .map(|part| match part {
                    KeyPart::SchemeKey => KeyPart::BodySha256,
                    other => other.clone(),
                })
                .collect(),
        })
        .collect();
    let key = derive_key_joined(&sources, input, Joining::Plain).ok()?;
    let tenant_sha256 = match route.tenant {
        Tenant::Header {
            required: false, ..
        } => None,
        _ => now.tenant_sha256.clone(),
    };
    let scope = Scope::new(&route.name, now.path.as_deref(), tenant_sha256.as_deref());
    Some(Identity {
        object: scope.object_name(&key),
        scope: scope.id().to_string(),
        key,
        tenant_sha256,
        ..now.clone()
    })
}

/// The hash of the tenant header's value: 400 `missing-tenant` without
/// it where `TENANT_HEADER` requires it; anonymous (none) where api mode
/// scopes by `Authorization` and a request has none.
fn tenant_hash(route: &RouteConfig, list: &[(String, String)]) -> Result<Option<String>, Problem> {
    match &route.tenant {
        Tenant::Header { name, required } => match headers::get(list, name) {
            Some(value) => Ok(Some(tenant_sha256(value))),
            None if *required => Err(Problem::MissingTenant {
                header: name.clone(),
            }),
            None => Ok(None),
        },
        Tenant::Shared => Ok(None),
    }
}

/// The isolate cache's key for a byte-identical retry, computed from the
/// raw request without parsing its body: the hash of everything that
/// decides the delivery's object and fingerprint (route, method, the path
/// under path scope, query, content type, the headers the key sources and
/// the tenant read, and the raw body). Two requests with equal inputs
/// admit to the same object and fingerprint, so a replay cached under this
/// key is theirs; a different payload misses and goes the long way (422).
pub fn fast_replay_key(authenticated: &Authenticated) -> String {
    let (route, inbound) = (authenticated.route, authenticated.inbound);
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(b"idemgate/fast-replay/v1");
    field(route.name.as_bytes());
    field(inbound.method.to_ascii_uppercase().as_bytes());
    match route.key_scope {
        KeyScope::Path => field(inbound.normalized_path.as_bytes()),
        KeyScope::Route => field(b""),
    }
    field(inbound.query.unwrap_or("").as_bytes());
    field(
        headers::get(inbound.headers, "content-type")
            .unwrap_or("")
            .as_bytes(),
    );
    let read_headers = route
        .key_sources
        .iter()
        .flat_map(|source| source.headers())
        .chain(match &route.tenant {
            Tenant::Header { name, .. } => Some(name.as_str()),
            Tenant::Shared => None,
        });
    for name in read_headers {
        match headers::get(inbound.headers, name) {
            Some(value) => {
                field(b"1");
                field(value.as_bytes());
            }
            None => field(b"0"),
        }
    }
    // The body by its hash, which admission then reuses.
    field(authenticated.raw_body_sha256().as_bytes());
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests;
