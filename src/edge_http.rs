//! The runtime's own `Request`, `Response` and `fetch` (adapter): every
//! answer the worker renders is built here, every request it reads is read
//! here, and every request it sends leaves from here.
//!
//! `worker::Request` reads `Request.cf`, the method, the URL and the
//! headers object up front, `worker::Headers` crosses into JavaScript once
//! per header, and its URL type brings the `url` crate with its IDNA tables
//! (about 20 KiB of the gzipped wasm). Here a header list crosses as one
//! string each way ([`idemgate_core::headers::encode_list`]), nothing is
//! read that is not used, and no URL is parsed in Rust.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::js_sys::{self, Array, ArrayBuffer, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

use idemgate_core::headers::{decode_list, encode_list, HeaderList};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::receipt::{ForwardResult, HttpResponse};

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
export async function read_body(request, limit) {
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return body;
}
function send(fetcher, url, init) {
  return fetcher ? fetcher.fetch(url, init) : fetch(url, init);
}
export function proxy(request, url, headers, fetcher) {
  return send(fetcher, url, {
    method: request.method,
    headers: new_headers(headers),
    body: request.body,
    redirect: "manual",
  });
}
export function forward(url, method, headers, body, timeoutMs, fetcher) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const init = { method, headers: new_headers(headers), redirect: "manual", signal: controller.signal };
  if (body.length > 0) init.body = body;
  return send(fetcher, url, init)
    .then(async (response) => [response.status, header_text(response.headers), new Uint8Array(await response.arrayBuffer())])
    .then(
      (answer) => {
        clearTimeout(timer);
        return answer;
      },
      (error) => {
        clearTimeout(timer);
        throw controller.signal.aborted ? "timeout" : String((error && error.message) || error);
      },
    );
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
    #[wasm_bindgen(catch)]
    fn read_body(request: &web_sys::Request, limit: f64) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn proxy(
        request: &web_sys::Request,
        url: &str,
        headers: &str,
        fetcher: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn forward(
        url: &str,
        method: &str,
        headers: &str,
        body: &Uint8Array,
        timeout_ms: f64,
        fetcher: &JsValue,
    ) -> Result<js_sys::Promise, JsValue>;
}

/// A runtime `Headers` object as a list, names lowercase (the Fetch
/// standard iterates them so).
pub fn header_list(headers: &web_sys::Headers) -> HeaderList {
    decode_list(&header_text(headers))
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

/// The body read chunk by chunk, given up at the first byte over `limit`
/// (`None`), so a chunked upload is never buffered whole.
pub async fn bounded_body(
    request: &web_sys::Request,
    limit: u64,
) -> worker::Result<Option<Vec<u8>>> {
    let read = JsFuture::from(read_body(request, limit as f64)?).await?;
    if read.is_null() {
        return Ok(None);
    }
    Ok(Some(read.dyn_into::<Uint8Array>()?.to_vec()))
}

/// Proxies `request` to `url` with `headers`, its body streamed, redirects
/// not followed: the origin's answer as it is.
pub async fn proxy_to(
    request: &web_sys::Request,
    url: &str,
    headers: &[(String, String)],
    fetcher: Option<&JsValue>,
) -> Result<web_sys::Response, String> {
    let network = JsValue::UNDEFINED;
    let sent = proxy(
        request,
        url,
        &encode_list(headers),
        fetcher.unwrap_or(&network),
    )
    .map_err(describe)?;
    JsFuture::from(sent)
        .await
        .map_err(describe)?
        .dyn_into::<web_sys::Response>()
        .map_err(describe)
}

/// The binding `name` of `env` a forward goes through (SPEC §5, v5: a
/// service or mTLS certificate binding): an error names it when missing.
pub fn fetcher(env: &worker::Env, name: &str) -> Result<JsValue, String> {
    match js_sys::Reflect::get(env, &JsValue::from_str(name)) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(format!("the {name} binding is missing (wrangler.toml)")),
    }
}

/// Sends a forward, giving up after `timeout_ms`; redirects are not
/// followed (an origin's 3xx is its answer). The fetch starts when this
/// future is first polled, in that turn. `fetcher` is the binding it
/// goes through, if not the network.
pub async fn send_forward(
    request: OutboundRequest,
    timeout_ms: u64,
    fetcher: Option<&JsValue>,
) -> ForwardResult {
    let body = Uint8Array::from(request.body.as_slice());
    let network = JsValue::UNDEFINED;
    let sent = forward(
        &request.url,
        &request.method,
        &encode_list(&request.headers),
        &body,
        timeout_ms as f64,
        fetcher.unwrap_or(&network),
    );
    drop(request);
    let answer = match sent {
        Ok(promise) => JsFuture::from(promise).await,
        Err(error) => Err(error),
    };
    match answer {
        Ok(answer) => {
            let answer: Array = answer.unchecked_into();
            ForwardResult::Answered(HttpResponse {
                status: answer.get(0).as_f64().unwrap_or(0.0) as u16,
                headers: decode_list(&answer.get(1).as_string().unwrap_or_default()),
                body: answer.get(2).unchecked_into::<Uint8Array>().to_vec(),
            })
        }
        Err(error) if error.as_string().as_deref() == Some("timeout") => ForwardResult::TimedOut,
        Err(error) => ForwardResult::Unreachable(describe(error)),
    }
}

fn describe(error: JsValue) -> String {
    error
        .as_string()
        .or_else(|| {
            error
                .dyn_ref::<js_sys::Error>()
                .map(|error| String::from(error.message()))
        })
        .unwrap_or_else(|| "the runtime refused the request".into())
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

/// A JSON answer of the operator API.
pub fn json(status: u16, value: &impl serde::Serialize) -> worker::Result<web_sys::Response> {
    response(&HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(value)
            .map_err(|error| worker::Error::RustError(error.to_string()))?,
    })
}
