//! `idemgate-send PROVIDER [FIXTURE]`: the command line.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fixture::{self, Fixture};
use crate::http::{self, CertificateServer, Reply};
use crate::provider::{Provider, PROVIDERS};
use crate::route::{self, Target, Vars};
use crate::sign;
use crate::state;
use crate::template::Event;

/// `println!` that stops quietly, as a shell tool does, when stdout's
/// reader has gone (`scripts/send --list | head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(141);
        }
    }};
}

pub const USAGE: &str = "\
Signs a sample delivery of a provider with its route's secret from .dev.vars
and sends it to the local gateway (scripts/dev), as the provider would.

usage: scripts/send PROVIDER [FIXTURE] [options]
       scripts/send --list

PROVIDER   a provider (stripe, github, adyen, paypal, api, ... see --list)
           or the name of a route in ROUTES
FIXTURE    one of the provider's fixtures (default: its first, see --list),
           or a file: a fixture (.txt), or a body alone (any other file)

options:
  --vars FILE        the variables (default: .dev.vars; $IDEMGATE_VARS)
  --var NAME=VALUE   set or replace one variable (NAME:VALUE also)
  --route NAME       the route to send to (default: the route named PROVIDER,
                     else the one route with the provider's signature)
  --url URL          where to POST (default http://127.0.0.1:8787 + the
                     route's path; a URL without a path gets the route's)
  --thin             send a thin event (Stripe's event destinations: the
                     payload names the object, created in RFC 3339), the
                     provider's thin fixture unless FIXTURE names another
  --same-event       send the last event sent to this route again: the same
                     ids, times and body, freshly signed, as a retry is (the
                     gateway replays it)
  --repeat N         send the event N times in a row (the 2nd on replay)
  --secret VALUE     sign with VALUE instead of the route's secret (a wrong
                     one shows the 401; a whsk_ key for a v1a route)
  --cert-url URL     PayPal: name this certificate URL and serve nothing
                     (default: serve the test certificate on the route's
                     local signature_cert_hosts while sending)
  --show-body, -v    print the request's body too
  --dry-run          sign and print the request; send nothing
  --list             the providers, their fixtures and routes
";

#[derive(Debug, Default)]
struct Options {
    wanted: Option<String>,
    fixture: Option<String>,
    vars: Option<PathBuf>,
    var: Vec<(String, String)>,
    route: Option<String>,
    url: Option<String>,
    same_event: bool,
    thin: bool,
    repeat: u32,
    secret: Option<String>,
    cert_url: Option<String>,
    show_body: bool,
    dry_run: bool,
    list: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        repeat: 1,
        ..Options::default()
    };
    let mut positional = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{name} takes a value"))
        };
        match flag {
            "--vars" => options.vars = Some(PathBuf::from(value(flag)?)),
            "--var" => {
                let pair = value(flag)?;
                let at = pair.find(['=', ':']).ok_or("--var takes NAME=VALUE")?;
                let (name, value) = (&pair[..at], &pair[at + 1..]);
                options.var.push((name.to_string(), value.to_string()));
            }
            "--route" => options.route = Some(value(flag)?),
            "--url" => options.url = Some(value(flag)?),
            "--secret" => options.secret = Some(value(flag)?),
            "--cert-url" => options.cert_url = Some(value(flag)?),
            "--repeat" => {
                options.repeat = value(flag)?
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("--repeat takes a number from 1 to 1000")?
            }
            "--same-event" => options.same_event = true,
            "--thin" => options.thin = true,
            "--show-body" | "-v" | "--verbose" => options.show_body = true,
            "--dry-run" => options.dry_run = true,
            "--list" => options.list = true,
            "-h" | "--help" => return Err(String::new()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            _ => positional.push(arg.clone()),
        }
    }
    let mut positional = positional.into_iter();
    options.wanted = positional.next();
    options.fixture = positional.next();
    if let Some(extra) = positional.next() {
        return Err(format!("one PROVIDER and one FIXTURE at most ({extra}?)"));
    }
    if options.wanted.is_none() && !options.list {
        return Err("which provider? (scripts/send --list)".into());
    }
    Ok(options)
}

fn load_vars(options: &Options) -> Result<(Vars, PathBuf), String> {
    let path = options
        .vars
        .clone()
        .or_else(|| std::env::var_os("IDEMGATE_VARS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".dev.vars"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !options.var.is_empty() => {
            String::new()
        }
        Err(error) => {
            return Err(format!(
                "cannot read {} ({error}): scripts/dev creates it from .dev.vars.example, or copy that file",
                path.display()
            ))
        }
    };
    let mut vars = Vars {
        entries: crate::dotenv::parse(&text),
        source: path.display().to_string(),
    };
    for (name, value) in &options.var {
        vars.set(name, value);
    }
    Ok((vars, path))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Runs the command line; the process's exit code: 0 when every answer
/// was 2xx, 2 when one was not, 1 when nothing could be sent.
pub fn run(args: &[String]) -> i32 {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            say!("{}", USAGE.trim_end());
            return 0;
        }
        Err(message) => {
            eprintln!("idemgate-send: {message}\n\n{USAGE}");
            return 1;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(main(options)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("idemgate-send: {message}");
            1
        }
    }
}

async fn main(options: Options) -> Result<i32, String> {
    if options.list {
        list(&options);
        return Ok(0);
    }
    let (vars, vars_path) = load_vars(&options)?;
    let wanted = options.wanted.as_deref().expect("parse checked it");
    let target = route::resolve(
        &vars,
        wanted,
        options.route.as_deref(),
        options.secret.as_deref(),
    )?;
    let state_path = state::path_for(&vars_path);
    let dir = fixture::fixtures_dir();
    let wanted_fixture = match options.thin {
        true => Some(thin_fixture(options.fixture.as_deref(), target.provider)?),
        false => options.fixture.clone(),
    };
    let (fixture_name, event, fresh) = if options.same_event {
        let (last, event) = state::last(&state_path, &target.route).ok_or_else(|| {
            format!(
                "no event was sent to route {} yet (with {}): send one without --same-event first",
                target.route, vars.source
            )
        })?;
        if let Some(asked) = wanted_fixture.as_ref().filter(|asked| **asked != last) {
            return Err(format!(
                "the last event sent to route {} was of {last}, not {asked}",
                target.route
            ));
        }
        (last, event, false)
    } else {
        let name = wanted_fixture.unwrap_or_else(|| target.provider.default_fixture.to_string());
        (name, Event::new(now_ms()), true)
    };
    let fixture = fixture::load(
        &dir,
        target.provider.name,
        &fixture_name,
        target.provider.default_fixture,
    )?;
    if options.thin && !fixture::is_thin(&fixture) {
        return Err(format!(
            "--thin: {} is not a thin event (its body's \"object\" is not \"v2.core.event\")",
            fixture.name
        ));
    }
    let url = target_url(options.url.as_deref(), &target.path)?;

    // PayPal: the certificate the delivery names, served from here unless
    // it is served elsewhere.
    let (cert_url, server) = match (target.provider.scheme, &options.cert_url) {
        ("paypal", Some(given)) => (Some(given.clone()), None),
        ("paypal", None) => {
            let (port, url) = local_cert_host(&target)?;
            let server = match options.dry_run {
                true => None,
                false => Some(CertificateServer::start(port, sign::TEST_CERTIFICATE).await?),
            };
            (Some(url), server)
        }
        // Plaid: the key endpoint the route asks, served from here.
        ("plaid", _) => {
            let port = local_api_port(&target)?;
            let server = match options.dry_run {
                true => None,
                false => Some(CertificateServer::plaid_key(port).await?),
            };
            (None, server)
        }
        _ => (None, None),
    };

    let client = http::client();
    let mut all_ok = true;
    for attempt in 1..=options.repeat {
        let rendered = fixture.render(&event)?;
        let now = now_ms() / 1_000;
        let message = sign::sign(&target, rendered, now, cert_url.as_deref())?;
        if options.repeat > 1 {
            say!("--- {attempt} of {}", options.repeat);
        }
        print_request(
            &url,
            &target,
            &fixture,
            &event,
            fresh && attempt == 1,
            &message,
            &options,
        );
        if options.dry_run {
            say!("{}", String::from_utf8_lossy(&message.body));
            continue;
        }
        let reply = http::post(&client, &url, &message).await?;
        if attempt == 1 && !options.same_event {
            if let Err(warning) = state::remember(&state_path, &target.route, &fixture.name, &event)
            {
                eprintln!("idemgate-send: {warning} (--same-event will not find this event)");
            }
        }
        print_reply(&reply, &url, &vars.source, &options);
        all_ok &= (200..300).contains(&reply.status);
    }
    if let Some(server) = server {
        let what = match target.provider.scheme {
            "plaid" => "the test Plaid key was asked for",
            _ => "the test certificate was fetched",
        };
        say!("({what} {} time(s) from this sender)", server.served());
    }
    Ok(if all_ok { 0 } else { 2 })
}

/// The fixture `--thin` sends: the one named, or the sender's thin event;
/// an error for a sender that sends none.
fn thin_fixture(named: Option<&str>, provider: &Provider) -> Result<String, String> {
    match (named, provider.thin_fixture) {
        (_, None) => Err(format!(
            "--thin: {} sends no thin events (Stripe's event destinations do: scripts/send stripe --thin)",
            provider.name
        )),
        (Some(named), Some(_)) => Ok(named.to_string()),
        (None, Some(thin)) => Ok(thin.to_string()),
    }
}

/// `--url` as given when it has a path, else with the route's path.
fn target_url(given: Option<&str>, route_path: &str) -> Result<String, String> {
    let base = given.unwrap_or("http://127.0.0.1:8787");
    let after_scheme = base
        .strip_prefix("http://")
        .or_else(|| base.strip_prefix("https://"))
        .ok_or_else(|| format!("--url {base:?} is not an http:// or https:// URL"))?;
    match after_scheme.find('/') {
        Some(at) if &after_scheme[at..] != "/" => Ok(base.to_string()),
        _ => Ok(format!("{}{route_path}", base.trim_end_matches('/'))),
    }
}

/// The local origin of the route's `signature_cert_hosts` the test
/// certificate is served on, and the URL a delivery names.
fn local_cert_host(target: &Target) -> Result<(u16, String), String> {
    let local = target.cert_hosts.iter().find_map(|host| {
        let rest = host
            .strip_prefix("http://127.0.0.1:")
            .or_else(|| host.strip_prefix("http://localhost:"))?;
        Some((rest.parse::<u16>().ok()?, host.clone()))
    });
    let (port, host) = local.ok_or_else(|| {
        format!(
            "route {} fetches PayPal certificates only from {}: give it signature_cert_hosts = \"http://127.0.0.1:PORT\" (this sender serves its test certificate there), or pass --cert-url",
            target.route,
            target.cert_hosts.join(", ")
        )
    })?;
    Ok((
        port,
        format!("{host}/v1/notifications/certs/CERT-360caa42-fca2a594-idemgate-test"),
    ))
}

/// The local port of the route's `signature_api_base`, where the test
/// Plaid key is served.
fn local_api_port(target: &Target) -> Result<u16, String> {
    let base = target.api_base.as_deref().unwrap_or("");
    base.strip_prefix("http://127.0.0.1:")
        .or_else(|| base.strip_prefix("http://localhost:"))
        .and_then(|port| port.parse::<u16>().ok())
        .ok_or_else(|| {
            format!(
                "route {} asks Plaid's keys from {base}: give it signature_api_base = \"http://127.0.0.1:PORT\" (this sender serves its test key there)",
                target.route
            )
        })
}

fn print_request(
    url: &str,
    target: &Target,
    fixture: &Fixture,
    event: &Event,
    fresh: bool,
    message: &idemgate_core::signature::Message,
    options: &Options,
) {
    say!("POST {url}");
    say!(
        "  {} {} -> route {} (signature {}), {} event {}",
        target.provider.name,
        fixture.name,
        target.route,
        target.scheme.name(),
        if fresh { "new" } else { "same" },
        event.seed
    );
    for (name, value) in &message.headers {
        say!("  {name}: {value}");
    }
    if options.show_body && !options.dry_run {
        say!("{}", String::from_utf8_lossy(&message.body));
    } else if !options.dry_run {
        say!("  ({} bytes of body; -v prints it)", message.body.len());
    }
}

fn print_reply(reply: &Reply, url: &str, vars: &str, options: &Options) {
    say!(
        "HTTP {} {} in {} ms",
        reply.status,
        reply.reason,
        reply.elapsed.as_millis()
    );
    for (name, value) in &reply.headers {
        let shown = name.starts_with("idemgate-")
            || name.starts_with("idempotent-")
            || ["content-type", "retry-after", "location"].contains(&name.as_str());
        if shown {
            say!("  {name}: {value}");
        }
    }
    let body = String::from_utf8_lossy(&reply.body);
    const LIMIT: usize = 2_000;
    if body.len() > LIMIT && !options.show_body {
        let cut = (0..=LIMIT)
            .rev()
            .find(|at| body.is_char_boundary(*at))
            .unwrap_or(0);
        say!(
            "{}\n... ({} bytes; -v prints all)",
            &body[..cut],
            body.len()
        );
    } else if !body.is_empty() {
        say!("{body}");
    }
    if let Some(hint) = hint(reply, url, vars, options.secret.is_some()) {
        say!("hint: {hint}");
    }
}

/// What an unexpected answer most likely means locally.
fn hint(reply: &Reply, url: &str, vars: &str, own_secret: bool) -> Option<String> {
    let body = String::from_utf8_lossy(&reply.body);
    let from_origin = matches!(
        reply.header("idemgate-decision"),
        Some("forwarded" | "replayed" | "waited" | "failed")
    );
    match reply.status {
        404 if body.contains("urn:idemgate:problem:no-route") => Some(format!(
            "no route of the running gateway covers {url}: does it run with the ROUTES of {vars}? (scripts/dev reads it when it starts)"
        )),
        401 if own_secret => Some(
            "signed with --secret: the gateway refuses what the route's own secret did not sign"
                .to_string(),
        ),
        401 if body.contains("urn:idemgate:problem:bad-signature") => Some(format!(
            "the running gateway does not take this signature: restart scripts/dev if {vars} changed since it started"
        )),
        500 if body.contains("urn:idemgate:problem:misconfigured") => Some(format!(
            "the running gateway refuses this route's configuration; {vars} is what scripts/dev reads"
        )),
        404 | 405 if from_origin => Some(
            "the origin has no handler for this path (the demo origin serves only /payments): give the route an `origin` of your own, or run yours as ORIGIN_URL"
                .to_string(),
        ),
        _ => None,
    }
}

/// `--list`: every provider, its fixtures, and the route it goes to.
fn list(options: &Options) {
    let vars = load_vars(options).ok();
    let dir = fixture::fixtures_dir();
    if let Some((vars, _)) = &vars {
        say!(
            "providers, their fixtures, and their routes in {}:",
            vars.source
        );
    } else {
        say!("providers and their fixtures (no variables file read):");
    }
    for provider in PROVIDERS {
        let route = match &vars {
            Some((vars, _)) => match route::resolve(vars, provider.name, None, None) {
                Ok(target) => format!("  [route {} ({})]", target.route, target.path),
                Err(error) if error.contains("--route") => "  [several routes: --route]".into(),
                Err(_) => "  [no route]".to_string(),
            },
            None => String::new(),
        };
        say!("\n{:<18} {}{route}", provider.name, provider.title);
        for name in fixture::list(&dir, provider.name) {
            let description = fixture::load(&dir, provider.name, &name, provider.default_fixture)
                .map(|fixture| fixture.description)
                .unwrap_or_else(|error| error);
            let default = if name == provider.default_fixture {
                "*"
            } else {
                " "
            };
            say!("  {default} {name:<34} {description}");
        }
    }
    // Routes no provider goes to by default: named on their own.
    if let Some(config) = vars.as_ref().and_then(|(vars, _)| vars.config().ok()) {
        let vars = &vars.as_ref().expect("read").0;
        let by_name: Vec<String> = config
            .routes
            .iter()
            .filter(|route| {
                !PROVIDERS.iter().any(|provider| {
                    route::resolve(vars, provider.name, None, None)
                        .is_ok_and(|target| target.route == route.name)
                })
            })
            .map(|route| {
                format!(
                    "{} ({}, {})",
                    route.name,
                    route.signature_scheme.name(),
                    route.path
                )
            })
            .collect();
        if !by_name.is_empty() {
            say!(
                "\nroutes sent to by their name (scripts/send ROUTE [FIXTURE]), or with curl when unsigned:\n  {}",
                by_name.join("\n  ")
            );
        }
    }
    say!(
        "\n(* the default fixture; fixtures are in {})",
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_takes_the_routes() {
        assert_eq!(
            target_url(None, "/hooks/stripe").unwrap(),
            "http://127.0.0.1:8787/hooks/stripe"
        );
        assert_eq!(
            target_url(Some("http://127.0.0.1:9000/"), "/hooks/stripe").unwrap(),
            "http://127.0.0.1:9000/hooks/stripe"
        );
        assert_eq!(
            target_url(Some("http://127.0.0.1:9000/elsewhere?x=1"), "/hooks/stripe").unwrap(),
            "http://127.0.0.1:9000/elsewhere?x=1"
        );
        assert!(target_url(Some("127.0.0.1:9000"), "/").is_err());
    }

    #[test]
    fn options_parse() {
        let args: Vec<String> = [
            "stripe",
            "refund",
            "--repeat=3",
            "--var",
            "A=b",
            "--same-event",
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        let options = parse(&args).unwrap();
        assert_eq!(options.wanted.as_deref(), Some("stripe"));
        assert_eq!(options.fixture.as_deref(), Some("refund"));
        assert_eq!(options.repeat, 3);
        assert_eq!(options.var, vec![("A".to_string(), "b".to_string())]);
        assert!(options.same_event);
        assert!(parse(&["--bogus".to_string()]).is_err());
        assert!(parse(&[]).is_err());
        assert!(parse(&["--list".to_string()]).is_ok());
        let thin = parse(&["stripe".to_string(), "--thin".to_string()]).unwrap();
        assert!(thin.thin && thin.fixture.is_none());
    }

    #[test]
    fn thin_sends_the_senders_thin_event_or_the_one_named() {
        let stripe = crate::provider::by_name("stripe").unwrap();
        assert_eq!(
            thin_fixture(None, stripe).unwrap(),
            "v1.billing.meter.error_report_triggered"
        );
        assert_eq!(
            thin_fixture(Some("v2.core.event_destination.ping"), stripe).unwrap(),
            "v2.core.event_destination.ping"
        );
        let github = crate::provider::by_name("github").unwrap();
        assert!(thin_fixture(None, github)
            .unwrap_err()
            .contains("sends no thin events"));
        let dir = fixture::fixtures_dir();
        for (name, thin) in [
            ("v1.billing.meter.error_report_triggered", true),
            ("v2.core.event_destination.ping", true),
            ("payment_intent.succeeded", false),
            ("charge.refunded", false),
        ] {
            let fixture = fixture::load(&dir, "stripe", name, name).unwrap();
            assert_eq!(fixture::is_thin(&fixture), thin, "{name}");
        }
    }
}
