//! Deterministic simulation of the receipt protocol.
//!
//! The real [`Engine`] (the code the Durable Object runs) is driven through
//! its [`Backend`](crate::engine::Backend) by a seeded scheduler that owns
//! the clock and the order of every event: concurrent deliveries of the same
//! and of different payloads for a few keys, origin answers of every kind
//! (and answers that come after the lease expired, or never), clock jumps
//! past leases and retention, Durable Object restarts that drop all memory
//! but keep storage, failing storage writes, and purges. After every step it
//! checks six invariants; a failure prints the seed, and
//! `SIM_SEED=<seed> cargo test --lib simulation` replays it exactly.
//!
//! About 40% of the schedules run the route as `DELIVERY=async` (SPEC §2b):
//! acknowledgements, alarm-driven attempts on a retry schedule, dead
//! letters, re-drives, and restarts in the middle of any of them (a
//! restart re-arms an alarm whose handler it cut short, as the runtime
//! retries it).
//!
//! 1. A key's forwards carry strictly increasing epochs, also across
//!    purges and expiries (an origin may fence on them forever).
//! 2. While a lease is live, at most one forward of the key is outstanding.
//! 3. Once a receipt is completed, a delivery of the same payload gets the
//!    stored response byte for byte, and the origin is not called.
//! 4. A different payload is never forwarded while a receipt exists.
//! 5. No delivery gets a 2xx before the origin accepted its payload.
//! 6. A failed or expired forward never leaves a key stuck: a delivery that
//!    finds one after its lease is forwarded (sync).
//! 7. An async acknowledgement (2xx) is given only once a receipt of its
//!    payload is durable.
//! 8. Every accepted async delivery ends `completed` or `dead` (none is
//!    forgotten): checked after each schedule, once the origin recovers
//!    and time runs on.
//!
//! `SIM_SEEDS=100000 cargo test --release --lib simulation::tests::seeds`
//! explores more schedules; `SIM_STEPS` sets the steps per schedule.

mod world;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::answer::Answer;
use crate::canonical::Fingerprint;
use crate::config::{AsyncDelivery, Delivery as DeliveryMode, InFlightPolicy};
use crate::engine::{Delivery, Engine, Policy};
use crate::headers::{DECISION, REPLAYED};
use crate::key::IdempotencyKey;
use crate::mutation::{self, Mutation};
use crate::origin::OutboundRequest;
use crate::receipt::{ForwardResult, HttpResponse, Identity, ReceiptState, RetryableStatuses};
use crate::signature::Secret;
use futures::FutureExt;
use world::{SimBackend, World};

/// SplitMix64: a tiny generator whose sequence for a seed never changes
/// with a dependency upgrade, so a printed seed replays forever.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn pick<T: Copy>(&mut self, options: &[T]) -> T {
        options[self.below(options.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

type TaskFuture = Pin<Box<dyn Future<Output = Option<Answer>>>>;

struct Task {
    id: usize,
    key: usize,
    future: TaskFuture,
    /// For an alarm task: when the alarm was due (a restart that cuts the
    /// handler short leaves it armed, as the runtime retries it).
    alarm_at: Option<u64>,
    /// `None` for an alarm.
    fingerprint: Option<Fingerprint>,
    polled: bool,
    era_at_start: u64,
    /// The stored response, when the receipt was completed at the start.
    stored_at_start: Option<HttpResponse>,
}

/// What a run found, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Explored {
    pub steps: u64,
    pub deliveries: u64,
    pub forwards: u64,
}

pub struct Simulation {
    seed: u64,
    rng: Rng,
    world: Rc<World>,
    engines: Vec<Rc<Engine<SimBackend>>>,
    tasks: Vec<Task>,
    next_task: usize,
    policy: Policy,
    retention_ms: u64,
    /// Whether this schedule's route delivers asynchronously.
    asynchronous: bool,
    explored: Explored,
    /// `SIM_TRACE=1` prints every step, for replaying one seed.
    trace: bool,
}

const KEYS: usize = 3;
const START: u64 = 1_700_000_000_000;

impl Simulation {
    pub fn new(seed: u64) -> Simulation {
        let mut rng = Rng(seed);
        let lease_ms = rng.pick(&[1_000, 3_000, 8_000]);
        let retention_ms = rng.pick(&[20_000, 60_000]);
        let asynchronous = rng.chance(40);
        let delivery = if asynchronous {
            let schedules: [&[u64]; 3] = [&[1_000, 2_000, 5_000], &[500, 500], &[3_000]];
            DeliveryMode::Async(AsyncDelivery {
                retry_schedule_ms: schedules[rng.below(3) as usize].to_vec(),
                ack_status: 202,
                ack_body: None,
                give_up_statuses: crate::receipt::StatusSet::default(),
                dead_retention_seconds: 86_400,
            })
        } else {
            DeliveryMode::Sync
        };
        let signed = rng.chance(50);
        let policy = Policy {
            delivery,
            in_flight: rng.pick(&[InFlightPolicy::Wait, InFlightPolicy::Conflict]),
            wait_ms: rng.pick(&[0, 2_000, 10_000]),
            max_waiters: rng.pick(&[0, 2, 256]),
            origin_timeout_ms: rng.pick(&[2_000, 5_000]),
            lease_ms,
            retention_ms,
            max_stored_response_bytes: 1 << 20,
            retryable: RetryableStatuses::default(),
            forward_secret_name: signed.then(|| "FORWARD_SECRET".into()),
            forward_secret: signed.then(|| Secret::new("simulated-forward-secret".into())),
            log_duplicates: false,
        };
        let world = Rc::new(World::new(KEYS, lease_ms, START));
        let engines = (0..KEYS)
            .map(|key| {
                Rc::new(Engine::new(SimBackend {
                    world: world.clone(),
                    key,
                }))
            })
            .collect();
        Simulation {
            seed,
            rng,
            world,
            engines,
            tasks: Vec::new(),
            next_task: 0,
            policy,
            retention_ms,
            asynchronous,
            explored: Explored::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    /// Runs `steps` steps, stopping at the first violation, then lets the
    /// schedule settle (invariant 8); returns the violations.
    pub fn run(&mut self, steps: u64) -> Vec<String> {
        for _ in 0..steps {
            self.step();
            self.explored.steps += 1;
            if !self.world.violations.borrow().is_empty() {
                break;
            }
        }
        if self.world.violations.borrow().is_empty() && self.asynchronous {
            self.settle();
        }
        self.explored.forwards = self.world.calls.borrow().len() as u64;
        self.world
            .violations
            .borrow()
            .iter()
            .map(|violation| format!("seed {}: {violation}", self.seed))
            .collect()
    }

    fn step(&mut self) {
        let roll = self.rng.below(100);
        if self.trace {
            let keys = self.world.keys.borrow();
            let stored: Vec<String> = keys
                .iter()
                .map(|key| match &key.stored {
                    Some(r) => format!("{}@{}", r.state_name(), r.epoch),
                    None => "-".into(),
                })
                .collect();
            println!(
                "t={} roll={roll} tasks={} stored={stored:?} open={:?}",
                self.world.now.get() - START,
                self.tasks.len(),
                self.world.open_calls()
            );
        }
        match roll {
            0..35 => self.deliver(),
            35..60 => self.answer_a_call(),
            60..85 => self.advance_clock(),
            85..90 => self.restart(),
            90..92 => self.purge(),
            92..94 if self.asynchronous => self.redrive(),
            92..94 => self.purge(),
            _ => self.world.failing_writes.set(1 + self.rng.below(2) as u32),
        }
        self.fire_due_alarms();
        self.run_until_quiet();
    }

    fn deliver(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        let payload = if self.rng.chance(85) {
            format!("payload-{key}")
        } else {
            format!("other-{}", self.rng.below(3))
        };
        let fingerprint = Fingerprint::of_bytes(payload.as_bytes());
        let delivery = Delivery {
            identity: Identity {
                route: "default".into(),
                object: format!("object-{key}"),
                scope: format!("scope-{key}"),
                key: format!("key-{key}"),
                ..Identity::default()
            },
            key: IdempotencyKey::parse(&format!("key-{key}"), "simulation").expect("a valid key"),
            fingerprint: fingerprint.clone(),
            request: OutboundRequest {
                method: "POST".into(),
                url: format!("http://origin/{key}"),
                headers: vec![],
                body: payload.into_bytes(),
            },
            path_and_query: format!("/{key}"),
            raw_body_sha256: String::new(),
            if_known: false,
        };
        let engine = self.engines[key].clone();
        let policy = self.policy.clone();
        self.spawn(
            key,
            Some(fingerprint),
            Box::pin(async move { Some(engine.deliver(delivery, &policy).await) }),
        );
        self.explored.deliveries += 1;
    }

    fn spawn(&mut self, key: usize, fingerprint: Option<Fingerprint>, future: TaskFuture) {
        self.tasks.push(Task {
            id: self.next_task,
            key,
            future,
            alarm_at: None,
            fingerprint,
            polled: false,
            era_at_start: 0,
            stored_at_start: None,
        });
        self.next_task += 1;
    }

    fn answer_a_call(&mut self) {
        let open = self.world.open_calls();
        if open.is_empty() {
            return;
        }
        let call = open[self.rng.below(open.len() as u64) as usize];
        let result = match self.rng.below(100) {
            0..45 => respond(201, format!("charged by call {call}")),
            45..55 => respond(400, "declined".into()),
            55..60 => respond(409, "conflict".into()),
            60..75 => respond(self.rng.pick(&[500, 502, 503]), "origin error".into()),
            75..85 => respond(429, "slow down".into()),
            _ => ForwardResult::Unreachable("connection refused".into()),
        };
        self.world.answer(call, result);
    }

    fn advance_clock(&mut self) {
        let by = match self.rng.below(100) {
            0..70 => 1 + self.rng.below(500),
            70..90 => self.policy.lease_ms + self.rng.below(self.policy.origin_timeout_ms),
            _ => self.retention_ms + self.policy.lease_ms,
        };
        self.world.now.set(self.world.now.get() + by);
    }

    /// The object is evicted or crashes: memory (waiters, cache, the
    /// requests it was serving) is gone; storage and alarms stay.
    fn restart(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        // A Durable Object takes at least a millisecond to come back: the
        // epoch rule relies on it (see `receipt::next_epoch`).
        self.world.now.set(self.world.now.get() + 1);
        let cut_short: Vec<u64> = self
            .tasks
            .iter()
            .filter(|task| task.key == key)
            .filter_map(|task| task.alarm_at)
            .collect();
        if let Some(at) = cut_short.into_iter().min() {
            let mut keys = self.world.keys.borrow_mut();
            let alarm = &mut keys[key].alarm;
            *alarm = Some(alarm.map_or(at, |armed| armed.min(at)));
        }
        self.tasks.retain(|task| task.key != key);
        self.engines[key] = Rc::new(Engine::new(SimBackend {
            world: self.world.clone(),
            key,
        }));
    }

    fn purge(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        let _ = self.engines[key]
            .purge(&format!("object-{key}"), false)
            .now_or_never();
    }

    /// The operator re-drives a key (refused unless it is dead or failed).
    fn redrive(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        let engine = self.engines[key].clone();
        self.spawn(
            key,
            None,
            Box::pin(async move {
                let _ = engine.redrive().await;
                None
            }),
        );
    }

    /// After the schedule: no more failures, the origin answers everything
    /// with success, and time runs on (alarm to alarm) until nothing is
    /// pending. Every accepted async delivery must then be settled.
    fn settle(&mut self) {
        self.world.failing_writes.set(0);
        for _ in 0..400 {
            for call in self.world.open_calls() {
                self.world
                    .answer(call, respond(201, format!("settled by call {call}")));
            }
            let next_alarm = self
                .world
                .keys
                .borrow()
                .iter()
                .filter_map(|key| key.alarm)
                .min();
            let now = self.world.now.get();
            self.world
                .now
                .set(next_alarm.map_or(now + 1_000, |at| at.max(now + 1)));
            self.fire_due_alarms();
            self.run_until_quiet();
            let pending = self.world.keys.borrow().iter().any(|key| {
                key.stored
                    .as_ref()
                    .is_some_and(|receipt| receipt.deletable_at().is_none())
            });
            if !pending && self.tasks.is_empty() {
                return;
            }
        }
        for (key, state) in self.world.keys.borrow().iter().enumerate() {
            if let Some(receipt) = state.stored.as_ref().filter(|r| r.deletable_at().is_none()) {
                self.world.violate(format!(
                    "I8 key {key}: an accepted delivery never settled ({}, alarm {:?})",
                    receipt.state_name(),
                    state.alarm.map(|at| at.saturating_sub(START))
                ));
            }
        }
    }

    fn fire_due_alarms(&mut self) {
        let now = self.world.now.get();
        for key in 0..KEYS {
            let due = {
                let mut keys = self.world.keys.borrow_mut();
                let alarm = &mut keys[key].alarm;
                match *alarm {
                    Some(at) if at <= now => alarm.take(),
                    _ => None,
                }
            };
            if let Some(at) = due {
                let engine = self.engines[key].clone();
                let world = self.world.clone();
                self.spawn(
                    key,
                    None,
                    Box::pin(async move {
                        // A failed alarm is run again by the runtime, with
                        // backoff, unless the handler armed another one.
                        if engine.on_alarm().await.is_err() {
                            let retry = world.now.get() + 2_000;
                            let mut keys = world.keys.borrow_mut();
                            keys[key].alarm.get_or_insert(retry);
                        }
                        None
                    }),
                );
                self.tasks.last_mut().expect("just spawned").alarm_at = Some(at);
            }
        }
    }

    /// Polls every task, in a seeded order, until a round changes nothing.
    fn run_until_quiet(&mut self) {
        let waker = Waker::noop();
        let mut context = Context::from_waker(waker);
        for round in 0..16 {
            let mut finished = Vec::new();
            let mut order: Vec<usize> = (0..self.tasks.len()).collect();
            for index in (1..order.len()).rev() {
                order.swap(index, self.rng.below(index as u64 + 1) as usize);
            }
            for index in order {
                if self.poll_task(index, &mut context) {
                    finished.push(index);
                }
            }
            let progressed = !finished.is_empty();
            finished.sort_unstable();
            for index in finished.into_iter().rev() {
                self.tasks.remove(index);
            }
            if !progressed && round > 0 {
                break;
            }
        }
    }

    /// Returns whether the task finished.
    fn poll_task(&mut self, index: usize, context: &mut Context<'_>) -> bool {
        let now = self.world.now.get();
        let expect_forward = if self.tasks[index].polled {
            false
        } else {
            self.observe_start(index, now)
        };
        let task = &mut self.tasks[index];
        self.world.polling.set(Some(task.id));
        let polled = task.future.as_mut().poll(context);
        self.world.polling.set(None);
        if expect_forward && !self.world.task_forwarded(task.id) {
            self.world.violate(format!(
                "I6 key {}: a delivery after the lease of a failed or expired forward was not forwarded",
                task.key
            ));
        }
        match polled {
            Poll::Pending => false,
            Poll::Ready(answer) => {
                if let Some(answer) = answer {
                    self.check_answer(index, &answer);
                }
                true
            }
        }
    }

    /// Notes what the task found when it started; returns whether it must
    /// forward (invariant 6).
    fn observe_start(&mut self, index: usize, now: u64) -> bool {
        let task = &mut self.tasks[index];
        task.polled = true;
        let keys = self.world.keys.borrow();
        let state = &keys[task.key];
        task.era_at_start = state.era;
        let (Some(fingerprint), Some(receipt)) = (&task.fingerprint, &state.stored) else {
            return false;
        };
        if receipt.is_expired(now) || &receipt.fingerprint != fingerprint {
            return false;
        }
        if let Some(stored) = receipt.stored_response() {
            task.stored_at_start = Some(stored.response.clone());
        }
        let stuck = match receipt.state {
            ReceiptState::Failed { .. } => true,
            ReceiptState::InFlight {
                lease_expires_at, ..
            } => now >= lease_expires_at,
            ReceiptState::Completed { .. }
            | ReceiptState::Queued { .. }
            | ReceiptState::Dead { .. } => false,
        };
        stuck && self.world.failing_writes.get() == 0 && !self.asynchronous
    }

    fn check_answer(&self, index: usize, answer: &Answer) {
        let task = &self.tasks[index];
        let now = self.world.now.get();
        let rendered = answer.render();
        let keys = self.world.keys.borrow();
        let state = &keys[task.key];
        let Some(fingerprint) = &task.fingerprint else {
            return;
        };
        if matches!(answer, Answer::Queued(_) | Answer::Duplicate(_)) {
            let durable = state
                .stored
                .as_ref()
                .is_some_and(|receipt| &receipt.fingerprint == fingerprint);
            if !durable && state.era == task.era_at_start {
                self.world.violate(format!(
                    "I7 key {}: an acknowledgement before its receipt was durable",
                    task.key
                ));
            }
        } else if (200..300).contains(&rendered.status) {
            let accepted = state
                .accepted
                .iter()
                .any(|(payload, at)| payload == fingerprint && *at <= now);
            if !accepted {
                self.world.violate(format!(
                    "I5 key {}: a {} before the origin accepted the payload",
                    task.key, rendered.status
                ));
            }
        }
        // An async duplicate gets the acknowledgement, not the replay.
        if let Some(stored) = task.stored_at_start.as_ref().filter(|_| !self.asynchronous) {
            let origin_headers: Vec<(String, String)> = rendered
                .headers
                .iter()
                .filter(|(name, _)| name != REPLAYED && name != DECISION)
                .cloned()
                .collect();
            let identical = rendered.status == stored.status
                && rendered.body == stored.body
                && origin_headers == stored.headers;
            if state.era == task.era_at_start && !identical {
                self.world.violate(format!(
                    "I3 key {}: a replay differs from the stored response",
                    task.key
                ));
            }
        }
    }
}

fn respond(status: u16, body: String) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: body.into_bytes(),
    })
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

/// Runs every seed (or `SIM_SEED` alone) and returns the violations and
/// what was explored.
pub fn explore(
    seeds: std::ops::Range<u64>,
    steps: u64,
    defect: Option<(Mutation, &str)>,
) -> (Vec<String>, Explored) {
    let wanted = defect.map(|(_, invariant)| format!("{invariant} "));
    let defect = defect.map(|(defect, _)| defect);
    mutation::activate(defect);
    let mut total = Explored::default();
    let mut violations = Vec::new();
    for seed in seeds {
        let mut simulation = Simulation::new(seed);
        let found = simulation.run(steps);
        total.steps += simulation.explored.steps;
        total.deliveries += simulation.explored.deliveries;
        total.forwards += simulation.explored.forwards;
        let caught = wanted
            .as_deref()
            .is_some_and(|wanted| found.iter().any(|violation| violation.contains(wanted)));
        violations.extend(found);
        if caught {
            break;
        }
    }
    mutation::activate(None);
    (violations, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps() -> u64 {
        env_number("SIM_STEPS").unwrap_or(200)
    }

    #[test]
    fn seeds() {
        let seeds = match env_number("SIM_SEED") {
            Some(seed) => seed..seed + 1,
            None => 0..env_number("SIM_SEEDS").unwrap_or(2_000),
        };
        let count = seeds.end - seeds.start;
        let (violations, explored) = crate::within(600, move || explore(seeds, steps(), None));
        println!(
            "simulation: {count} schedules, {} steps, {} deliveries, {} forwards",
            explored.steps, explored.deliveries, explored.forwards
        );
        assert!(violations.is_empty(), "{}", violations.join("\n"));
    }

    /// Each invariant's checker catches its deliberately broken logic.
    fn caught(defect: Mutation, invariant: &str) {
        let wanted = invariant.to_string();
        let (violations, explored) = crate::within(120, move || {
            explore(0..500, steps(), Some((defect, &wanted)))
        });
        assert!(
            violations
                .iter()
                .any(|v| v.contains(&format!("{invariant} "))),
            "{defect:?} was not caught in {} steps: {:?}",
            explored.steps,
            &violations[..violations.len().min(5)]
        );
        println!(
            "{defect:?}: {} after {} steps",
            violations.last().unwrap(),
            explored.steps
        );
    }

    #[test]
    fn catches_a_takeover_that_reuses_the_epoch() {
        caught(Mutation::ReuseEpochOnTakeover, "I1");
    }

    #[test]
    fn catches_a_forward_during_a_live_lease() {
        caught(Mutation::IgnoreLiveLease, "I2");
    }

    #[test]
    fn catches_a_completed_key_forwarded_again() {
        caught(Mutation::ForwardCompleted, "I3");
    }

    #[test]
    fn catches_a_different_payload_forwarded() {
        caught(Mutation::SkipFingerprintCheck, "I4");
    }

    #[test]
    fn catches_an_acknowledgement_before_the_origin_accepted() {
        caught(Mutation::AcknowledgeWhileWaiting, "I5");
    }

    #[test]
    fn catches_a_key_stuck_after_a_failure() {
        caught(Mutation::FailedStaysInFlight, "I6");
    }

    #[test]
    fn catches_a_replay_that_is_not_byte_identical() {
        caught(Mutation::CorruptReplayBody, "I3");
    }

    #[test]
    fn catches_an_acknowledgement_before_the_receipt_is_durable() {
        caught(Mutation::AcknowledgeBeforeDurable, "I7");
    }

    #[test]
    fn catches_a_delivery_queued_without_an_alarm() {
        caught(Mutation::QueueWithoutAlarm, "I8");
    }
}
