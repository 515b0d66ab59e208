//! The fetch handler: the Worker's [`Edge`] (the runtime's request, body,
//! WebCrypto, Durable Objects, the index's shards and the isolate's replays) under the
//! core's [`idemgate_core::gateway`], which runs SPEC §1's steps in order,
//! and the rendering of what they came to.

use std::rc::Rc;

use worker::{web_sys, Env};

use idemgate_core::answer::render_problem;
use idemgate_core::config::Config;
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::gateway::{Edge, Handled};
use idemgate_core::headers::{self, HeaderList, RECEIPT_ID};
use idemgate_core::object_call::{ObjectCall, Reply};
use idemgate_core::pipeline::{path_and_query, BodyFraming, PublicKeyChecked};
use idemgate_core::problem::Problem;
use idemgate_core::receipt::HttpResponse;
use idemgate_core::replay_cache::ReplayCache;
use idemgate_core::signature::PublicKeyCheck;

use crate::admin;
use crate::edge_http;
use crate::env::config_from_env;
use crate::events;
use crate::isolate::with_replays;
use crate::object_client;
use crate::stats;

/// One request, at the edge.
struct WorkerEdge {
    request: web_sys::Request,
    env: Env,
    method: String,
}

impl Edge for WorkerEdge {
    type Response = web_sys::Response;
    type Error = worker::Error;

    fn now_ms(&self) -> u64 {
        worker::Date::now().as_millis()
    }

    fn config(&self) -> Result<Rc<Config>, Problem> {
        config_from_env(&self.env)
    }

    fn headers(&self) -> HeaderList {
        edge_http::header_list(&self.request.headers())
    }

    async fn operator(
        &self,
        normalized_path: &str,
        query: Option<&str>,
    ) -> worker::Result<web_sys::Response> {
        admin::handle(
            &self.request,
            &self.method,
            normalized_path,
            query,
            &self.env,
        )
        .await
    }

    async fn passthrough(
        &self,
        url: &str,
        headers: &HeaderList,
        via: Option<&str>,
    ) -> Result<web_sys::Response, Problem> {
        let fetcher = match via {
            None => None,
            Some(name) => Some(
                edge_http::fetcher(&self.env, name)
                    .map_err(|message| Problem::OriginUnreachable { message })?,
            ),
        };
        edge_http::proxy_to(&self.request, url, headers, fetcher.as_ref())
            .await
            .map_err(|message| Problem::OriginUnreachable { message })
    }

    /// Whole when its declared length binds (one call instead of a JS
    /// round trip per chunk), else chunk by chunk, stopping at the first
    /// byte over `limit`, so a chunked upload is never buffered whole.
    async fn read_body(&self, framing: BodyFraming, limit: u64) -> worker::Result<Option<Vec<u8>>> {
        match framing {
            BodyFraming::Declared => edge_http::whole_body(&self.request).await.map(Some),
            BodyFraming::Streamed => edge_http::bounded_body(&self.request, limit).await,
        }
    }

    async fn check_public_keys(&self, checks: &[PublicKeyCheck]) -> PublicKeyChecked {
        crate::public_key::check_all(checks).await
    }

    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T {
        with_replays(f)
    }

    fn has_index(&self) -> bool {
        crate::receipt_index::has_shards(&self.env)
    }

    async fn upgrade_since(&self) -> Option<u64> {
        // Every deployment of the second version kept its index in D1: one
        // without it (a new deployment, or one whose D1 rows have moved
        // out, long after) holds no receipt under a second-version key.
        if crate::receipt_index::legacy_database(&self.env).is_none() {
            return Some(0);
        }
        crate::receipt_index::upgrade_since(&self.env).await
    }

    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
        object_client::call(&self.env, call, body).await
    }

    fn count_delivery(&self) {
        stats::record(|stats| stats.deliveries += 1);
    }

    #[cfg(feature = "test-hooks")]
    fn addresses_as_second_version(&self) -> bool {
        crate::test_hooks::second_version_keys(&self.env)
    }
}

pub async fn handle(request: web_sys::Request, env: Env) -> worker::Result<web_sys::Response> {
    let url = request.url();
    let started = worker::Date::now().as_millis();
    let edge = WorkerEdge {
        method: request.method().to_ascii_uppercase(),
        request,
        env,
    };
    let handled = idemgate_core::gateway::handle(&edge, &edge.method, &url).await?;
    let env = &edge.env;
    match handled {
        Handled::Response(response) => Ok(response),
        Handled::Rejected { route, problem } => {
            let (path, _) = path_and_query(&url);
            reject(env, route.as_deref(), path, problem, started)
        }
        Handled::EdgeReplay {
            route,
            log_duplicates,
            object,
            replay,
            fast,
        } => {
            if fast {
                stats::record(|stats| stats.fast_cache_hits += 1);
            }
            edge_replay(env, &route, log_duplicates, &object, replay, started)
        }
        Handled::Answered(reply) => edge_http::response(&reply.response),
        Handled::Batch {
            route,
            log_duplicates,
            batch,
            response,
            edge_replays,
            problems,
        } => {
            for (object, replay) in edge_replays {
                let mut replayed = EdgeReplayed::new(&route, log_duplicates, &object, replay);
                replayed.batch = Some(batch.clone());
                replayed.count(env, started);
            }
            let (path, _) = path_and_query(&url);
            for problem in problems {
                log_rejection(env, Some(&route), path, &problem, started, Some(&batch));
            }
            edge_http::response(&response)
        }
    }
}

/// A rejection made before the Durable Object (bad input, a bad signature,
/// misconfiguration) or a failed passthrough: one event, and the problem.
fn reject(
    env: &Env,
    route: Option<&str>,
    path: &str,
    problem: Problem,
    started: u64,
) -> worker::Result<web_sys::Response> {
    log_rejection(env, route, path, &problem, started, None);
    edge_http::response(&render_problem(&problem))
}

/// The log line of a rejection, of a request or of one event of `batch`.
fn log_rejection(
    env: &Env,
    route: Option<&str>,
    path: &str,
    problem: &Problem,
    started: u64,
    batch: Option<&str>,
) {
    let mut event = DecisionLog::new(
        "rejected",
        worker::Date::now().as_millis().saturating_sub(started),
    );
    event.route = route.map(str::to_string);
    event.path = Some(path.to_string());
    event.status = Some(problem.status());
    event.reason = Some(problem.name());
    event.batch = batch.map(str::to_string);
    events::emit(env, &event, true);
}

/// A replay this isolate answered alone: counted for the key's object
/// and the route, logged only with `LOG_DUPLICATES`.
fn edge_replay(
    env: &Env,
    route: &str,
    log_duplicates: bool,
    object_name: &str,
    replay: HttpResponse,
    started: u64,
) -> worker::Result<web_sys::Response> {
    let replayed = EdgeReplayed::new(route, log_duplicates, object_name, replay);
    replayed.count(env, started);
    edge_http::response(&replayed.replay)
}

/// A replay this isolate answered alone, a batch's event's among them.
struct EdgeReplayed<'a> {
    route: &'a str,
    log_duplicates: bool,
    object_name: &'a str,
    replay: HttpResponse,
    batch: Option<String>,
}

impl<'a> EdgeReplayed<'a> {
    fn new(
        route: &'a str,
        log_duplicates: bool,
        object_name: &'a str,
        replay: HttpResponse,
    ) -> Self {
        EdgeReplayed {
            route,
            log_duplicates,
            object_name,
            replay,
            batch: None,
        }
    }

    fn count(&self, env: &Env, started: u64) {
        let now = worker::Date::now().as_millis();
        let duration_ms = now.saturating_sub(started);
        stats::record(|stats| stats.cache_hits += 1);
        object_client::count_absorbed(self.object_name);
        if !self.log_duplicates {
            events::absorbed_at_edge(env, self.route, "replayed", now, duration_ms);
            return;
        }
        let mut event = DecisionLog::new("replayed", duration_ms);
        event.route = Some(self.route.to_string());
        event.receipt_id = headers::get(&self.replay.headers, RECEIPT_ID).map(str::to_string);
        event.status = Some(self.replay.status);
        event.origin_status = Some(self.replay.status);
        event.edge = true;
        event.absorbed = true;
        event.batch = self.batch.clone();
        events::emit(env, &event, true);
    }
}
