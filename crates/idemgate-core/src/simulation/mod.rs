//! Deterministic simulation of the receipt protocol.
//!
//! The real [`Engine`] (the code the Durable Object runs) is driven through
//! its [`Backend`](crate::engine::Backend) by a seeded scheduler that owns
//! the clock and the order of every event: concurrent deliveries of the same
//! and of different payloads for a few keys, origin answers of every kind
//! (and answers that come after the lease expired, or never), clock jumps
//! past leases, retention and dead letters' expiry, Durable Object restarts
//! that drop all memory but keep storage, failing storage writes, and
//! purges (forced or not). After every step it checks the invariants
//! below; a failure prints the seed, and `SIM_SEED=<seed> cargo test --lib
//! simulation` replays it exactly (`SIM_TRACE=1` prints each step).
//!
//! About 40% of the schedules run the route as `DELIVERY=async` (SPEC §2b):
//! acknowledgements, alarm-driven attempts on a retry schedule, dead
//! letters, re-drives, and restarts in the middle of any of them (a
//! restart re-arms an alarm whose handler it cut short, as the runtime
//! retries it).
//!
//! Each schedule also draws its faults (see [`world`]):
//!
//! - alarms: reliable; refused (`set_alarm` fails) for stretches of up to
//!   minutes, past the runtime's six retries of a failing handler; accepted
//!   and never fired, at random or for stretches; or dropped for good from
//!   some step on, through the end of the schedule; but never the alarm of
//!   a receipt whose index row has not landed, which is all that finds it
//!   again (SPEC §2b, v5: the platform runs every alarm at least once);
//! - the receipt index, in two shards (one table holds both shards' rows,
//!   modelled with `index::sql`'s version rule; a key's row is in the
//!   shard it hashes to): writes that fail, land late and out of order
//!   with later ones (a slow shard), land while their reply is lost, or
//!   are lost; outages of one shard or both, of seconds to a minute;
//! - crashes between any two writes an object makes (writes of one turn
//!   commit together), among them between a receipt's write and its index
//!   write;
//! - each shard's sweep ([`crate::sweep`], its alarm): at a seeded cadence
//!   (a minute, or 15 s), unless the shard's run is missed or the shard is
//!   down, every row of the shard whose `next_wake_at` is at or before
//!   `now - GRACE_MS` and is not a tombstone has its object woken
//!   ([`Engine::wake`]), concurrently with everything else, unless the
//!   shard restarts mid-run and wakes only the first few; old tombstones
//!   are forgotten.
//!
//! After the schedule the run quiesces, in two phases. It settles: faults
//! end (alarms dropped for good stay dropped), the origin answers every
//! call with a 2xx, every sender retries what got no final answer (a 2xx,
//! or a 4xx other than a conflict), the operator a re-drive that got none,
//! every index write in flight lands or is given up, and time runs on
//! (sweeps included) for five minutes and until nothing is pending. Then
//! it runs on until nothing is scheduled: every alarm that will fire has,
//! and every row's wake is past and swept.
//!
//! 1. A key's forwards carry strictly increasing epochs, also across
//!    purges and expiries (an origin may fence on them forever).
//! 2. While a lease is live, at most one forward of the key is outstanding.
//! 3. Once a receipt is completed, a delivery of the same payload gets the
//!    stored response byte for byte, and the origin is not called.
//! 4. A different payload is never forwarded while a receipt exists.
//! 5. No delivery gets a 2xx before the origin accepted its payload (in
//!    the key's life the delivery started in, or a later one).
//! 6. A failed or expired forward never leaves a key stuck: a delivery that
//!    finds one after its lease is forwarded (sync).
//! 7. An async acknowledgement (2xx) is given only once a receipt of its
//!    payload is durable.
//! 8. Every accepted async delivery ends `completed` or `dead` (none is
//!    forgotten): checked once the run settled; and only the operator's
//!    forced purge deletes a pending one.
//! 9. Every acknowledged async delivery ends `completed` or `dead`, even
//!    when alarms are dropped for good (the sweep delivers it), unless the
//!    operator purged it with force: checked once the run settled. And
//!    while it is pending or dead the index lists it: from its
//!    acknowledgement on, at every step, its object's row is no tombstone
//!    and names its receipt; once the run settled (the index with it), the
//!    row's state is the receipt's.
//! 10. No index row outlives its receipt's state: once nothing is
//!     scheduled, every object's row is what its receipt needs
//!     (`index::update_for` has nothing to write: the state of
//!     `index::wanted_state`, and the receipt's next wake), and a
//!     tombstone or nothing where there is no receipt. A row may lag until
//!     its own wake, which the sweep then puts right; the one exception is
//!     a sync receipt whose `failed` row was never written and that nothing
//!     will touch again (its sender is done, its alarm lost): no row means
//!     nothing for the sweep to find. Such receipts are counted, not
//!     failed.
//! 11. A third of the schedules set `max_in_flight` (1 or 2) on the
//!     route, with a coordinator whose answers may come back far past the
//!     lease they grant and whose wakes may be late or lost: the forwards
//!     at the origin at once (sent, not answered, not timed out) never
//!     outnumber the limit. (Invariant 6 is then the coordinator's: a
//!     delivery over the limit is refused 429, as SPEC §2 says.)
//! 12. (v4) A third of the async schedules order their deliveries (SPEC
//!     §12): every key's events are of one entity, each payload with a
//!     time of its own, held 0 or 2 s, stale ones forwarded marked or
//!     superseded. The entity's book may be unreachable, its replies late
//!     (past the turn's lease) or lost after it decided, its wakes late or
//!     lost, and the answers to them lost. Never two forwards of the
//!     entity at the origin at once (sent, not answered, not timed out).
//! 13. (v4) In those schedules, no event is forwarded without
//!     `Idempotency-Stale: true` when it is older than one a key's object
//!     recorded as accepted by the origin. (Invariants 8 and 9 count
//!     `superseded` as an end, as `dead` is.)
//!
//! `SIM_SEEDS=100000 cargo test --release --lib simulation::tests::seeds`
//! explores more schedules; `SIM_STEPS` sets the steps per schedule.

mod world;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::answer::Answer;
use crate::canonical::Fingerprint;
use crate::config::{AsyncDelivery, Delivery as DeliveryMode, InFlightPolicy};
use crate::delivery::{Delivery, DeliveryRequest};
use crate::engine::{Engine, Policy};
use crate::headers::{DECISION, REPLAYED};
use crate::index::shard::shard_of;
use crate::index::{update_for, Indexed};
use crate::key::IdempotencyKey;
use crate::mutation::{self, Mutation};
use crate::order::OrderTicket;
use crate::receipt::{ForwardResult, HttpResponse, Identity, ReceiptState, RetryableStatuses};
use crate::signature::Secret;
use crate::sweep::{Sweep, DEFAULT_LIMIT, GRACE_MS};
use world::{Alarm, IndexFaults, SimBackend, World, SIM_SHARDS};

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

/// What a task is, as the runtime started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Delivery,
    /// An alarm's handler, for the alarm due then (a restart that cuts it
    /// short leaves it armed, as the runtime retries it).
    Alarm {
        at: u64,
    },
    /// The sweep's wake.
    Wake,
    /// The first attempt of an async delivery its object just accepted in
    /// flight, run after the answer as the Worker's object runs it.
    FirstAttempt,
    Purge {
        force: bool,
    },
    Redrive,
    /// The flow coordinator's wake of a key waiting for its permit.
    PermitWake,
}

struct Task {
    id: usize,
    key: usize,
    kind: Kind,
    future: TaskFuture,
    /// A delivery's payload.
    payload: Option<String>,
    fingerprint: Option<Fingerprint>,
    polled: bool,
    /// Finished, or its instance crashed.
    over: bool,
    era_at_start: u64,
    /// The stored response, when the receipt was completed at the start.
    stored_at_start: Option<HttpResponse>,
}

/// How the runtime treats the schedule's alarms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AlarmFaults {
    Reliable,
    /// `set_alarm` fails for stretches.
    Refused,
    /// Accepted alarms are dropped at random and for stretches.
    Dropped,
    /// From this step on, every alarm is dropped, for good.
    DroppedForGood {
        from_step: u64,
    },
}

/// The faults a schedule draws.
#[derive(Debug, Clone, Copy)]
struct Profile {
    alarms: AlarmFaults,
    index: bool,
    sweep_every_ms: u64,
    /// Sweep runs missed, in percent.
    sweep_missed: u64,
}

/// What a run found, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Explored {
    pub steps: u64,
    pub deliveries: u64,
    pub forwards: u64,
    pub acknowledged: u64,
    /// Acknowledged deliveries whose first attempt the accepting call sent.
    pub first_attempts: u64,
    pub wakes: u64,
    /// Shard sweeps cut short by a restart.
    pub shard_restarts: u64,
    pub crashes: u64,
    pub alarms_refused: u64,
    pub alarms_dropped: u64,
    pub index_failed: u64,
    pub index_late: u64,
    pub index_lost: u64,
    pub orphans: u64,
    /// Schedules whose route set `max_in_flight` (invariant 11).
    pub limited: u64,
}

impl Explored {
    fn add(&mut self, other: &Explored) {
        self.steps += other.steps;
        self.deliveries += other.deliveries;
        self.forwards += other.forwards;
        self.acknowledged += other.acknowledged;
        self.first_attempts += other.first_attempts;
        self.wakes += other.wakes;
        self.crashes += other.crashes;
        self.alarms_refused += other.alarms_refused;
        self.alarms_dropped += other.alarms_dropped;
        self.index_failed += other.index_failed;
        self.index_late += other.index_late;
        self.index_lost += other.index_lost;
        self.orphans += other.orphans;
        self.limited += other.limited;
    }
}

pub struct Simulation {
    seed: u64,
    rng: Rng,
    world: Rc<World>,
    engines: Vec<Rc<Engine<SimBackend>>>,
    tasks: Vec<Task>,
    next_task: usize,
    policy: Policy,
    /// An ordered schedule's hold and whether it skips stale events.
    order_terms: Option<(u64, bool)>,
    retention_ms: u64,
    /// Whether this schedule's route delivers asynchronously.
    asynchronous: bool,
    profile: Profile,
    next_sweep_at: u64,
    /// Per key, the payloads whose sender has no final answer yet.
    unacknowledged: Vec<Vec<String>>,
    /// Sync receipts found unlisted and untouchable (invariant 10's
    /// known limit).
    orphans: std::cell::Cell<u64>,
    /// Per key, whether the operator's last re-drive went unanswered.
    redrives_owed: Rc<RefCell<Vec<bool>>>,
    /// First attempts the accepting calls sent, counted as they run.
    first_attempts_sent: Rc<std::cell::Cell<u64>>,
    explored: Explored,
    /// Whether the run goes on after a violation.
    go_on: bool,
    /// `SIM_TRACE=1` prints every step, for replaying one seed.
    trace: bool,
}

const KEYS: usize = 3;
const START: u64 = 1_700_000_000_000;
const DAY_MS: u64 = 86_400_000;
/// How many times the runtime re-runs an alarm handler that fails, with
/// a backoff doubling from two seconds, before it gives the alarm up.
const ALARM_RETRIES: u32 = 6;
/// How long time runs on once the schedule is over, at the least.
const QUIESCE_MS: u64 = 300_000;

fn object(key: usize) -> String {
    format!("object-{key}")
}

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
                // A day: the expiry is announced at once; two: a day later.
                dead_retention_seconds: rng.pick(&[86_400, 172_800]),
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
            flow: None,
            forward_secret_name: signed.then(|| "FORWARD_SECRET".into()),
            forward_secret: signed.then(|| Secret::new("simulated-forward-secret".into())),
            log_duplicates: false,
            ordered: false,
            masked_headers: Vec::new(),
        };
        let alarms = match rng.below(100) {
            0..45 => AlarmFaults::Reliable,
            45..65 => AlarmFaults::Refused,
            65..80 => AlarmFaults::Dropped,
            _ => AlarmFaults::DroppedForGood {
                from_step: rng.pick(&[0, 30, 120]),
            },
        };
        let profile = Profile {
            alarms,
            index: rng.chance(60),
            sweep_every_ms: rng.pick(&[15_000, 60_000]),
            sweep_missed: 10,
        };
        let world = Rc::new(World::new(KEYS, lease_ms, START, rng.next()));
        let faults = &world.faults;
        if alarms == AlarmFaults::Dropped {
            faults.alarm_drop_percent.set(rng.pick(&[10, 30]));
        }
        if profile.index {
            faults.index.set(IndexFaults {
                fail: rng.pick(&[0, 5, 15]),
                lost: rng.pick(&[0, 3, 10]),
                late: rng.pick(&[10, 30]),
                reply_lost: rng.pick(&[0, 5]),
            });
            faults.index_delay_ms.set(rng.pick(&[500, 5_000, 20_000]));
        }
        faults.crash_percent.set(rng.pick(&[0, 0, 1, 3]));
        // A third of the schedules limit the route's forwards (SPEC §2):
        // the coordinator's answers may come back long after the lease
        // they grant, its wakes late or never (see `world`).
        // Such a route's lease exceeds its timeout by SPEC §8's margin, as
        // the configuration requires (a grant's forward is bounded by it).
        let mut policy = policy;
        if rng.chance(35) && lease_ms >= 3_000 {
            // 1,000 ms is the margin at these timeouts (2 and 5 s).
            policy.origin_timeout_ms = policy.origin_timeout_ms.min(lease_ms - 1_000);
            policy.flow = Some(crate::flow::FlowLimits {
                max_in_flight: Some(rng.pick(&[1, 2])),
                rate_thousandths: None,
                shards: 1,
            });
            *world.route_policy.borrow_mut() = Some(policy.clone());
        }
        // A third of the async schedules order their deliveries (SPEC
        // §12): every key's events are of one entity. Drawn apart, so the
        // other schedules stay as they were.
        let mut order_rng = Rng(seed ^ 0x0bde_5eed);
        // As under flow control, the lease exceeds the timeout by SPEC
        // §8's margin (a turn's forward is bounded by its lease).
        let order_terms = (asynchronous && lease_ms >= 3_000 && order_rng.chance(35))
            .then(|| (order_rng.pick(&[0, 2_000]), order_rng.chance(50)));
        if order_terms.is_some() {
            world.ordered.set(true);
            policy.ordered = true;
            policy.origin_timeout_ms = policy.origin_timeout_ms.min(lease_ms - 1_000);
        }
        let engines = (0..KEYS)
            .map(|key| {
                Rc::new(Engine::new(SimBackend {
                    world: world.clone(),
                    key,
                    incarnation: 0,
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
            order_terms,
            retention_ms,
            asynchronous,
            profile,
            next_sweep_at: START + profile.sweep_every_ms,
            unacknowledged: vec![Vec::new(); KEYS],
            redrives_owed: Rc::new(RefCell::new(vec![false; KEYS])),
            orphans: std::cell::Cell::new(0),
            first_attempts_sent: Rc::default(),
            explored: Explored::default(),
            go_on: false,
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    /// Runs `steps` steps, stopping at the first violation unless told to
    /// go on (a mutation may break several invariants: each checker gets
    /// its chance), then lets the run quiesce and checks what must hold
    /// then (invariants 8 to 10); returns the violations.
    pub fn run(&mut self, steps: u64, go_on: bool) -> Vec<String> {
        self.go_on = go_on;
        for step in 0..steps {
            if let AlarmFaults::DroppedForGood { from_step } = self.profile.alarms {
                if step == from_step {
                    self.world.faults.alarms_dropped_until.set(u64::MAX);
                }
            }
            self.step();
            self.explored.steps += 1;
            if self.stopped() {
                break;
            }
        }
        if !self.stopped() {
            self.quiesce();
        }
        self.explored.forwards = self.world.calls.borrow().len() as u64;
        let counts = self.world.counts.get();
        self.explored.crashes = counts.crashes;
        self.explored.alarms_refused = counts.alarms_refused;
        self.explored.alarms_dropped = counts.alarms_dropped;
        self.explored.index_failed = counts.index_failed;
        self.explored.index_late = counts.index_late;
        self.explored.index_lost = counts.index_lost;
        self.explored.orphans = self.orphans.get();
        self.explored.limited = u64::from(self.policy.flow.is_some());
        self.world
            .violations
            .borrow()
            .iter()
            .map(|violation| format!("seed {}: {violation}", self.seed))
            .collect()
    }

    fn stopped(&self) -> bool {
        !self.go_on && !self.world.violations.borrow().is_empty()
    }

    fn trace_state(&self, what: &str) {
        let keys = self.world.keys.borrow();
        let d1 = self.world.d1.borrow();
        let stored: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(key, state)| {
                let receipt = match &state.stored {
                    Some(r) => format!("{} {}@{}", r.identity.receipt_id, r.state_name(), r.epoch),
                    None => "-".into(),
                };
                let alarm = match state.alarm {
                    Some(Alarm { at, dropped }) => format!(
                        "{}{}",
                        at.saturating_sub(START),
                        if dropped { " dropped" } else { "" }
                    ),
                    None => "-".into(),
                };
                let row = match d1.rows.get(&object(key)) {
                    Some(row) => format!(
                        "{} {} v{} wake {:?}",
                        row.receipt_id,
                        row.state,
                        row.version,
                        row.next_wake_at.map(|at| at.saturating_sub(START))
                    ),
                    None => "-".into(),
                };
                format!("[{receipt} | alarm {alarm} | row {row}]")
            })
            .collect();
        println!(
            "t={} {what} tasks={} open={:?} index in flight={} {}",
            self.world.now.get() - START,
            self.tasks.len(),
            self.world.open_calls(),
            self.world.index_writes.borrow().len(),
            stored.join(" ")
        );
    }

    fn step(&mut self) {
        let roll = self.rng.below(100);
        if self.trace {
            self.trace_state(&format!("roll={roll}"));
        }
        match roll {
            0..33 => self.deliver(),
            33..56 => self.answer_a_call(),
            56..80 => self.advance_clock(),
            80..84 => self.restart(),
            84..86 => self.purge(),
            86..88 if self.asynchronous => self.redrive(),
            86..88 => self.purge(),
            88..92 => self
                .world
                .faults
                .failing_writes
                .set(1 + self.rng.below(2) as u32),
            92..96 => self.alarm_fault(),
            _ if self.profile.index => {
                let until = self.world.now.get() + self.rng.pick(&[1_000, 10_000, 60_000]);
                // One shard down, or the whole index.
                let down = self.rng.below(3) as usize;
                let mut fails_until = self.world.faults.shard_fails_until.borrow_mut();
                for (shard, fails) in fails_until.iter_mut().enumerate() {
                    if down == 2 || down == shard {
                        *fails = until;
                    }
                }
            }
            _ => self.deliver(),
        }
        self.run_events();
    }

    /// What happens at the time now: index writes land, the sweep runs if
    /// it is due, alarms fire, and every task runs until it waits.
    fn run_events(&mut self) {
        self.world.land_index_writes();
        self.world.flow_alarm();
        self.world.order_alarm();
        for key in self.world.arrived_order_wakes() {
            let engine = self.engines[key].clone();
            let world = self.world.clone();
            self.spawn(
                key,
                Kind::PermitWake,
                Box::pin(async move {
                    // Its answer reaches the book, unless the call is lost.
                    if let Ok(status) = engine.order_ready().await {
                        if !world.faults.chance(5) {
                            world.order_apply(|book, now| book.heard(&object(key), status, now));
                        }
                    }
                    None
                }),
            );
        }
        for key in self.world.arrived_wakes() {
            let engine = self.engines[key].clone();
            self.spawn(
                key,
                Kind::PermitWake,
                Box::pin(async move {
                    let _ = engine.permit_ready().await;
                    None
                }),
            );
        }
        if self.world.now.get() >= self.next_sweep_at {
            self.sweep();
        }
        self.fire_due_alarms();
        self.run_until_quiet();
        self.check_acknowledged_rows();
    }

    fn alarm_fault(&mut self) {
        let now = self.world.now.get();
        let faults = &self.world.faults;
        match self.profile.alarms {
            AlarmFaults::Refused => {
                // Past the runtime's retries (2 + 4 + ... + 64 s) at most.
                let until = now + self.rng.pick(&[2_000, 20_000, 150_000]);
                faults.alarms_fail_until.set(until);
            }
            AlarmFaults::Dropped => {
                let until = now + self.rng.pick(&[5_000, 60_000]);
                faults
                    .alarms_dropped_until
                    .set(faults.alarms_dropped_until.get().max(until));
            }
            AlarmFaults::Reliable | AlarmFaults::DroppedForGood { .. } => self.deliver(),
        }
    }

    fn deliver(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        let payload = if self.rng.chance(85) {
            format!("payload-{key}")
        } else {
            format!("other-{}", self.rng.below(3))
        };
        self.deliver_payload(key, payload);
    }

    /// An ordered schedule's ticket for a payload: one entity, and a time
    /// of the payload's own (so its duplicates carry the same).
    fn ticket(&self, fingerprint: &Fingerprint, payload: &str) -> Option<OrderTicket> {
        let (hold_ms, skip_stale) = self.order_terms?;
        let time_ms = payload.bytes().map(u64::from).sum::<u64>() % 6 * 10;
        if self.world.order_time_of(fingerprint).is_none() {
            self.world
                .order_times
                .borrow_mut()
                .push((fingerprint.clone(), time_ms));
        }
        Some(OrderTicket {
            object: "entity".into(),
            time_ms,
            hold_ms,
            skip_stale,
        })
    }

    fn deliver_payload(&mut self, key: usize, payload: String) {
        let fingerprint = Fingerprint::of_bytes(payload.as_bytes());
        let delivery = Delivery {
            identity: Identity {
                receipt_id: String::new(),
                route: "default".into(),
                object: object(key),
                scope: format!("scope-{key}"),
                key: IdempotencyKey::parse(&format!("key-{key}"), "simulation")
                    .expect("a valid key"),
                path: None,
                tenant_sha256: None,
            },
            fingerprint: fingerprint.clone(),
            request: DeliveryRequest {
                method: "POST".into(),
                url: format!("http://origin/{key}"),
                path_and_query: format!("/{key}"),
                headers: vec![],
                raw_body_sha256: String::new(),
                body: payload.clone().into_bytes(),
                source: None,
                stale: false,
                batch: None,
                order: self.ticket(&fingerprint, &payload),
                via: None,
            },
            if_known: false,
            if_absent: false,
        };
        if !self.unacknowledged[key].contains(&payload) {
            self.unacknowledged[key].push(payload.clone());
        }
        let engine = self.engines[key].clone();
        let policy = self.policy.clone();
        let task = self.spawn(
            key,
            Kind::Delivery,
            Box::pin(async move { Some(engine.deliver(delivery, &policy).await) }),
        );
        task.fingerprint = Some(fingerprint);
        task.payload = Some(payload);
        self.explored.deliveries += 1;
    }

    fn spawn(&mut self, key: usize, kind: Kind, future: TaskFuture) -> &mut Task {
        self.world
            .note(|| format!("key {key}: task {} {kind:?}", self.next_task));
        self.tasks.push(Task {
            id: self.next_task,
            key,
            kind,
            future,
            payload: None,
            fingerprint: None,
            polled: false,
            over: false,
            era_at_start: 0,
            stored_at_start: None,
        });
        self.next_task += 1;
        self.tasks.last_mut().expect("just pushed")
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
        self.world
            .note(|| format!("origin answers call {call}: {result:?}"));
        self.world.answer(call, result);
    }

    fn advance_clock(&mut self) {
        let by = match self.rng.below(100) {
            0..68 => 1 + self.rng.below(500),
            68..88 => self.policy.lease_ms + self.rng.below(self.policy.origin_timeout_ms),
            88..97 => self.retention_ms + self.policy.lease_ms,
            // Past a dead letter's warning, or its expiry, and every
            // tombstone's time to live.
            _ => self.rng.pick(&[DAY_MS, 2 * DAY_MS]),
        };
        self.world.now.set(self.world.now.get() + by);
    }

    /// The object is evicted or crashes between two events: memory
    /// (waiters, cache, the requests it was serving) is gone; storage and
    /// alarms stay.
    fn restart(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        self.world.crash(key);
        self.restart_crashed();
        self.tasks.retain(|task| !task.over);
    }

    /// Replaces every instance that crashed: their tasks end unanswered,
    /// and an alarm handler cut short is run again by the runtime.
    fn restart_crashed(&mut self) {
        let crashed: Vec<usize> = std::mem::take(&mut *self.world.crashed.borrow_mut());
        for key in crashed {
            // A Durable Object takes at least a millisecond to come back:
            // the epoch and index version rules rely on it (see
            // `receipt::next_epoch`).
            self.world.now.set(self.world.now.get() + 1);
            let cut_short = self
                .tasks
                .iter()
                .filter(|task| task.key == key && !task.over)
                .filter_map(|task| match task.kind {
                    Kind::Alarm { at } => Some(at),
                    _ => None,
                })
                .min();
            if let Some(at) = cut_short {
                let armed = self.world.keys.borrow()[key].alarm;
                let kept = armed.is_some_and(|armed| !armed.dropped && armed.at <= at);
                if !kept {
                    let at = armed.map_or(at, |armed| armed.at.min(at));
                    let alarm = self.world.accept_alarm(at, self.world.rests_on_alarm(key));
                    self.world.keys.borrow_mut()[key].alarm = Some(alarm);
                }
            }
            for task in self.tasks.iter_mut().filter(|task| task.key == key) {
                task.over = true;
            }
            let incarnation = self.world.keys.borrow()[key].incarnation;
            self.engines[key] = Rc::new(Engine::new(SimBackend {
                world: self.world.clone(),
                key,
                incarnation,
            }));
        }
    }

    /// The operator purges a key; with force now and then, which discards
    /// a pending delivery on purpose.
    fn purge(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        let force = self.rng.chance(30);
        let engine = self.engines[key].clone();
        self.spawn(
            key,
            Kind::Purge { force },
            Box::pin(async move {
                let _ = engine.purge(&object(key), force).await;
                None
            }),
        );
    }

    /// The operator re-drives a key (refused unless it is dead, failed or
    /// queued).
    fn redrive(&mut self) {
        let key = self.rng.below(KEYS as u64) as usize;
        self.redrive_key(key);
    }

    /// Owed until it is answered, and retried once the run quiesces if the
    /// answer is a 5xx (a re-drive whose writes failed) or never comes.
    fn redrive_key(&mut self, key: usize) {
        let engine = self.engines[key].clone();
        let owed = self.redrives_owed.clone();
        owed.borrow_mut()[key] = true;
        self.spawn(
            key,
            Kind::Redrive,
            Box::pin(async move {
                let answered = engine.redrive().await;
                owed.borrow_mut()[key] =
                    matches!(answered, Err(problem) if problem.status() >= 500);
                None
            }),
        );
    }

    /// Each shard's sweep (its alarm): wakes every object of the shard
    /// whose row is overdue (`sql::OVERDUE`), then forgets old
    /// tombstones. A shard's run may be missed, finds nothing while the
    /// shard is down, and may be cut short by the shard's restart (it
    /// wakes the first few, and runs again at its next time).
    fn sweep(&mut self) {
        let now = self.world.now.get();
        self.next_sweep_at = now + self.profile.sweep_every_ms;
        for shard in 0..SIM_SHARDS {
            let down = self.world.faults.shard_down(shard, now);
            if down || self.rng.chance(self.profile.sweep_missed) {
                continue;
            }
            self.sweep_shard(shard, now);
        }
    }

    fn sweep_shard(&mut self, shard: u16, now: u64) {
        let plan = Sweep::at(now, DEFAULT_LIMIT);
        let mut overdue: Vec<String> = self
            .world
            .d1
            .borrow()
            .overdue(plan.overdue_before, usize::MAX)
            .into_iter()
            .filter(|name| shard_of(name, SIM_SHARDS) == shard)
            .take(plan.limit as usize)
            .collect();
        if self.rng.chance(self.profile.sweep_missed) {
            // The shard restarts mid-run: the rest wait for its next.
            let woken = self.rng.below(overdue.len() as u64 + 1) as usize;
            overdue.truncate(woken);
            self.explored.shard_restarts += 1;
        }
        for name in overdue {
            let key: usize = name
                .strip_prefix("object-")
                .and_then(|key| key.parse().ok())
                .expect("an object of the simulation");
            let engine = self.engines[key].clone();
            self.spawn(
                key,
                Kind::Wake,
                Box::pin(async move {
                    let _ = engine.wake(&name).await;
                    None
                }),
            );
            self.explored.wakes += 1;
        }
        self.world
            .d1
            .borrow_mut()
            .forget_tombstones(plan.forget_tombstones_before);
    }

    /// After the schedule: faults end, the origin answers every call with
    /// success, senders retry what got no final answer, the operator
    /// what got none, and time runs on (event to event) for five minutes
    /// and until nothing is pending: then invariants 8 and 9 are checked.
    /// Then time runs on until nothing is scheduled (every alarm fired,
    /// every row's wake past and swept): then invariant 10.
    fn quiesce(&mut self) {
        self.world.faults.end();
        self.world.origin_recovered.set(true);
        self.profile.sweep_missed = 0;
        let until = self.world.now.get() + QUIESCE_MS;
        for _ in 0..400 {
            for call in self.world.open_calls() {
                self.world
                    .answer(call, respond(201, format!("settled by call {call}")));
            }
            self.retry_unanswered();
            self.run_events();
            if self.stopped() {
                return;
            }
            if self.world.now.get() >= until && self.quiet() {
                break;
            }
            self.advance_to_next_event();
        }
        self.check_settled();
        for _ in 0..400 {
            if self.stopped() || self.nothing_scheduled() {
                break;
            }
            self.advance_to_next_event();
            self.run_events();
        }
        self.check_index_follows();
    }

    /// Moves the clock to the next thing due: an alarm, an index write
    /// landing, or the sweep (at its cadence, and no sooner than a row is
    /// overdue: the runs between would find nothing).
    fn advance_to_next_event(&mut self) {
        let now = self.world.now.get();
        let first_overdue = self
            .world
            .d1
            .borrow()
            .rows
            .values()
            .filter(|row| row.state != crate::index::GONE)
            .filter_map(|row| row.next_wake_at)
            .min()
            .map(|at| at + GRACE_MS);
        let sweep = match first_overdue {
            Some(at) => self.next_sweep_at.max(at),
            None => self.next_sweep_at.max(now + DAY_MS),
        };
        let next_alarm = self
            .world
            .keys
            .borrow()
            .iter()
            .filter_map(|key| key.alarm.filter(|alarm| !alarm.dropped))
            .map(|alarm| alarm.at)
            .min();
        let next = [
            next_alarm,
            self.world.next_landing(),
            self.world.next_flow_event(),
            self.world.next_order_event(),
            Some(sweep),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a sweep is always next");
        self.next_sweep_at = self.next_sweep_at.max(sweep.min(next));
        self.world.now.set(next.max(now + 1));
    }

    /// No alarm armed that will fire, no index write on its way, no row
    /// the sweep will wake, and nothing running.
    fn nothing_scheduled(&self) -> bool {
        let alarms = self
            .world
            .keys
            .borrow()
            .iter()
            .any(|key| key.alarm.is_some_and(|alarm| !alarm.dropped));
        let rows = self
            .world
            .d1
            .borrow()
            .rows
            .values()
            .any(|row| row.state != crate::index::GONE && row.next_wake_at.is_some());
        !alarms
            && !rows
            && self.tasks.is_empty()
            && self.world.index_writes.borrow().is_empty()
            && self.world.next_flow_event().is_none()
            && self.world.next_order_event().is_none()
    }

    /// Nothing running, in flight, or waiting to be retried, and no
    /// delivery pending.
    fn quiet(&self) -> bool {
        let pending = self.world.keys.borrow().iter().any(|key| {
            key.stored
                .as_ref()
                .is_some_and(|receipt| receipt.deletable_at().is_none())
        });
        !pending
            && self.tasks.is_empty()
            && self.world.index_writes.borrow().is_empty()
            && self.unacknowledged.iter().all(Vec::is_empty)
            && !self.redrives_owed.borrow().iter().any(|owed| *owed)
    }

    /// Senders retry every delivery they got no final answer for (a 2xx,
    /// or a 4xx other than a conflict); the operator, a re-drive that got
    /// none (a 5xx, or no answer at all).
    fn retry_unanswered(&mut self) {
        for key in 0..KEYS {
            for payload in self.unacknowledged[key].clone() {
                let running = self
                    .tasks
                    .iter()
                    .any(|task| task.key == key && task.payload.as_ref() == Some(&payload));
                if !running {
                    self.deliver_payload(key, payload);
                }
            }
            let owed = self.redrives_owed.borrow()[key];
            if owed
                && !self
                    .tasks
                    .iter()
                    .any(|task| task.key == key && task.kind == Kind::Redrive)
            {
                self.redrive_key(key);
            }
        }
    }

    /// Invariant 9, at every step: an acknowledged delivery, while it is
    /// pending or dead, has a row that lists it (the sweep reads nothing
    /// else).
    fn check_acknowledged_rows(&self) {
        let keys = self.world.keys.borrow();
        let lives = self.world.lives.borrow();
        let d1 = self.world.d1.borrow();
        for (key, state) in keys.iter().enumerate() {
            let Some(receipt) = &state.stored else {
                continue;
            };
            let id = &receipt.identity.receipt_id;
            let acknowledged = lives
                .get(id)
                .is_some_and(|life| life.acknowledged && !life.forced_out);
            let listed = receipt.is_pending() || matches!(receipt.state, ReceiptState::Dead { .. });
            if !acknowledged || !listed {
                continue;
            }
            let row = d1.rows.get(&object(key));
            // Or its receipt knows its row has not landed, and its alarm
            // writes it again (SPEC §2b, v5).
            let repairing = !receipt.indexed.confirmed;
            if !repairing
                && !row.is_some_and(|row| row.state != crate::index::GONE && &row.receipt_id == id)
            {
                self.world.violate(format!(
                    "I9 key {key}: acknowledged {id} is {} but the index does not list it (row {:?})",
                    receipt.state_name(),
                    row.map(|row| (&row.receipt_id, &row.state))
                ));
            }
        }
    }

    /// Invariants 8 and 9, once the run settled.
    fn check_settled(&self) {
        let keys = self.world.keys.borrow();
        let d1 = self.world.d1.borrow();
        let lives = self.world.lives.borrow();
        for (key, state) in keys.iter().enumerate() {
            if let Some(receipt) = state.stored.as_ref().filter(|r| r.is_pending()) {
                self.world.violate(format!(
                    "I8 key {key}: an accepted delivery never settled ({}, alarm {:?})",
                    receipt.state_name(),
                    state
                        .alarm
                        .map(|alarm| (alarm.at.saturating_sub(START), alarm.dropped))
                ));
            }
        }
        for (id, life) in lives.iter() {
            let ended = matches!(life.state, "completed" | "dead" | "superseded");
            if life.acknowledged && !life.forced_out && !ended {
                self.world.violate(format!(
                    "I9 key {}: acknowledged {id} never ended ({}{})",
                    life.key,
                    life.state,
                    if life.deleted { ", deleted" } else { "" }
                ));
            }
        }
        // The index has settled: an acknowledged delivery still pending or
        // dead is listed as it is.
        for (key, state) in keys.iter().enumerate() {
            let Some(receipt) = &state.stored else {
                continue;
            };
            let id = &receipt.identity.receipt_id;
            let acknowledged = lives
                .get(id)
                .is_some_and(|life| life.acknowledged && !life.forced_out);
            let listed =
                receipt.is_pending() || matches!(receipt.state_name(), "dead" | "superseded");
            let row = d1.listed(&object(key));
            let shows =
                row.is_some_and(|row| row.state == receipt.state_name() && &row.receipt_id == id);
            if acknowledged && listed && !shows {
                self.world.violate(format!(
                    "I9 key {key}: acknowledged {id} is {} but its row shows {:?}",
                    receipt.state_name(),
                    row.map(|row| (&row.receipt_id, &row.state))
                ));
            }
        }
    }

    /// Invariant 10, once nothing is scheduled: every row is what its
    /// receipt needs (`update_for` has nothing to write), and none lists
    /// anything where there is no receipt.
    fn check_index_follows(&self) {
        let now = self.world.now.get();
        let keys = self.world.keys.borrow();
        let d1 = self.world.d1.borrow();
        for (key, state) in keys.iter().enumerate() {
            let row = d1.listed(&object(key));
            let shown = row.map_or_else(Indexed::default, |row| Indexed {
                state: Some(row.state.clone()),
                next_wake_at: row.next_wake_at,
                confirmed: true,
                shard: None,
            });
            let Some(needed) = update_for(&object(key), state.stored.as_ref(), &shown, 0, now)
            else {
                continue;
            };
            // The known limit: a sync receipt whose failed row was never
            // written, whose sender is done and whose alarm is lost, is
            // never touched again, so nothing writes the row (nor expires
            // the receipt). The sweep finds only rows.
            let orphan = state.stored.as_ref().is_some_and(|receipt| {
                receipt.delivery == crate::receipt::DeliveryKind::Sync
                    && row.is_none()
                    && state.alarm.is_none_or(|alarm| alarm.dropped)
            });
            if orphan {
                self.orphans.set(self.orphans.get() + 1);
                continue;
            }
            let receipt = match &state.stored {
                Some(receipt) => format!(
                    "its receipt ({:?} {}, wake {})",
                    receipt.delivery,
                    receipt.state_name(),
                    receipt.next_wake().saturating_sub(START)
                ),
                None => "no receipt".to_string(),
            };
            let needed = match needed {
                crate::index::IndexUpdate::Upsert(row) => format!(
                    "a {} row (wake {:?})",
                    row.state,
                    row.next_wake_at.map(|at| at.saturating_sub(START))
                ),
                crate::index::IndexUpdate::Remove { .. } => "no row".into(),
            };
            self.world.violate(format!(
                "I10 key {key}: the row shows {:?} (wake {:?}) where {receipt} needs {needed}",
                shown.state,
                shown.next_wake_at.map(|at| at.saturating_sub(START)),
            ));
        }
    }

    fn fire_due_alarms(&mut self) {
        let now = self.world.now.get();
        for key in 0..KEYS {
            let due = {
                let mut keys = self.world.keys.borrow_mut();
                let alarm = &mut keys[key].alarm;
                match *alarm {
                    Some(Alarm { at, dropped: false }) if at <= now => alarm.take(),
                    _ => None,
                }
            };
            let Some(Alarm { at, .. }) = due else {
                continue;
            };
            let engine = self.engines[key].clone();
            let world = self.world.clone();
            self.spawn(
                key,
                Kind::Alarm { at },
                Box::pin(async move {
                    // A failed handler is run again by the runtime, with
                    // backoff, unless it armed another alarm; six times.
                    let failed = engine.on_alarm().await.is_err();
                    let retries = {
                        let mut keys = world.keys.borrow_mut();
                        let state = &mut keys[key];
                        if !failed {
                            state.alarm_retries = 0;
                        }
                        let retry =
                            failed && state.alarm.is_none() && state.alarm_retries < ALARM_RETRIES;
                        retry.then(|| {
                            state.alarm_retries += 1;
                            state.alarm_retries
                        })
                    };
                    if let Some(retries) = retries {
                        let at = world.now.get() + (1_000 << retries);
                        let alarm = world.accept_alarm(at, world.rests_on_alarm(key));
                        world.keys.borrow_mut()[key].alarm = Some(alarm);
                    }
                    None
                }),
            );
        }
    }

    /// Polls every task, in a seeded order, until a round changes nothing.
    fn run_until_quiet(&mut self) {
        let waker = Waker::noop();
        let mut context = Context::from_waker(waker);
        for round in 0..16 {
            let mut order: Vec<usize> = (0..self.tasks.len()).collect();
            for index in (1..order.len()).rev() {
                order.swap(index, self.rng.below(index as u64 + 1) as usize);
            }
            for index in order {
                if !self.tasks[index].over {
                    self.poll_task(index, &mut context);
                }
            }
            let before = self.tasks.len();
            self.tasks.retain(|task| !task.over);
            if self.tasks.len() == before && round > 0 {
                break;
            }
        }
    }

    /// Polls one task; marks it over when it finished.
    fn poll_task(&mut self, index: usize, context: &mut Context<'_>) {
        let now = self.world.now.get();
        let expect_forward = if self.tasks[index].polled {
            false
        } else {
            self.observe_start(index, now)
        };
        let task = &mut self.tasks[index];
        let key = task.key;
        // A task runs again after an `await`: a new turn.
        self.world.keys.borrow_mut()[key].turn_open = false;
        self.world.polling.set(Some(task.id));
        self.world
            .force_purging
            .set(task.kind == (Kind::Purge { force: true }));
        let polled = task.future.as_mut().poll(context);
        self.world.force_purging.set(false);
        self.world.polling.set(None);
        let crashed = self.world.crashed.borrow().contains(&key);
        // Under flow control a delivery asks for its permit first (a call
        // that yields), and may be refused 429: invariant 6 is the
        // coordinator's to keep there (`flow::tests`), and 11 is checked.
        let limited = self.policy.flow.is_some();
        if expect_forward && !crashed && !limited && !self.world.task_forwarded(task.id) {
            self.world.violate(format!(
                "I6 key {key}: a delivery after the lease of a failed or expired forward was not forwarded",
            ));
        }
        if let Poll::Ready(answer) = polled {
            self.world.note(|| {
                format!(
                    "key {key}: task {} {:?} ends{}: {:?}",
                    task.id,
                    task.kind,
                    if crashed { " (crashed)" } else { "" },
                    answer.as_ref().map(|answer| answer.decision())
                )
            });
            task.over = true;
            // A crashed instance's caller never hears from it.
            if let (Some(answer), false) = (answer, crashed) {
                self.check_answer(index, &answer);
            }
            let engine = self.engines[key].clone();
            if !crashed && engine.has_after_answer() {
                let sent = self.first_attempts_sent.clone();
                self.spawn(
                    key,
                    Kind::FirstAttempt,
                    Box::pin(async move {
                        if engine.after_answer().await {
                            sent.set(sent.get() + 1);
                        }
                        None
                    }),
                );
            }
        }
        if crashed {
            self.restart_crashed();
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
        stuck && self.world.faults.failing_writes.get() == 0 && !self.asynchronous
    }

    fn check_answer(&mut self, index: usize, answer: &Answer) {
        let task = &self.tasks[index];
        let (key, era_at_start) = (task.key, task.era_at_start);
        let (Some(fingerprint), Some(payload)) = (task.fingerprint.clone(), task.payload.clone())
        else {
            return;
        };
        let stored_at_start = task.stored_at_start.clone();
        let now = self.world.now.get();
        let rendered = answer.render();
        // A sender stops at a 2xx, or at a 4xx other than a conflict.
        let status = rendered.status;
        let done = (200..300).contains(&status)
            || ((400..500).contains(&status) && status != 409 && status != 429);
        if done {
            self.unacknowledged[key].retain(|waiting| *waiting != payload);
        }
        let keys = self.world.keys.borrow();
        let state = &keys[key];
        if let Answer::Queued(ack) | Answer::Duplicate(ack) = answer {
            let durable = state
                .stored
                .as_ref()
                .is_some_and(|receipt| receipt.fingerprint == fingerprint);
            if !durable && state.era == era_at_start {
                self.world.violate(format!(
                    "I7 key {key}: an acknowledgement before its receipt was durable"
                ));
            }
            self.world.acknowledged(&ack.receipt_id);
            self.explored.acknowledged += 1;
        } else if (200..300).contains(&rendered.status) {
            // Accepted in the era the delivery started in, or later (it
            // may answer after a purge started another).
            let accepted = state.accepted.iter().any(|(payload, at, era)| {
                *payload == fingerprint && *at <= now && *era >= era_at_start
            });
            if !accepted {
                self.world.violate(format!(
                    "I5 key {key}: a {} before the origin accepted the payload",
                    rendered.status
                ));
            }
        }
        // An async duplicate gets the acknowledgement, not the replay.
        if let Some(stored) = stored_at_start.as_ref().filter(|_| !self.asynchronous) {
            let origin_headers: Vec<(String, String)> = rendered
                .headers
                .iter()
                .filter(|(name, _)| name != REPLAYED && name != DECISION)
                .cloned()
                .collect();
            let identical = rendered.status == stored.status
                && rendered.body == stored.body
                && origin_headers == stored.headers;
            if state.era == era_at_start && !identical {
                self.world.violate(format!(
                    "I3 key {key}: a replay differs from the stored response"
                ));
            }
        }
        drop(keys);
        if matches!(answer, Answer::Queued(_) | Answer::Duplicate(_)) {
            self.check_acknowledged_rows();
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
/// what was explored. With a defect, stops at the first seed with a
/// violation that says every one of `wanted`.
pub fn explore(
    seeds: std::ops::Range<u64>,
    steps: u64,
    defect: Option<(Mutation, &[&str])>,
) -> (Vec<String>, Explored) {
    let wanted = defect.map(|(_, wanted)| wanted);
    let defect = defect.map(|(defect, _)| defect);
    mutation::activate(defect);
    let mut total = Explored::default();
    let mut violations = Vec::new();
    for seed in seeds {
        let mut simulation = Simulation::new(seed);
        let found = simulation.run(steps, defect.is_some());
        simulation.explored.first_attempts = simulation.first_attempts_sent.get();
        total.add(&simulation.explored);
        let caught = wanted.is_some_and(|wanted| {
            found
                .iter()
                .any(|violation| wanted.iter().all(|part| violation.contains(part)))
        });
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

    /// The world's D1 keeps what SQLite (D1's engine) keeps when it runs
    /// `index::sql`'s statements, over random writes landing in any
    /// order: every row, the overdue list, and the tombstones forgotten.
    #[test]
    fn the_worlds_index_is_what_sqlite_keeps() {
        use crate::index::sql::{self, COLUMNS};
        use crate::index::TableRow;
        use crate::index::{IndexRow, IndexUpdate};
        use rusqlite::{params, Connection};
        let read = |db: &Connection| -> Vec<TableRow> {
            let query = format!("SELECT {COLUMNS} FROM receipt_index ORDER BY object");
            let mut statement = db.prepare(&query).expect("a query");
            statement
                .query_map([], |row| {
                    let number = |index: usize| row.get::<_, i64>(index).map(|n| n as u64);
                    let maybe = |index: usize| {
                        row.get::<_, Option<i64>>(index)
                            .map(|n| n.map(|n| n as u64))
                    };
                    Ok(TableRow {
                        object: row.get(0)?,
                        route: row.get(1)?,
                        scope: row.get(2)?,
                        key: row.get(3)?,
                        path: row.get(4)?,
                        tenant_sha256: row.get(5)?,
                        receipt_id: row.get(6)?,
                        state: row.get(7)?,
                        attempts: number(8)?,
                        last_status: row.get(9)?,
                        next_wake_at: maybe(10)?,
                        accepted_at: number(11)?,
                        updated_at: number(12)?,
                        version: number(13)?,
                    })
                })
                .expect("rows")
                .map(Result::unwrap)
                .collect()
        };
        let mut rng = Rng(7);
        for _ in 0..50 {
            let db = Connection::open_in_memory().expect("SQLite");
            for statement in sql::schema() {
                db.execute(&statement, []).expect("the schema");
            }
            let mut d1 = world::D1::default();
            for _ in 0..60 {
                let object = format!("object-{}", rng.below(3));
                let version = rng.below(12);
                let at = rng.below(1_000);
                let update = if rng.chance(30) {
                    IndexUpdate::Remove {
                        object,
                        version,
                        at,
                    }
                } else {
                    IndexUpdate::Upsert(IndexRow {
                        identity: Identity {
                            object,
                            route: "default".into(),
                            scope: format!("scope-{}", rng.below(2)),
                            key: IdempotencyKey::parse("key", "test").expect("a valid key"),
                            path: rng.chance(50).then(|| "/pay".into()),
                            tenant_sha256: None,
                            receipt_id: format!("receipt-{}", rng.below(4)),
                        },
                        state: rng.pick(&["queued", "in_flight", "failed", "dead"]).into(),
                        attempts: rng.below(4),
                        last_status: rng.chance(50).then_some(503),
                        next_wake_at: rng.chance(80).then(|| rng.below(1_000)),
                        accepted_at: at,
                        updated_at: at,
                        version,
                    })
                };
                let (statement, params) = sql::write_of(&update);
                db.execute(statement, rusqlite::params_from_iter(params))
                    .expect("a write");
                d1.apply(&update);
                let modelled: Vec<TableRow> = d1.rows.values().cloned().collect();
                assert_eq!(modelled, read(&db), "after {update:?}");
                let before = rng.below(1_000);
                let overdue: Vec<String> = db
                    .prepare(sql::OVERDUE)
                    .expect("a query")
                    .query_map(params![before as i64, 3], |row| row.get(0))
                    .expect("rows")
                    .map(Result::unwrap)
                    .collect();
                let mut modelled = d1.overdue(before, 3);
                // SQLite leaves ties in any order (the limit takes all).
                let mut sorted = overdue.clone();
                sorted.sort();
                modelled.sort();
                assert_eq!(modelled, sorted, "overdue before {before}");
                if rng.chance(10) {
                    let before = rng.below(1_000);
                    db.execute(sql::FORGET_TOMBSTONES, params![before as i64])
                        .expect("a cleanup");
                    d1.forget_tombstones(before);
                }
            }
        }
    }

    #[test]
    fn seeds() {
        let seeds = match env_number("SIM_SEED") {
            Some(seed) => seed..seed + 1,
            None => 0..env_number("SIM_SEEDS").unwrap_or(2_000),
        };
        let count = seeds.end - seeds.start;
        let started = std::time::Instant::now();
        let (violations, explored) = crate::within(600, move || explore(seeds, steps(), None));
        println!(
            "simulation: {count} schedules in {:.1} s, {} steps, {} deliveries ({} acknowledged), \
             {} forwards ({} first attempts after an acknowledgement), {} sweep wakes; faults: {} crashes, {} alarms refused, {} alarms \
             dropped, {} index writes failed, {} late, {} lost; {} sync receipts orphaned; {} schedules flow-limited",
            started.elapsed().as_secs_f64(),
            explored.steps,
            explored.deliveries,
            explored.acknowledged,
            explored.forwards,
            explored.first_attempts,
            explored.wakes,
            explored.crashes,
            explored.alarms_refused,
            explored.alarms_dropped,
            explored.index_failed,
            explored.index_late,
            explored.index_lost,
            explored.orphans,
            explored.limited,
        );
        assert!(violations.is_empty(), "{}", violations.join("\n"));
    }

    /// Each invariant's checker catches its deliberately broken logic:
    /// a violation of `invariant` that says `what`.
    fn caught_saying(defect: Mutation, invariant: &str, what: &'static str) {
        let wanted = format!("{invariant} ");
        let (violations, explored) = crate::within(120, {
            let wanted = wanted.clone();
            move || explore(0..500, steps(), Some((defect, &[&wanted, what])))
        });
        let found = violations
            .iter()
            .find(|violation| violation.contains(&wanted) && violation.contains(what));
        assert!(
            found.is_some(),
            "{defect:?} was not caught in {} steps: {:?}",
            explored.steps,
            &violations[..violations.len().min(5)]
        );
        println!(
            "{defect:?}: {} after {} steps",
            found.expect("found"),
            explored.steps
        );
    }

    fn caught(defect: Mutation, invariant: &str) {
        caught_saying(defect, invariant, "");
    }

    #[test]
    fn catches_a_forward_past_its_permit() {
        caught(Mutation::ForwardPastItsPermit, "I11");
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

    #[test]
    fn catches_an_acknowledgement_without_its_index_row() {
        // At once: the row the sweep reads is not there.
        caught_saying(
            Mutation::AcknowledgeWithoutIndexRow,
            "I9",
            "the index does not list it",
        );
        // And in the end: with alarms dropped, the sweep never delivers it.
        caught_saying(Mutation::AcknowledgeWithoutIndexRow, "I9", "never ended");
    }

    #[test]
    fn catches_a_wake_that_leaves_a_lagging_row() {
        caught(Mutation::WakeWithoutReconcile, "I10");
    }
}
