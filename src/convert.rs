//! Conversions between the pure core's plain data and the JS-backed
//! `worker` types. Only adapters call these: `worker::Headers` and friends
//! panic outside a Workers runtime.

use worker::js_sys::Uint8Array;
use worker::{Headers, Method, Request, RequestInit, RequestRedirect};

use crate::edge_http::{header_list, header_object};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::receipt::HttpResponse;

/// A request that does not follow redirects: an origin's 3xx is its answer.
pub fn to_request(request: &OutboundRequest) -> worker::Result<Request> {
    let mut init = RequestInit::new();
    init.with_method(Method::from(request.method.clone()))
        .with_headers(Headers(header_object(&request.headers)?))
        .with_redirect(RequestRedirect::Manual);
    if !request.body.is_empty() {
        init.with_body(Some(Uint8Array::from(request.body.as_slice()).into()));
    }
    Request::new_with_init(&request.url, &init)
}

pub fn from_response_parts(status: u16, headers: &Headers, body: Vec<u8>) -> HttpResponse {
    HttpResponse {
        status,
        headers: header_list(&headers.0),
        body,
    }
}
