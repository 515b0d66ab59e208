//! The senders `scripts/send` can play: each a signature scheme (or none,
//! for an API client), the header names it signs under, and its default
//! fixture.

/// One sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    /// What `scripts/send` takes, and its fixtures' directory.
    pub name: &'static str,
    /// The `signature` a route of this sender has (`none`: an API client).
    pub scheme: &'static str,
    /// Svix sends Standard Webhooks under `svix-*` header names.
    pub svix_brand: bool,
    pub title: &'static str,
    pub default_fixture: &'static str,
    /// The fixture `--thin` sends: a thin event (Stripe's event
    /// destinations), for a sender that has them.
    pub thin_fixture: Option<&'static str>,
}

const fn provider(
    name: &'static str,
    scheme: &'static str,
    title: &'static str,
    default_fixture: &'static str,
) -> Provider {
    Provider {
        name,
        scheme,
        svix_brand: false,
        title,
        default_fixture,
        thin_fixture: None,
    }
}

/// Every sender, in the README's order.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        thin_fixture: Some("v1.billing.meter.error_report_triggered"),
        ..provider(
            "stripe",
            "stripe",
            "Stripe (snapshot events; --thin: thin events)",
            "payment_intent.succeeded",
        )
    },
    provider(
        "standard-webhooks",
        "standard-webhooks",
        "Standard Webhooks (v1 HMAC, or v1a Ed25519 with a whsk_ key)",
        "invoice.paid",
    ),
    Provider {
        svix_brand: true,
        ..provider(
            "svix",
            "standard-webhooks",
            "Svix-branded Standard Webhooks (svix-* headers)",
            "invoice.paid",
        )
    },
    provider("github", "github", "GitHub", "push"),
    provider("shopify", "shopify", "Shopify", "orders-create"),
    provider(
        "paddle",
        "paddle",
        "Paddle Billing",
        "transaction.completed",
    ),
    provider("square", "square", "Square", "payment.updated"),
    provider("checkout", "checkout", "Checkout.com", "payment_approved"),
    provider("razorpay", "razorpay", "Razorpay", "payment.captured"),
    provider(
        "adyen",
        "adyen",
        "Adyen (standard notifications, signed in the body)",
        "AUTHORISATION",
    ),
    provider(
        "adyen-platform",
        "adyen-platform",
        "Adyen Balance Platform",
        "balancePlatform.transfer.updated",
    ),
    provider("slack", "slack", "Slack Events API", "event_callback"),
    provider("twilio", "twilio", "Twilio (form posts)", "message-status"),
    provider(
        "braintree",
        "braintree",
        "Braintree (bt_signature and bt_payload)",
        "subscription_charged_successfully",
    ),
    provider(
        "paypal",
        "paypal",
        "PayPal (RSA, with a local test certificate)",
        "PAYMENT.CAPTURE.COMPLETED",
    ),
    provider(
        "gocardless",
        "gocardless",
        "GoCardless (a batch of events, one receipt each)",
        "payments-confirmed",
    ),
    provider(
        "plaid",
        "plaid",
        "Plaid (an ES256 JWT, with a local test key endpoint)",
        "SYNC_UPDATES_AVAILABLE",
    ),
    provider(
        "hmac",
        "hmac",
        "any HMAC sender (the generic scheme)",
        "order.paid",
    ),
    provider(
        "api",
        "none",
        "an API client: Idempotency-Key, no signature",
        "create-payment",
    ),
];

/// The sender called `name`.
pub fn by_name(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|provider| provider.name == name)
}

/// The sender a route of `scheme` has when it is not named: the plain
/// brand of its scheme.
pub fn for_scheme(scheme: &str) -> Option<&'static Provider> {
    PROVIDERS
        .iter()
        .find(|provider| provider.scheme == scheme && !provider.svix_brand)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_has_a_sender_with_a_default_fixture() {
        for scheme in idemgate_core::signature::scheme_names() {
            let provider = for_scheme(scheme).unwrap_or_else(|| panic!("{scheme}"));
            let names = crate::fixture::list(&crate::fixture::fixtures_dir(), provider.name);
            assert!(
                names.iter().any(|name| name == provider.default_fixture),
                "{scheme}: {names:?}"
            );
        }
        for provider in PROVIDERS {
            assert!(
                idemgate_core::signature::scheme_names().any(|known| known == provider.scheme),
                "{}",
                provider.name
            );
            if let Some(thin) = provider.thin_fixture {
                let dir = crate::fixture::fixtures_dir();
                let fixture = crate::fixture::load(&dir, provider.name, thin, thin).unwrap();
                assert!(
                    crate::fixture::is_thin(&fixture),
                    "{}: {thin}",
                    provider.name
                );
            }
        }
    }
}
