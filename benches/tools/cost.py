#!/usr/bin/env python3
"""What a million deliveries of each kind cost on Cloudflare, from the
counts the benchmark measured (benches/results/latest.json) and the published
prices below. Prints a Markdown table; `scripts/bench` runs it last.

Overage prices of the Workers Paid plan, read on 2026-11-30 (the included
monthly amounts are left out: they are per account, not per delivery):
  Workers requests and CPU   https://developers.cloudflare.com/workers/platform/pricing/
  Durable Objects            https://developers.cloudflare.com/durable-objects/platform/pricing/
  D1                         https://developers.cloudflare.com/d1/platform/pricing/
  Analytics Engine           https://developers.cloudflare.com/analytics/analytics-engine/pricing/
  Workers Logs (Observability pricing from 2026-12-01)
                             https://developers.cloudflare.com/observability/pricing/
"""

import json
import pathlib
import sys

PRICE_PER_MILLION = {
    "requests": 0.30,  # Workers requests
    "cpu_ms": 0.02,  # Workers CPU time, per million CPU-ms
    "object_requests": 0.15,  # each RPC call and each alarm invocation
    "gb_seconds": 12.50,  # Durable Object duration, 128 MB while active
    "rows_written": 1.00,  # SQLite rows written; setAlarm and deletes count as one
    "rows_read": 0.001,
    "index_writes": 1.00,  # index rows written (D1 when measured; a shard's row now)
    "metric_points": 0.25,  # Analytics Engine data points
}
LOG_PRICE_PER_GB = 0.25  # Observability ingestion
LOG_LINE_BYTES = 250  # one decision line with its enriched attributes, measured locally at 180-230
OBJECT_GB = 0.128
ORIGIN_MS = 100  # assumed origin time per forward: the object is active while it waits
OBJECT_OVERHEAD_MS = 10  # assumed active time of a call that does not forward

# What a receipt's retention expiry adds to every first delivery, from the
# code rather than measured: one alarm invocation, one row deleted and one
# log line (the `expired` event; its metric point is summed with others,
# as the measured kinds' are).
EXPIRY = {"object_requests": 1, "rows_written": 1, "log_lines": 1}


# The floor: what each kind must write, whatever the code, to keep its
# guarantees (docs/benchmarks.md, "The floor"); priced as the measured
# kinds are, with their measured CPU. Each line says which guarantee the
# quantity pays for. Metric points are left out: SPEC asks for counts,
# which may be summed in batches.
FLOOR = {
    "first delivery": {
        # the request, and the object that serialises the key
        "object_requests": 1,
        # `in_flight` with its epoch before the forward (one forward,
        # fenced, even across a restart); the outcome before the answer
        # (replays); the retention alarm; the deletion when it fires
        "rows_written": 2 + 1 + 1,
        # the retention alarm's invocation
        "alarm_invocations": 1,
        # SPEC §9: `forwarded`, then `expired`
        "log_lines": 2,
    },
    "replay": {
        # answered by the isolate that saw it: nothing written
        "object_requests": 0,
        "rows_written": 0,
        "alarm_invocations": 0,
        "log_lines": 0,
    },
    "async delivery": {
        # the acceptance; the forward can start in the same invocation
        "object_requests": 1,
        # the receipt, written already in flight with its lease (one row
        # for acceptance and `in_flight`); the alarm at the lease's end (a
        # crash mid-forward); the outcome; the alarm moved to retention;
        # the deletion
        "rows_written": 1 + 1 + 1 + 1 + 1,
        # the retention alarm's invocation
        "alarm_invocations": 1,
        # the index row (after the 202 since v5, repaired from the
        # receipt's alarm), its removal after
        "index_writes": 2,
        # `queued`, `forwarded`, `expired`
        "log_lines": 3,
    },
}


def object_gb_seconds(calls, forwards):
    """Durable Object duration: each call active for the assumed overhead,
    a forward also for the origin's time."""
    return OBJECT_GB * (calls * OBJECT_OVERHEAD_MS + (ORIGIN_MS if forwards else 0)) / 1000


def floor_of(kind, cpu_ms):
    """The billed quantities of the floor of a kind, before prices."""
    floor = FLOOR[kind]
    forwards = kind != "replay"
    calls = floor["object_requests"]
    quantities = dict.fromkeys(PRICE_PER_MILLION, 0.0)
    quantities.update(
        {
            "requests": 1,
            "cpu_ms": cpu_ms,
            "object_requests": calls + floor["alarm_invocations"],
            "gb_seconds": object_gb_seconds(calls, forwards),
            "rows_written": floor["rows_written"],
            "index_writes": floor.get("index_writes", 0),
        }
    )
    quantities["log_lines"] = floor["log_lines"]
    return quantities


def per_delivery(cost, cpu_ms):
    """The billed quantities of one delivery of a kind, before prices."""
    storage = cost["storage"]
    forwards = cost["kind"] in ("first delivery", "failure", "async delivery")
    quantities = {
        "requests": 1,
        "cpu_ms": cpu_ms,
        "object_requests": cost["object_requests"] + cost.get("alarm_invocations", 0),
        "gb_seconds": object_gb_seconds(cost["object_requests"], forwards),
        "rows_written": storage["writes"] + storage["alarm_writes"],
        "rows_read": storage["reads"],
        "index_writes": storage["index_writes"],
        "metric_points": cost["metric_points"],
        "log_lines": cost["log_lines"],
    }
    if forwards:
        for name, count in EXPIRY.items():
            quantities[name] += count
    return quantities


def dollars_per_million(quantities):
    total = sum(PRICE_PER_MILLION[name] * quantities[name] for name in PRICE_PER_MILLION)
    return total + quantities["log_lines"] * LOG_LINE_BYTES * LOG_PRICE_PER_GB / 1e3


def main():
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "benches/results/latest.json")
    results = json.loads(path.read_text())
    cpu = {row["kind"]: row["worker_cpu_ms_per_request"] for row in results["without_inspector"]["throughput"]}
    cpu_of = {
        "first delivery": cpu["first deliveries"],
        "replay": cpu["replays"],
        "async delivery": cpu["first deliveries"],
    }
    print("| per million | requests | DO requests | rows written | D1 rows written | AE points | log lines | worker CPU s | USD | floor USD |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cost in results["cost"]:
        if cost["kind"] not in cpu_of:
            continue
        q = per_delivery(cost, cpu_of[cost["kind"]])
        floor = dollars_per_million(floor_of(cost["kind"], cpu_of[cost["kind"]]))
        print(
            f"| {cost['kind']} | 1 M | {q['object_requests']:.2f} M | {q['rows_written']:.0f} M"
            f" | {q['index_writes']:.0f} M | {q['metric_points']:.2f} M | {q['log_lines']:.0f} M"
            f" | {q['cpu_ms'] * 1000:,.0f} | {dollars_per_million(q):.2f} | {floor:.2f} |"
        )
    reconcile = results.get("reconcile")
    if reconcile:
        for name, q in reconciliation(reconcile).items():
            print(
                f"| {name} | - | {q['object_requests']:.2f} M | {q['rows_written']:.2f} M | - | {q['metric_points']:.2f} M"
                f" | {q['log_lines']:.2f} M | - | {dollars_per_million(q):.2f} | - |"
            )
    drain = results.get("drain")
    if drain:
        q = flow_control_extra(drain)
        print(
            f"| flow control, extra per delivery of a backlog | - | {q['object_requests']:.2f} M"
            f" | {q['rows_written']:.1f} M | - | {q['metric_points']:.1f} M | {q['log_lines']:.1f} M"
            f" | - | {dollars_per_million(q):.2f} | - |"
        )


def reconciliation(measured):
    """Per million events a reconciliation run lists (SPEC §11), from the
    benchmark's two passes over its window: one that fills every event
    (each a first delivery of a sync route, forwarded once) and one that
    fills none. A run is one invocation of the route's object and writes 5
    rows (its state and route, before and after, and its alarm); each
    listed event is one call to its key's object, which reads its receipt
    row. The API's own requests (one per 100 events) are subrequests, not
    billed. Worker CPU is not measured here."""
    rows = {}
    for name, pass_name in (
        ("reconciliation, per event listed and already received", "listing"),
        ("reconciliation, per event filled (its first delivery included)", "filling"),
    ):
        run = measured[pass_name]
        listed = max(run["listed"], 1)
        runs = run["runs"] / listed
        quantities = dict.fromkeys(PRICE_PER_MILLION, 0.0)
        calls = run["object_requests"] / listed
        quantities.update(
            {
                "object_requests": calls + runs,
                "gb_seconds": object_gb_seconds(calls + runs, pass_name == "filling"),
                "rows_written": 5 * runs,
                "rows_read": 1,
                "metric_points": run["filled"] / listed,
            }
        )
        quantities["log_lines"] = run["log_lines"] / listed
        if pass_name == "filling":
            storage = measured["filled_receipt_storage"]
            quantities["rows_written"] += storage["writes"] + storage["alarm_writes"]
            for name_, count in EXPIRY.items():
                quantities[name_] += count
        rows[name] = quantities
    return rows


def flow_control_extra(drain):
    """What a delivery of a backlog on a limited route adds (nearly all of
    them wait for their permit: the share is in `waited_for_permit`), from
    the drain benchmark: the backlog's counts less the unlimited route's,
    and the receipt's own extra row and alarm (its next attempt
    moved while it waits) from the two runs with an instant origin."""
    backlog = drain["backlog"]["per_delivery"]
    free = drain["quick_unlimited"]["per_delivery"]
    limited = drain["quick_limited"]["per_delivery"]

    def extra(run, name):
        return run[name] - free[name]

    receipt = sum(limited["receipt"][name] - free["receipt"][name] for name in ("writes", "alarm_writes"))
    requests = extra(backlog, "object_requests")
    quantities = dict.fromkeys(PRICE_PER_MILLION, 0.0)
    quantities.update(
        {
            "object_requests": requests,
            "gb_seconds": object_gb_seconds(requests, False),
            "rows_written": backlog["coordinator_rows_written"] + backlog["coordinator_alarm_writes"] + receipt,
            "metric_points": extra(backlog, "metric_points"),
        }
    )
    quantities["log_lines"] = extra(backlog, "log_lines")
    return quantities


if __name__ == "__main__":
    main()
