use sha2::Digest;

use super::*;

const LEASE: u64 = 15_000;

fn limits(max_in_flight: Option<u32>, rate_per_second: Option<f64>) -> FlowLimits {
    FlowLimits {
        max_in_flight,
        rate_thousandths: rate_per_second.map(|rate| (rate * 1000.0) as u64),
        shards: 1,
    }
}

fn ask(holder: &str, accepted_at: u64, wait: bool, limits: FlowLimits) -> PermitRequest {
    PermitRequest {
        holder: holder.into(),
        accepted_at,
        lease_ms: LEASE,
        wait,
        limits,
    }
}

fn granted(reply: PermitReply) -> u64 {
    match reply {
        PermitReply::Granted { grant, .. } => grant,
        other => panic!("not granted: {other:?}"),
    }
}

#[test]
fn no_more_than_max_in_flight_are_granted() {
    let limits = limits(Some(2), None);
    let mut flow = Coordinator::new(limits, 0);
    let a = granted(flow.acquire(&ask("a", 1, false, limits), 0));
    granted(flow.acquire(&ask("b", 2, false, limits), 0));
    assert_eq!(
        flow.acquire(&ask("c", 3, false, limits), 0),
        PermitReply::Busy {
            retry_after_ms: 1_000
        }
    );
    flow.release("a", a, limits, 10);
    granted(flow.acquire(&ask("c", 3, false, limits), 10));
    assert_eq!(flow.in_use(), 2);
}

#[test]
fn waiters_are_served_oldest_accepted_first_and_woken() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let first = granted(flow.acquire(&ask("first", 1, true, limits), 0));
    // Asked later, accepted earlier: served first.
    assert_eq!(
        flow.acquire(&ask("late", 30, true, limits), 5),
        PermitReply::Queued {
            retry_at: 5 + REQUEUE_MS
        }
    );
    assert!(matches!(
        flow.acquire(&ask("early", 20, true, limits), 6),
        PermitReply::Queued { .. }
    ));
    assert_eq!(flow.status(10).waiting, 2);
    assert_eq!(flow.status(10).oldest_wait_ms, Some(5));
    flow.release("first", first, limits, 100);
    assert_eq!(flow.take_wakes(), vec!["early".to_string()]);
    // Reserved for `early`: `late` asking again is still queued.
    assert!(matches!(
        flow.acquire(&ask("late", 30, true, limits), 101),
        PermitReply::Queued { .. }
    ));
    let early = granted(flow.acquire(&ask("early", 20, true, limits), 102));
    flow.release("early", early, limits, 200);
    assert_eq!(flow.take_wakes(), vec!["late".to_string()]);
    granted(flow.acquire(&ask("late", 30, true, limits), 201));
    assert_eq!(flow.status(201).waiting, 0);
}

#[test]
fn a_sync_delivery_never_passes_a_waiter() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let held = granted(flow.acquire(&ask("held", 1, true, limits), 0));
    assert!(matches!(
        flow.acquire(&ask("queued", 2, true, limits), 1),
        PermitReply::Queued { .. }
    ));
    flow.release("held", held, limits, 2);
    assert!(matches!(
        flow.acquire(&ask("sync", 3, false, limits), 3),
        PermitReply::Busy { .. }
    ));
}

#[test]
fn a_lost_permit_comes_back_when_its_lease_ends() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("crashed", 1, true, limits), 0));
    assert!(matches!(
        flow.acquire(&ask("next", 2, true, limits), 1),
        PermitReply::Queued { .. }
    ));
    assert_eq!(flow.next_alarm(), Some(LEASE));
    flow.on_alarm(LEASE - 1);
    assert!(flow.take_wakes().is_empty(), "not before the lease ends");
    flow.on_alarm(LEASE);
    assert_eq!(flow.take_wakes(), vec!["next".to_string()]);
}

#[test]
fn an_unclaimed_reservation_goes_to_the_next_waiter() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let held = granted(flow.acquire(&ask("held", 1, true, limits), 0));
    for (holder, at) in [("lost-wake", 2), ("next", 3)] {
        flow.acquire(&ask(holder, at, true, limits), at);
    }
    flow.release("held", held, limits, 10);
    assert_eq!(flow.take_wakes(), vec!["lost-wake".to_string()]);
    assert_eq!(flow.take_claims_expired(), 0);
    flow.on_alarm(10 + CLAIM_MS);
    assert_eq!(flow.take_wakes(), vec!["next".to_string()]);
    assert_eq!(flow.take_claims_expired(), 1, "one permit lost to a claim");
    // The first comes back later: queued again, ahead of newer ones.
    assert!(matches!(
        flow.acquire(&ask("lost-wake", 2, true, limits), 20_000),
        PermitReply::Queued { .. }
    ));
}

#[test]
fn a_release_of_an_earlier_grant_frees_nothing() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let old = granted(flow.acquire(&ask("a", 1, true, limits), 0));
    // The holder restarted and asked again: it waits out the lease its
    // earlier forward may still be using.
    assert_eq!(
        flow.acquire(&ask("a", 1, true, limits), LEASE - 1),
        PermitReply::Queued { retry_at: LEASE }
    );
    flow.release("a", old + 100, limits, LEASE - 1);
    assert_eq!(flow.in_use(), 1, "another grant's release frees nothing");
    flow.release("a", old, limits, LEASE - 1);
    assert_eq!(flow.in_use(), 0);
}

#[test]
fn the_rate_is_a_bucket_of_one_seconds_worth() {
    let limits = limits(None, Some(10.0));
    let mut flow = Coordinator::new(limits, 0);
    for i in 0..10 {
        granted(flow.acquire(&ask(&format!("k{i}"), i, false, limits), 0));
    }
    assert_eq!(
        flow.acquire(&ask("k10", 10, false, limits), 0),
        PermitReply::Busy {
            retry_after_ms: 100
        }
    );
    granted(flow.acquire(&ask("k10", 10, false, limits), 100));
    // Waiters held back by the rate: the alarm comes with the next token.
    flow.acquire(&ask("w", 11, true, limits), 100);
    assert_eq!(flow.next_alarm(), Some(200));
    flow.on_alarm(200);
    assert_eq!(flow.take_wakes(), vec!["w".to_string()]);
}

#[test]
fn a_slow_rate_holds_one_token() {
    let limits = limits(None, Some(0.5));
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, false, limits), 0));
    assert_eq!(
        flow.acquire(&ask("b", 2, false, limits), 0),
        PermitReply::Busy {
            retry_after_ms: 2_000
        }
    );
    granted(flow.acquire(&ask("b", 2, false, limits), 2_000));
}

/// The rows a coordinator wrote, applied as the object applies them.
#[derive(Default)]
struct Rows {
    permits: std::collections::BTreeMap<String, Permit>,
    waiters: std::collections::BTreeMap<String, Waiter>,
    meta: Option<Meta>,
}

impl Rows {
    fn apply(&mut self, changes: Changes) {
        for holder in changes.permits_removed {
            self.permits.remove(&holder);
        }
        for permit in changes.permits {
            self.permits.insert(permit.holder.clone(), permit);
        }
        for holder in changes.waiters_removed {
            self.waiters.remove(&holder);
        }
        for waiter in changes.waiters {
            self.waiters.insert(waiter.holder.clone(), waiter);
        }
        if changes.meta.is_some() {
            self.meta = changes.meta;
        }
    }

    fn restore(&self, limits: FlowLimits, now: u64) -> Coordinator {
        Coordinator::restore(
            self.permits.values().cloned().collect(),
            self.waiters.values().cloned().collect(),
            self.meta.clone(),
            limits,
            now,
        )
    }
}

/// Many holders on two gateways contend for one route's permits, with
/// lost and held replies (a reply may come back long after the lease it
/// granted has ended at the coordinator), lost releases, lost and slow
/// wakes, crashes of holders mid-forward and restarts of the coordinator
/// from its rows. Forwards at the origin never outnumber
/// `max_in_flight`, and every delivery is delivered. `FLOW_SCHEDULES`
/// sets how many schedules run (2,000 by default; a release run takes
/// 20,000).
#[test]
fn simulation_the_limit_holds_and_every_waiter_is_served() {
    let schedules = std::env::var("FLOW_SCHEDULES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2_000);
    for seed in 0..schedules {
        simulate(seed);
    }
}

/// A tiny deterministic generator (xorshift).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Holder {
    /// Asks at `at` (its alarm; a wake brings it forward).
    Asking {
        at: u64,
    },
    /// Asked at `asked_at`; the coordinator's answer (`None`: the call
    /// failed) comes back at `arrives_at`.
    Awaiting {
        asked_at: u64,
        reply: Option<PermitReply>,
        arrives_at: u64,
    },
    /// Forwarding under `grant` until `until`.
    Forwarding {
        grant: u64,
        until: u64,
    },
    Delivered,
}

/// A route's timeout and lease in the simulation: the lease keeps the
/// margin SPEC §8 asks for.
const SIM_TIMEOUT: u64 = 4_000;
const SIM_LEASE: u64 = 5_000;

fn simulate(seed: u64) {
    let mut random = Random(seed * 2_654_435_761 + 1);
    let max = 1 + random.below(4) as u32;
    let rate = random.chance(40).then(|| 1.0 + random.below(20) as f64);
    let limits = limits(Some(max), rate);
    let keys = 5 + random.below(30) as usize;
    let mut rows = Rows::default();
    let mut flow = Coordinator::new(limits, 0);
    let mut holders: Vec<Holder> = (0..keys)
        .map(|_| Holder::Asking {
            at: random.below(2_000),
        })
        .collect();
    // A wake that found its holder asking: it asks again at once when
    // the coordinator's "queued" comes back.
    let mut woken = vec![false; keys];
    // Wakes on their way: (holder, when it arrives).
    let mut wakes: Vec<(usize, u64)> = Vec::new();
    // The gateway (isolate) each key's object runs in; a crash takes all
    // of a gateway's objects, which start again from their alarm.
    let gateway_of: Vec<usize> = (0..keys).map(|_| random.below(2) as usize).collect();
    let name = |i: usize| format!("key-{i}");
    let mut now = 0;
    while holders.iter().any(|holder| *holder != Holder::Delivered) {
        now += 1 + random.below(50);
        assert!(now < 10_000_000, "seed {seed}: not every delivery was made");
        // The coordinator restarts: it is its rows.
        if random.chance(1) {
            flow = rows.restore(limits, now);
        }
        if flow.next_alarm().is_some_and(|at| at <= now) {
            flow.on_alarm(now);
        }
        // A gateway crashes: its forwards stop, unreleased, and its
        // objects forget the answers on their way.
        if random.chance(1) {
            let crashed = random.below(2) as usize;
            for (i, holder) in holders.iter_mut().enumerate() {
                let stopped = matches!(holder, Holder::Forwarding { .. } | Holder::Awaiting { .. });
                if gateway_of[i] == crashed && stopped {
                    *holder = Holder::Asking {
                        at: now + SIM_LEASE,
                    };
                    woken[i] = false;
                }
            }
        }
        for (i, holder) in holders.iter_mut().enumerate() {
            match holder.clone() {
                Holder::Asking { at } if at <= now => {
                    let request = PermitRequest {
                        holder: name(i),
                        accepted_at: i as u64,
                        lease_ms: SIM_LEASE,
                        wait: true,
                        limits,
                    };
                    woken[i] = false;
                    let reply = flow.acquire(&request, now);
                    // Most answers are back at once; some are held far
                    // past the lease they grant; some are lost.
                    let (reply, delay) = match random.below(100) {
                        0..5 => (None, random.below(100)),
                        5..15 => (Some(reply), random.below(3 * SIM_LEASE)),
                        _ => (Some(reply), random.below(50)),
                    };
                    *holder = Holder::Awaiting {
                        asked_at: now,
                        reply,
                        arrives_at: now + delay,
                    };
                }
                Holder::Awaiting {
                    asked_at,
                    reply,
                    arrives_at,
                } if arrives_at <= now => {
                    *holder = match reply {
                        None => Holder::Asking {
                            at: now + UNREACHABLE_RETRY_MS,
                        },
                        Some(PermitReply::Granted { grant, lease_ms }) => {
                            let deadline =
                                forward_deadline(asked_at, lease_ms, SIM_LEASE - SIM_TIMEOUT);
                            match forward_timeout(deadline, now, SIM_TIMEOUT) {
                                // The origin answers within the timeout,
                                // or the timeout ends the forward.
                                Some(timeout) => Holder::Forwarding {
                                    grant,
                                    until: now + random.below(timeout + 1),
                                },
                                None => {
                                    if !random.chance(5) {
                                        flow.release(&name(i), grant, limits, now);
                                    }
                                    Holder::Asking {
                                        at: now + LATE_GRANT_RETRY_MS,
                                    }
                                }
                            }
                        }
                        Some(PermitReply::Queued { .. }) if woken[i] => Holder::Asking { at: now },
                        Some(PermitReply::Queued { retry_at }) => Holder::Asking { at: retry_at },
                        Some(PermitReply::Busy { .. }) => unreachable!("async waits"),
                    };
                }
                Holder::Forwarding { grant, until } if until <= now => {
                    *holder = Holder::Delivered;
                    if !random.chance(5) {
                        flow.release(&name(i), grant, limits, now);
                    }
                }
                _ => {}
            }
        }
        for holder in flow.take_wakes() {
            let i: usize = holder["key-".len()..].parse().unwrap();
            // Lost, slow (past the reservation's claim) or prompt.
            match random.below(100) {
                0..10 => {}
                10..20 => wakes.push((i, now + random.below(2 * CLAIM_MS))),
                _ => wakes.push((i, now + random.below(100))),
            }
        }
        wakes.retain(|&(i, arrives_at)| {
            if arrives_at > now {
                return true;
            }
            match &mut holders[i] {
                // The wake sets the object's alarm to now.
                Holder::Asking { at } => *at = (*at).min(now),
                Holder::Awaiting { .. } => woken[i] = true,
                _ => {}
            }
            false
        });
        rows.apply(flow.take_changes());
        // The rows are the coordinator: a restart queues no one it would
        // not queue now (a holder long served would take a permit first).
        let mut live = flow.waiting_holders();
        live.sort_unstable();
        assert_eq!(
            rows.waiters.keys().map(String::as_str).collect::<Vec<_>>(),
            live,
            "seed {seed}: the rows keep a different queue"
        );
        assert_eq!(rows.permits.values().cloned().collect::<Vec<_>>(), {
            let mut permits = flow.permits().to_vec();
            permits.sort_by(|a, b| a.holder.cmp(&b.holder));
            permits
        });
        let forwarding = holders
            .iter()
            .filter(|holder| matches!(holder, Holder::Forwarding { .. }))
            .count();
        assert!(
            forwarding <= max as usize,
            "seed {seed}: {forwarding} forwards at once under max_in_flight {max}"
        );
        assert!(flow.in_use() <= max as usize, "seed {seed}");
    }
}

/// Tests that catch, round 4 (break 3): async deliveries wait behind a
/// grant whose lease ends; a sync delivery that comes then (the freed
/// slot not yet handed on) is refused, and the oldest waiter gets it.
#[test]
fn a_sync_delivery_never_takes_a_slot_freed_ahead_of_async_waiters() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("held", 1, true, limits), 0));
    assert!(matches!(
        flow.acquire(&ask("waiting", 2, true, limits), 1),
        PermitReply::Queued { .. }
    ));
    // The grant's lease has ended; nothing ran the coordinator since.
    assert!(matches!(
        flow.acquire(&ask("sync", 3, false, limits), LEASE + 1),
        PermitReply::Busy { .. }
    ));
    flow.on_alarm(LEASE + 1);
    assert_eq!(flow.take_wakes(), vec!["waiting".to_string()]);
    granted(flow.acquire(&ask("waiting", 2, true, limits), LEASE + 2));
}

/// Tests that catch, round 4 (break 7): the waiters' table is keyed by
/// holder, so rows come back in holder order; restored, the coordinator
/// still serves the oldest accepted first.
#[test]
fn a_restored_coordinator_serves_its_waiters_oldest_accepted_first() {
    let limits = limits(Some(1), None);
    let mut rows = Rows::default();
    rows.permits.insert(
        "busy".into(),
        Permit {
            holder: "busy".into(),
            grant: 1,
            expires_at: LEASE,
            reserved: false,
        },
    );
    for (holder, accepted_at) in [("a-newest", 30), ("b-oldest", 10), ("c-middle", 20)] {
        rows.waiters.insert(
            holder.into(),
            Waiter {
                holder: holder.into(),
                accepted_at,
                enqueued_at: 0,
            },
        );
    }
    let mut flow = rows.restore(limits, 1);
    assert_eq!(flow.waiting_holders(), ["b-oldest", "c-middle", "a-newest"]);
    flow.release("busy", 1, limits, 2);
    assert_eq!(flow.take_wakes(), vec!["b-oldest".to_string()]);
}

/// The main simulation's case: a holder whose grant is live asks again
/// (it restarted, its answer or release was lost, or its key began a new
/// life after a purge). A forward under that grant may still be at the
/// origin, so the holder waits for its lease: re-granted, one permit
/// would count two forwards.
#[test]
fn a_holder_asking_again_while_its_grant_is_live_waits_for_its_lease() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, false, limits), 0));
    assert_eq!(
        flow.acquire(&ask("a", 1, false, limits), 10),
        PermitReply::Busy {
            retry_after_ms: LEASE - 10
        }
    );
    assert_eq!(
        flow.acquire(&ask("a", 1, true, limits), 10),
        PermitReply::Queued { retry_at: LEASE }
    );
    assert_eq!(flow.status(10).waiting, 0, "not queued behind itself");
    granted(flow.acquire(&ask("a", 1, true, limits), LEASE));
}

#[test]
fn changes_are_written_only_when_something_changed() {
    assert!(Changes::default().is_empty());
    let limits = limits(Some(1), Some(1.0));
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, false, limits), 0));
    let changes = flow.take_changes();
    assert!(!changes.is_empty());
    assert!(!Changes {
        meta: changes.meta.clone(),
        ..Changes::default()
    }
    .is_empty());
    // Refused in the same millisecond: no row to write.
    assert!(matches!(
        flow.acquire(&ask("b", 2, false, limits), 0),
        PermitReply::Busy { .. }
    ));
    assert!(flow.take_changes().is_empty());
}

#[test]
fn a_sync_caller_refused_is_never_queued() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, false, limits), 0));
    assert!(matches!(
        flow.acquire(&ask("b", 2, false, limits), 1),
        PermitReply::Busy { .. }
    ));
    assert_eq!(flow.status(1).waiting, 0);
}

#[test]
fn without_room_the_alarm_waits_for_a_lease_not_a_token() {
    let limits = limits(Some(1), Some(1.0));
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, true, limits), 0));
    assert!(matches!(
        flow.acquire(&ask("b", 2, true, limits), 0),
        PermitReply::Queued { .. }
    ));
    assert_eq!(
        flow.next_alarm(),
        Some(LEASE),
        "the lease's end, not the next token's"
    );
}

#[test]
fn a_sync_caller_without_room_retries_in_a_second_whatever_the_bucket_holds() {
    let limits = limits(Some(1), Some(1_000.0));
    let mut flow = Coordinator::new(limits, 0);
    granted(flow.acquire(&ask("a", 1, false, limits), 0));
    assert_eq!(
        flow.acquire(&ask("b", 2, false, limits), 5),
        PermitReply::Busy {
            retry_after_ms: 1_000
        }
    );
}

#[test]
fn new_limits_apply_from_the_next_call() {
    let one = limits(Some(1), None);
    let two = limits(Some(2), None);
    let mut flow = Coordinator::new(one, 0);
    granted(flow.acquire(&ask("a", 1, false, one), 0));
    granted(flow.acquire(&ask("b", 2, false, two), 1));
}

#[test]
fn a_stale_grant_given_back_leaves_the_holders_new_permit() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let old = granted(flow.acquire(&ask("a", 1, false, limits), 0));
    // The lease ended; the same holder (a retry of its key) asks again.
    let new = granted(flow.acquire(&ask("a", 1, false, limits), LEASE + 1));
    assert_ne!(old, new);
    flow.release("a", old, limits, LEASE + 2);
    assert_eq!(flow.in_use(), 1, "the old grant frees nothing");
    assert!(matches!(
        flow.acquire(&ask("b", 2, false, limits), LEASE + 3),
        PermitReply::Busy { .. }
    ));
    flow.release("a", new, limits, LEASE + 4);
    assert_eq!(flow.in_use(), 0);
}

#[test]
fn changes_gathered_over_several_calls_restore_the_same_permits() {
    let limits = limits(Some(3), None);
    let mut flow = Coordinator::new(limits, 0);
    let mut rows = Rows::default();
    let a = granted(flow.acquire(&ask("a", 1, false, limits), 0));
    rows.apply(flow.take_changes());
    // Two calls before the rows are written: a grant, then a release.
    granted(flow.acquire(&ask("b", 2, false, limits), 1));
    flow.release("a", a, limits, 2);
    rows.apply(flow.take_changes());
    let restored = rows.restore(limits, 3);
    assert_eq!(restored.in_use(), 1, "b's permit was written");
    assert_eq!(restored.status(3), flow.status(3));
}

/// An async delivery that finds room is queued and served in one step:
/// the rows written must not keep it waiting, or every restart would hand
/// permits to deliveries long done and the table would grow with each.
#[test]
fn a_waiter_served_in_the_step_that_queued_it_leaves_no_row() {
    let limits = limits(Some(2), None);
    let mut flow = Coordinator::new(limits, 0);
    let mut rows = Rows::default();
    granted(flow.acquire(&ask("a", 1, true, limits), 0));
    rows.apply(flow.take_changes());
    assert!(rows.waiters.is_empty(), "a is not waiting");
    granted(flow.acquire(&ask("b", 2, true, limits), 1));
    assert_eq!(
        flow.acquire(&ask("c", 3, true, limits), 2),
        PermitReply::Queued {
            retry_at: 2 + REQUEUE_MS
        }
    );
    rows.apply(flow.take_changes());
    assert_eq!(rows.waiters.keys().collect::<Vec<_>>(), ["c"]);
    assert_eq!(rows.restore(limits, 3).status(3), flow.status(3));
}

/// Rows that show a holder forwarding under its permit and also waiting
/// (left by an earlier version, or a write cut short): after a restart it
/// keeps its permit and lease, and no longer waits.
#[test]
fn a_restart_never_reserves_again_the_permit_of_a_forward() {
    let limits = limits(Some(1), None);
    let mut rows = Rows::default();
    let lease = 60_000;
    let permit = Permit {
        holder: "a".into(),
        grant: 7,
        expires_at: lease,
        reserved: false,
    };
    rows.permits.insert("a".into(), permit.clone());
    let waiter = Waiter {
        holder: "a".into(),
        accepted_at: 1,
        enqueued_at: 0,
    };
    rows.waiters.insert("a".into(), waiter);
    let mut flow = rows.restore(limits, 10);
    flow.on_alarm(10);
    assert!(
        flow.take_wakes().is_empty(),
        "a is not woken for a second permit"
    );
    assert_eq!(flow.status(10).waiting, 0);
    assert_eq!(
        flow.next_alarm(),
        Some(lease),
        "the forward keeps its lease"
    );
    rows.apply(flow.take_changes());
    assert!(
        rows.waiters.is_empty(),
        "the stale wait is removed from the rows"
    );
    assert_eq!(rows.permits["a"], permit);
}

/// The coordinator object's dispatch is the coordinator's: each call's
/// line, and the limits it carries.
#[test]
fn a_call_is_applied_as_the_coordinator_object_answers_it() {
    let limits = limits(Some(1), None);
    let mut flow = Coordinator::new(limits, 0);
    let acquire = FlowCall::Acquire(ask("a", 1, false, limits));
    assert_eq!(Coordinator::limits_of(&acquire), limits);
    let granted_line = flow.apply(&acquire, 0);
    let PermitReply::Granted { grant, .. } = PermitReply::decode(&granted_line).unwrap() else {
        panic!("{granted_line}")
    };
    let release = FlowCall::Release {
        holder: "a".into(),
        grant,
        limits,
    };
    assert_eq!(flow.apply(&release, 5), coordinator::RELEASED);
    assert_eq!(flow.in_use(), 0);
    let status = FlowStatus::decode(&flow.apply(&FlowCall::Status, 6)).unwrap();
    assert_eq!(status.permits_in_use, 0);
    assert_eq!(
        Coordinator::limits_of(&FlowCall::Status),
        FlowLimits::default()
    );
}

/// `FLOW_SHARDS` (SPEC §15, v5): the route's limits over its
/// coordinators, each share at least 1, the shares summing to the whole.
#[test]
fn a_routes_limits_split_evenly_over_its_coordinators() {
    let route = FlowLimits {
        max_in_flight: Some(10),
        rate_thousandths: Some(8_500),
        shards: 1,
    };
    let split = route.split(3).unwrap();
    let mut in_flight = [0u32; 3];
    let mut rate = [0u64; 3];
    for n in 0..3_000u64 {
        let holder = hex::encode(sha2::Sha256::digest(n.to_be_bytes()));
        let (shard, share) = split.share(&holder);
        assert_eq!(share.shards, 1, "a coordinator is sent its share");
        in_flight[shard as usize] = share.max_in_flight.unwrap();
        rate[shard as usize] = share.rate_thousandths.unwrap();
    }
    assert_eq!(in_flight, [4, 3, 3]);
    assert_eq!(in_flight.iter().sum::<u32>(), 10);
    assert_eq!(rate, [2_834, 2_833, 2_833]);
    assert_eq!(rate.iter().sum::<u64>(), 8_500);
    // One coordinator: the route's limits as they are.
    let (shard, share) = route.split(1).unwrap().share("anyone");
    assert_eq!(
        (shard, share.max_in_flight, share.rate_thousandths),
        (0, Some(10), Some(8_500))
    );
    assert!(route.split(8).is_ok());
    assert!(route.split(9).unwrap_err().contains("RATE_PER_SECOND"));
    assert!(route.split(11).unwrap_err().contains("MAX_IN_FLIGHT"));
    let rate_only = FlowLimits {
        max_in_flight: None,
        rate_thousandths: Some(2_000),
        shards: 1,
    };
    assert!(rate_only.split(2).is_ok());
    assert!(rate_only.split(3).unwrap_err().contains("RATE_PER_SECOND"));
    assert_eq!(shard_coordinator_name("r", 0), coordinator_name("r"));
    assert_ne!(shard_coordinator_name("r", 1), coordinator_name("r"));
}
