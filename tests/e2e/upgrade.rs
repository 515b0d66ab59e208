//! Upgrading from the second version (SPEC §3, v3 "Upgrading"): where this
//! version derives a key or scope differently, a retry that spans the
//! upgrade is answered from the receipt the second version kept, never
//! forwarded again. The "before" deployment is the test-hooks worker told
//! to address every delivery as the second version did; the "after" one is
//! the release worker, on the same Durable Object and D1 state.

use idemgate_core::signature::{Message, SchemeSettings, SignatureScheme};

use crate::support::gateway::{Index, Worker};
use crate::support::{client, Gateway, Reply};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const GITHUB: &str = "upgrade-github-secret";
const ADYEN: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

fn routes() -> String {
    serde_json::json!({
        "api": {"path": "/up/v1", "mode": "api"},
        "github": {"path": "/up/github", "signature": "github", "signing_secret": "UP_GITHUB_SECRET"},
        "composite": {"path": "/up/composite", "key_sources": "json:/psp+json:/event"},
        "adyen": {"path": "/up/adyen", "signature": "adyen", "signing_secret": "UP_ADYEN_KEY"}
    })
    .to_string()
}

/// A delivery as sent: path, headers, body.
type Sent = (&'static str, Vec<(String, String)>, Vec<u8>);

/// One delivery of each kind whose key or scope this version derives
/// otherwise.
fn deliveries(run: u64) -> Vec<Sent> {
    let json = ("content-type".to_string(), "application/json".to_string());
    let signed = |scheme: &str, secret: &str, body: String| {
        let mut message = Message {
            headers: vec![json.clone()],
            body: body.into_bytes(),
        };
        SignatureScheme::configure(
            scheme,
            &SchemeSettings {
                secret: Some(secret.into()),
                ..SchemeSettings::default()
            },
        )
        .unwrap()
        .sign(&mut message, crate::senders::now());
        (message.headers, message.body)
    };
    let (github_headers, github_body) = signed(
        "github",
        GITHUB,
        // Not canonical JSON: the second version hashed its canonical form.
        format!(r#"{{ "action": "completed", "delivery": "up-{run}" }}"#),
    );
    let (adyen_headers, adyen_body) = signed(
        "adyen",
        ADYEN,
        format!(
            r#"{{"live":"false","notificationItems":[{{"NotificationRequestItem":{{"amount":{{"currency":"EUR","value":10}},"eventCode":"AUTHORISATION","merchantAccountCode":"M","merchantReference":"r","pspReference":"up{run}","success":"true"}}}}]}}"#
        ),
    );
    vec![
        (
            "/up/v1/charges",
            vec![
                json.clone(),
                ("idempotency-key".into(), format!("up-api-{run}")),
                ("authorization".into(), "Bearer tenant-a".into()),
            ],
            br#"{"amount":100}"#.to_vec(),
        ),
        ("/up/github/hooks", github_headers, github_body),
        (
            "/up/composite/events",
            vec![json],
            format!(r#"{{"psp":"p:{run}","event":"CAPTURE"}}"#).into_bytes(),
        ),
        ("/up/adyen/notify", adyen_headers, adyen_body),
    ]
}

async fn send(gateway: &Gateway, path: &str, headers: &[(String, String)], body: &[u8]) -> Reply {
    let mut request = client().post(gateway.url(path)).body(body.to_vec());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    Reply::read(request.send().await.unwrap()).await
}

pub async fn a_retry_that_spans_the_upgrade_is_not_forwarded_again(world: &'static World) {
    let origin = world.origin.url();
    let routes = routes();
    let mut vars = vec![
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("UP_GITHUB_SECRET", GITHUB),
        ("UP_ADYEN_KEY", ADYEN),
    ];
    let run = crate::senders::now();
    let deliveries = deliveries(run);
    let mut before_vars = vars.clone();
    before_vars.push(("IDEMGATE_TEST_SECOND_VERSION_KEYS", "true"));
    // The second version kept its index in D1.
    let before = Gateway::start_in_with_index(
        tempfile::tempdir().unwrap(),
        Worker::TestHooks,
        Index::Legacy,
        &before_vars,
    )
    .await;
    let mut first = Vec::new();
    for (path, headers, body) in &deliveries {
        let reply = send(&before, path, headers, body).await;
        assert_eq!(
            reply.status,
            201,
            "{path}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        first.push(reply);
    }
    assert_eq!(world.origin.count("/up/"), deliveries.len());
    // The upgrade: this version, on the same state.
    let state = before.crash();
    vars.retain(|(name, _)| !name.starts_with("IDEMGATE_TEST"));
    let after = Gateway::start_in_with_index(state, Worker::Release, Index::Legacy, &vars).await;
    for ((path, headers, body), first) in deliveries.iter().zip(&first) {
        let retry = send(&after, path, headers, body).await;
        assert_eq!(
            retry.status,
            201,
            "{path}: {}",
            String::from_utf8_lossy(&retry.body)
        );
        assert!(
            retry.replayed(),
            "{path}: answered from the second version's receipt"
        );
        assert_eq!(retry.body, first.body, "{path}");
    }
    assert_eq!(
        world.origin.count("/up/"),
        deliveries.len(),
        "no retry that spans the upgrade is forwarded again"
    );
    // A new delivery after the upgrade takes this version's key.
    let (path, mut headers, body) = deliveries[0].clone();
    headers[1].1 = format!("up-api-new-{run}");
    let fresh = send(&after, path, &headers, &body).await;
    assert_eq!(fresh.status, 201);
    assert!(!fresh.replayed());
    assert_eq!(world.origin.count("/up/"), deliveries.len() + 1);
}
