//! The operator's page (SPEC §10): `GET /__idemgate/ui` and its three
//! files, served by the worker itself with their security headers (a
//! strict Content-Security-Policy among them). The files are the
//! repository's `ui/`, built into the worker, so a deployment and the page
//! it serves are always the same version.
//!
//! Why not Workers Static Assets: under `wrangler dev` (4.86, the last for
//! Node 20) an `[assets]` block puts a proxy in front of the worker that
//! has no `scheduled` handler, so the Cron trigger wrangler itself
//! tells a developer to curl (`/cdn-cgi/handler/scheduled`) answered 500
//! and never reached the sweep. Four small files do not need a CDN.

use crate::problem::Problem;
use crate::receipt::HttpResponse;

/// The page's headers: it loads nothing but its own script, style and
/// icon, talks only to this origin, and cannot be framed.
const SECURITY_HEADERS: [(&str, &str); 7] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    (
        "permissions-policy",
        "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    ),
];

/// Each file: its path, content type and bytes.
const FILES: [(&str, &str, &[u8]); 11] = [
    (
        "/__idemgate/ui",
        "text/html; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui.html"),
    ),
    (
        "/__idemgate/ui/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/app.js"),
    ),
    (
        "/__idemgate/ui/api.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/api.js"),
    ),
    (
        "/__idemgate/ui/dom.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/dom.js"),
    ),
    (
        "/__idemgate/ui/receipt.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/receipt.js"),
    ),
    (
        "/__idemgate/ui/page.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/page.js"),
    ),
    (
        "/__idemgate/ui/router.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/router.js"),
    ),
    (
        "/__idemgate/ui/views.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/views.js"),
    ),
    (
        "/__idemgate/ui/audit.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/audit.js"),
    ),
    (
        "/__idemgate/ui/app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../../ui/__idemgate/ui/app.css"),
    ),
    (
        "/__idemgate/ui/icon.svg",
        "image/svg+xml",
        include_bytes!("../../../../ui/__idemgate/ui/icon.svg"),
    ),
];

/// Whether `path` (normalised) is the page's.
pub fn is_page(path: &str) -> bool {
    path == "/__idemgate/ui" || path.starts_with("/__idemgate/ui/")
}

/// The answer to `method` on the page's `path`: a file, its 404, or 405
/// for a method other than GET and HEAD (the body of a HEAD is dropped by
/// the runtime).
pub fn serve(method: &str, path: &str) -> Result<HttpResponse, Problem> {
    if !matches!(method, "GET" | "HEAD") {
        return Err(Problem::MethodNotAllowed {
            method: method.to_string(),
        });
    }
    let (_, content_type, body) = FILES
        .iter()
        .find(|(file, _, _)| *file == path)
        .ok_or(Problem::NotFound)?;
    let mut headers: Vec<(String, String)> = SECURITY_HEADERS
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    headers.push(("content-type".into(), content_type.to_string()));
    headers.push(("cache-control".into(), "no-cache".into()));
    Ok(HttpResponse {
        status: 200,
        headers,
        body: body.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::get;

    #[test]
    fn the_page_and_its_files_carry_their_security_headers() {
        for (path, kind) in [
            ("/__idemgate/ui", "text/html"),
            ("/__idemgate/ui/app.js", "text/javascript"),
            ("/__idemgate/ui/api.js", "text/javascript"),
            ("/__idemgate/ui/dom.js", "text/javascript"),
            ("/__idemgate/ui/receipt.js", "text/javascript"),
            ("/__idemgate/ui/page.js", "text/javascript"),
            ("/__idemgate/ui/router.js", "text/javascript"),
            ("/__idemgate/ui/views.js", "text/javascript"),
            ("/__idemgate/ui/audit.js", "text/javascript"),
            ("/__idemgate/ui/app.css", "text/css"),
            ("/__idemgate/ui/icon.svg", "image/svg+xml"),
        ] {
            let file = serve("GET", path).unwrap();
            assert_eq!(file.status, 200);
            assert!(get(&file.headers, "content-type")
                .unwrap()
                .starts_with(kind));
            let csp = get(&file.headers, "content-security-policy").unwrap();
            assert!(csp.contains("default-src 'none'"), "{path}");
            assert_eq!(get(&file.headers, "x-frame-options"), Some("DENY"));
            assert!(!file.body.is_empty());
        }
        let html = String::from_utf8(serve("HEAD", "/__idemgate/ui").unwrap().body).unwrap();
        assert!(!html.contains("<script>") && !html.contains(" style="));
    }

    #[test]
    fn other_paths_and_methods_are_refused() {
        assert_eq!(serve("GET", "/__idemgate/ui/x.js"), Err(Problem::NotFound));
        assert_eq!(
            serve("GET", "/__idemgate/ui/").map(|_| ()),
            Err(Problem::NotFound)
        );
        assert_eq!(serve("POST", "/__idemgate/ui").unwrap_err().status(), 405);
        assert!(is_page("/__idemgate/ui") && is_page("/__idemgate/ui/app.js"));
        assert!(!is_page("/__idemgate/uix"));
    }
}
