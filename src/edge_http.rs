//! The runtime's own `Request` and `Response` (adapter): every answer the
//! worker renders is built here, and deliveries read their request here.
//! `worker::Request` reads `Request.cf`, the method, the URL and the headers
//! object up front, and `worker::Headers` crosses into JavaScript once per
//! header, on every delivery. Here a header list crosses as one string
//! each way ([`idemgate_core::headers::encode_list`]), for every request and
//! response the worker reads or builds, and nothing is read that a delivery
//! does not use.

use wasm_bindgen::prelude::*;
use worker::js_sys::{ArrayBuffer, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

use idemgate_core::headers::{decode_list, encode_list, HeaderList};
use idemgate_core::receipt::HttpResponse;

#[wasm_bindgen(inline_js = r#"
export function header_text(headers) {
  let text = "";
  for (const [name, value] of headers) text += name + "\0" + value + "\0";
  return text;
}
export function new_headers(text) {
  const parts = text.split("\0");
  const headers = new Headers();
  for (let i = 0; i + 1 < parts.length; i += 2) headers.append(parts[i], parts[i + 1]);
  return headers;
}
export function new_response(status, headers, body) {
  return new Response(body, { status, headers: new_headers(headers) });
}
"#)]
extern "C" {
    fn header_text(headers: &web_sys::Headers) -> String;
    #[wasm_bindgen(catch)]
    fn new_headers(text: &str) -> Result<web_sys::Headers, JsValue>;
    #[wasm_bindgen(catch)]
    fn new_response(
        status: u16,
        headers: &str,
        body: Option<Uint8Array>,
    ) -> Result<web_sys::Response, JsValue>;
}

/// A runtime `Headers` object as a list, names lowercase (the Fetch
/// standard iterates them so).
pub fn header_list(headers: &web_sys::Headers) -> HeaderList {
    decode_list(&header_text(headers))
}

/// A list as a runtime `Headers` object; a name or value the runtime
/// refuses is an error.
pub fn header_object(list: &[(String, String)]) -> worker::Result<web_sys::Headers> {
    Ok(new_headers(&encode_list(list))?)
}

/// The whole body in one call: for bodies whose declared length binds, so
/// the runtime has already bounded them.
pub async fn whole_body(request: &web_sys::Request) -> worker::Result<Vec<u8>> {
    if request.body().is_none() {
        return Ok(Vec::new());
    }
    let buffer: ArrayBuffer = JsFuture::from(request.array_buffer()?).await?.into();
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Statuses whose responses cannot carry a body in the Fetch API.
fn is_null_body_status(status: u16) -> bool {
    matches!(status, 101 | 204 | 205 | 304)
}

pub fn response(response: &HttpResponse) -> worker::Result<web_sys::Response> {
    let body =
        (!is_null_body_status(response.status)).then(|| Uint8Array::from(response.body.as_slice()));
    Ok(new_response(
        response.status,
        &encode_list(&response.headers),
        body,
    )?)
}
