//! The worked deployment (`examples/deploy/wrangler.toml`) is the one
//! `docs/deploying.md` shows, and its `[vars]` make a valid configuration: what a team
//! copies deploys and answers, rather than 500 `misconfigured`. (CI also
//! deploys it with `wrangler deploy --dry-run`.)

use std::collections::HashMap;
use std::path::PathBuf;

use idemgate_core::config::Config;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> String {
    std::fs::read_to_string(repository().join("examples/deploy/wrangler.toml")).unwrap()
}

#[test]
fn the_deploying_page_shows_the_worked_deployment_verbatim() {
    let page = std::fs::read_to_string(repository().join("docs/deploying.md")).unwrap();
    assert!(
        page.contains(&example()),
        "docs/deploying.md must show examples/deploy/wrangler.toml verbatim"
    );
}

#[test]
fn the_worked_deployment_is_a_valid_configuration() {
    let file: toml::Table = example().parse().unwrap();
    // As the runtime hands them over: strings as they are, anything else
    // as its JSON text (src/env.rs).
    let mut env: HashMap<String, String> = file["vars"]
        .as_table()
        .unwrap()
        .iter()
        .map(|(name, value)| {
            let text = match value {
                toml::Value::String(text) => text.clone(),
                other => serde_json::to_string(other).unwrap(),
            };
            (name.clone(), text)
        })
        .collect();
    for secret in [
        "STRIPE_WEBHOOK_SECRET",
        "GITHUB_WEBHOOK_SECRET",
        "FORWARD_SECRET",
        "ADMIN_TOKEN",
    ] {
        env.insert(secret.into(), "whsec_c2VjcmV0".into());
    }
    env.insert(
        "ADYEN_HMAC_KEY".into(),
        "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056".into(),
    );
    let config = Config::from_lookup(|name| env.get(name).cloned()).unwrap();
    let route = |path: &str| config.route_for(path).unwrap();
    assert_eq!(route("/webhooks/stripe").name, "stripe");
    assert!(route("/webhooks/adyen").is_async());
    assert_eq!(route("/webhooks/github/x").name, "github");
    assert_eq!(route("/v1/charges").name, "api");
    assert!(route("/v1/charges").retryable_statuses.contains(404));
    assert!(matches!(
        &route("/v1/charges").tenant,
        idemgate_core::config::Tenant::Header { name, .. } if name == "authorization"
    ));
    assert!(config.route_for("/other").is_err());
    // A secret the deployment names but nobody set is refused by name,
    // for its own route only.
    env.remove("GITHUB_WEBHOOK_SECRET");
    let config = Config::from_lookup(|name| env.get(name).cloned()).unwrap();
    let missing = config.route_for("/webhooks/github").unwrap_err();
    assert_eq!(config.route_for("/webhooks/stripe").unwrap().name, "stripe");
    assert!(
        missing.detail().contains("GITHUB_WEBHOOK_SECRET"),
        "{}",
        missing.detail()
    );
}
