//! `scripts/send` for real: the built `idemgate-send` (crates/idemgate-send),
//! given a variables file with the routes profile's routes and secrets,
//! signs each provider's default fixture and posts it to the gateway under
//! `wrangler dev`. Every delivery is accepted and reaches the origin once;
//! `--same-event` sends the same event again, freshly signed, and it is
//! replayed; a new event is forwarded again.

use std::path::PathBuf;
use std::process::{Command, Output};

use base64::Engine;

use crate::providers::{route_vars, routes_json, V1A_SIGNER};
use crate::senders::now;
use crate::{Profile, World, FORWARD_SECRET};

/// The sender `scripts/test` builds (`cargo build -p idemgate-send`).
fn binary() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let binary = target.join("debug/idemgate-send");
    let built_at = std::fs::metadata(&binary)
        .and_then(|meta| meta.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: run scripts/test, which builds it (cargo build -p idemgate-send)",
                binary.display()
            )
        });
    let sources = root.join("crates/idemgate-send/src");
    for entry in std::fs::read_dir(&sources).unwrap().flatten() {
        let changed = entry.metadata().and_then(|meta| meta.modified()).unwrap();
        assert!(
            changed <= built_at,
            "{} changed after {} was built: run cargo build -p idemgate-send",
            entry.path().display(),
            binary.display()
        );
    }
    binary
}

/// Runs the sender with `args`, off the runtime's threads (the test origin
/// answers on them meanwhile).
async fn run(args: Vec<String>) -> Output {
    let binary = binary();
    tokio::task::spawn_blocking(move || Command::new(binary).args(&args).output().unwrap())
        .await
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The v1a route's sender's `whsk_` key: its seed, then its public key.
fn v1a_secret_key() -> String {
    let mut pair = V1A_SIGNER.to_bytes().to_vec();
    pair.extend_from_slice(V1A_SIGNER.verifying_key().as_bytes());
    format!(
        "whsk_{}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

pub async fn every_provider_is_sent_signed_forwarded_once_and_replayed(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    // The variables file a developer's .dev.vars would be for these routes.
    let dir = tempfile::tempdir().unwrap();
    let vars_path = dir.path().join(".dev.vars");
    let routes = routes_json(&origin);
    let mut vars = String::from("# the e2e routes profile\n");
    for (name, value) in route_vars(&routes, &origin) {
        assert!(!value.contains('\''), "{name}");
        vars.push_str(&format!("{name}='{value}'\n"));
    }
    std::fs::write(&vars_path, vars).unwrap();
    let vars_file = vars_path.display().to_string();
    let run_id = now();
    // (provider, route, extra arguments): a provider finds the route named
    // after it; the others are named with --route.
    let cert_url = format!("{origin}/v1/notifications/certs/idemgate-send-test.pem");
    let v1a = v1a_secret_key();
    let cases: Vec<(&str, &str, Vec<&str>)> = vec![
        ("stripe", "stripe", vec![]),
        ("standard-webhooks", "standard", vec!["--route", "standard"]),
        ("svix", "standard", vec!["--route", "standard"]),
        (
            "standard-webhooks",
            "v1a",
            vec!["--route", "v1a", "--secret", &v1a],
        ),
        ("github", "github", vec![]),
        ("github", "rotating", vec!["--route", "rotating"]),
        ("shopify", "shopify", vec![]),
        ("paddle", "paddle", vec![]),
        ("square", "square", vec![]),
        ("checkout", "checkout", vec![]),
        ("razorpay", "razorpay", vec![]),
        ("adyen", "adyen", vec![]),
        ("adyen-platform", "adyen-platform", vec![]),
        ("slack", "slack", vec![]),
        ("twilio", "twilio", vec![]),
        ("braintree", "braintree", vec![]),
        ("paypal", "paypal", vec!["--cert-url", &cert_url]),
        // The sender serves its test key where the route asks for it.
        ("plaid", "plaid", vec![]),
        ("hmac", "generic", vec!["--route", "generic"]),
        ("api", "api", vec![]),
    ];
    for (provider, route, extra) in cases {
        let what = format!("{provider} on route {route}");
        // A path under the route's own (the api route's is /v1), which
        // only this case's deliveries reach.
        let prefix = match route {
            "api" => format!("/v1/idemgate-send-{run_id}"),
            _ => format!("/p/{route}/idemgate-send-{provider}-{run_id}"),
        };
        let mut args: Vec<String> = vec![
            "--vars".into(),
            vars_file.clone(),
            provider.into(),
            "--url".into(),
            gateway.url(&prefix),
        ];
        args.extend(extra.iter().map(|arg| arg.to_string()));

        let first = run(args.clone()).await;
        let output = text(&first);
        assert_eq!(first.status.code(), Some(0), "{what}: {output}");
        assert!(output.contains("HTTP 201"), "{what}: {output}");
        assert!(
            !output.contains("idempotent-replayed: true"),
            "{what}: {output}"
        );
        let received = world.origin.received(&prefix);
        assert_eq!(received.len(), 1, "{what}: forwarded once\n{output}");
        received[0].verify(FORWARD_SECRET).unwrap();

        let mut again_args = args.clone();
        again_args.push("--same-event".into());
        let again = run(again_args).await;
        let output = text(&again);
        assert_eq!(again.status.code(), Some(0), "{what}: {output}");
        assert!(output.contains("same event"), "{what}: {output}");
        assert!(
            output.contains("idempotent-replayed: true"),
            "{what}: the same event is replayed\n{output}"
        );
        let replayed = world.origin.received(&prefix);
        assert_eq!(replayed.len(), 1, "{what}: not forwarded again");

        let fresh = run(args).await;
        let output = text(&fresh);
        assert_eq!(fresh.status.code(), Some(0), "{what}: {output}");
        assert!(
            !output.contains("idempotent-replayed: true"),
            "{what}: {output}"
        );
        let received = world.origin.received(&prefix);
        assert_eq!(received.len(), 2, "{what}: a new event is forwarded");
        assert_ne!(received[0].body, received[1].body, "{what}: a new event");
    }

    // GoCardless's fixture is a batch of two events: two forwards, each
    // in an envelope of its own, and both replayed when sent again.
    let prefix = format!("/p/gocardless/idemgate-send-{run_id}");
    let args: Vec<String> = vec![
        "--vars".into(),
        vars_file.clone(),
        "gocardless".into(),
        "--url".into(),
        gateway.url(&prefix),
    ];
    let first = run(args.clone()).await;
    let output = text(&first);
    assert_eq!(first.status.code(), Some(0), "{output}");
    assert!(output.contains("HTTP 200"), "{output}");
    assert_eq!(output.matches("\"forwarded\"").count(), 2, "{output}");
    assert_eq!(world.origin.count(&prefix), 2, "one forward per event");
    let mut again_args = args;
    again_args.push("--same-event".into());
    let again = run(again_args).await;
    let output = text(&again);
    assert_eq!(again.status.code(), Some(0), "{output}");
    assert_eq!(output.matches("\"replayed\"").count(), 2, "{output}");
    assert_eq!(world.origin.count(&prefix), 2, "not forwarded again");

    // --repeat: the event, then its replays.
    let prefix = format!("/p/stripe/idemgate-send-repeat-{run_id}");
    let repeat = run(vec![
        "--vars".into(),
        vars_file.clone(),
        "stripe".into(),
        "--url".into(),
        gateway.url(&prefix),
        "--repeat".into(),
        "3".into(),
    ])
    .await;
    let output = text(&repeat);
    assert_eq!(repeat.status.code(), Some(0), "{output}");
    assert_eq!(
        output.matches("idempotent-replayed: true").count(),
        2,
        "{output}"
    );
    assert_eq!(world.origin.count(&prefix), 1);

    // A wrong secret: the gateway's 401, exit 2, nothing forwarded.
    let prefix = format!("/p/stripe/idemgate-send-forged-{run_id}");
    let forged = run(vec![
        "--vars".into(),
        vars_file.clone(),
        "stripe".into(),
        "--url".into(),
        gateway.url(&prefix),
        "--secret".into(),
        "whsec_not_the_routes".into(),
    ])
    .await;
    let output = text(&forged);
    assert_eq!(forged.status.code(), Some(2), "{output}");
    assert!(
        output.contains("HTTP 401") && output.contains("bad-signature"),
        "{output}"
    );
    assert_eq!(world.origin.count(&prefix), 0);

    // Errors name what to do: an unknown provider lists them; a provider
    // with several routes asks for --route.
    let unknown = run(vec!["--vars".into(), vars_file.clone(), "strip".into()]).await;
    let output = text(&unknown);
    assert_eq!(unknown.status.code(), Some(1), "{output}");
    assert!(
        output.contains("unknown provider") && output.contains("paypal"),
        "{output}"
    );
    let ambiguous = run(vec!["--vars".into(), vars_file, "standard-webhooks".into()]).await;
    let output = text(&ambiguous);
    assert_eq!(ambiguous.status.code(), Some(1), "{output}");
    assert!(output.contains("--route"), "{output}");
}
