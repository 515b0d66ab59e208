#!/usr/bin/env python3
"""Ranges over several runs of `scripts/bench` (their results files), as the
Markdown tables docs/benchmarks.md quotes:

    python3 benches/tools/ranges.py benches/results/2026-11-30-run*.json
"""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import cost  # noqa: E402

KINDS = ["floor: worker only", "baseline: GET passthrough", "first deliveries", "replays"]


def rows(result, setup, reference=False):
    block = result["reference"] if reference else result
    if setup == "plain":
        block = block["without_inspector"]
    return {row["kind"]: row for row in block["throughput"]}


def storms(result, setup):
    block = result if setup == "cli" else result["without_inspector"]
    return {f"{s['keys']} x {s['deliveries_per_key']}": s for s in block["storms"]}


def span(values, digits=2):
    low, high = min(values), max(values)
    text = f"{low:,.{digits}f}" if low == high else f"{low:,.{digits}f}-{high:,.{digits}f}"
    return text


def main():
    runs = [json.load(open(path)) for path in sys.argv[1:]]
    print(f"{len(runs)} runs\n")
    print("| kind | setup | req/s | x baseline | x reference | x own floor | worker CPU ms | CPU x floor | reference CPU ms | errors |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind in KINDS:
        for setup, name in (("cli", "command"), ("plain", "no inspector")):
            ours = [rows(run, setup)[kind] for run in runs]
            theirs = [rows(run, setup, reference=True)[kind] for run in runs]
            floors = [rows(run, setup)["floor: worker only"] for run in runs]
            print(
                f"| {kind} | {name} | {span([r['per_second'] for r in ours], 0)}"
                f" | {span([r['ratio_to_baseline'] for r in ours])}"
                f" | {span([o['per_second'] / t['per_second'] for o, t in zip(ours, theirs)])}"
                f" | {span([o['per_second'] / f['per_second'] for o, f in zip(ours, floors)])}"
                f" | {span([r['worker_cpu_ms_per_request'] for r in ours], 3)}"
                f" | {span([r['worker_cpu_ratio_to_floor'] for r in ours])}"
                f" | {span([r['worker_cpu_ms_per_request'] for r in theirs], 3)}"
                f" | {sum(r['errors'] for r in ours)} |"
            )
    print()
    print("| storm | setup | forwards per key | x target | duplicates p50 / p99 ms | failed |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for storm in ("20 x 50", "100 x 100"):
        for setup, name in (("cli", "command"), ("plain", "no inspector")):
            ours = [storms(run, setup)[storm] for run in runs]
            print(
                f"| {storm} | {name} | {span([s['forwards_per_key'] for s in ours])}"
                f" | {span([s['ratio_to_target'] for s in ours])}"
                f" | {span([s['duplicate_p50_ms'] for s in ours], 0)} / {span([s['duplicate_p99_ms'] for s in ours], 0)}"
                f" | {sum(s['failed'] for s in ours)} |"
            )
    print_isolate_cpu(runs)
    print_cost(runs)
    print_scaling(runs)
    print()
    sizes = [run["wasm"]["gzip_bytes"] for run in runs]
    print(f"release wasm: {span(sizes, 0)} bytes gzip ({max(sizes) / 1024:.1f} KiB at most)")
    core = [{row["body"]: row["median_us"] for row in run["core"]} for run in runs]
    print(f"pure core per delivery: {span([c['1KiB'] for c in core], 1)} us (1 KiB), {span([c['64KiB'] for c in core], 0)} us (64 KiB)")
    parts = [c for c in core if "64KiB canonical, tree" in c]
    if parts:
        # Same-run ratios: the machine's speed cancels out.
        one_pass = [c["64KiB canonical, one pass"] for c in parts]
        tree = [c["64KiB canonical, tree"] for c in parts]
        sha = [c["64KiB sha256"] for c in parts]
        print(
            f"64 KiB parts: canonical one pass {span(one_pass, 0)} us, tree {span(tree, 0)} us"
            f" (one pass x tree {span([o / t for o, t in zip(one_pass, tree)], 2)}), SHA-256 {span(sha, 0)} us a pass"
        )


def print_isolate_cpu(runs):
    """The isolate's CPU per request (inspector profile, under the command)."""
    print()
    print("| kind | idemgate isolate CPU ms | wasm / JavaScript / runtime / GC ms | reference ms | x reference |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind in KINDS:
        pairs = [
            (rows(run, "cli")[kind].get("isolate_cpu_ms_per_request"), rows(run, "cli", reference=True)[kind].get("isolate_cpu_ms_per_request"))
            for run in runs
        ]
        pairs = [(o, t) for o, t in pairs if o and t and t.get("busy_ms")]
        if not pairs:
            continue
        ours, theirs = [o for o, _ in pairs], [t for _, t in pairs]
        split = " / ".join(span([o[name] for o in ours], 3) for name in ("wasm", "javascript", "program", "gc"))
        print(
            f"| {kind} | {span([o['busy_ms'] for o in ours], 3)} | {split}"
            f" | {span([t['busy_ms'] for t in theirs], 3)}"
            f" | {span([o['busy_ms'] / t['busy_ms'] for o, t in zip(ours, theirs)])} |"
        )


def print_cost(runs):
    """Dollars per million of each kind, and each kind's floor."""
    print()
    print("| per million | USD | floor USD | AE points per delivery |")
    print("| --- | ---: | ---: | ---: |")
    for kind, cpu_kind in (("first delivery", "first deliveries"), ("replay", "replays"), ("async delivery", "first deliveries")):
        dollars, floors, points = [], [], []
        for run in runs:
            cpu_ms = rows(run, "plain")[cpu_kind]["worker_cpu_ms_per_request"]
            measured = next(c for c in run["cost"] if c["kind"] == kind)
            dollars.append(cost.dollars_per_million(cost.per_delivery(measured, cpu_ms)))
            floors.append(cost.dollars_per_million(cost.floor_of(kind, cpu_ms)))
            points.append(measured["metric_points"])
        print(f"| {kind} | {span(dollars)} | {span(floors)} | {span(points, 3)} |")


def print_scaling(runs):
    """CPU per request against live objects and duplicates per key."""
    measured = [run["scaling"] for run in runs if run.get("scaling")]
    if not measured:
        return
    print()
    print("| objects alive | workerd CPU ms per first delivery | req/s |")
    print("| ---: | ---: | ---: |")
    for index, row in enumerate(measured[0]["by_keys"]):
        steps = [scaling["by_keys"][index] for scaling in measured]
        print(f"| {row['live_objects']:,} | {span([s['cpu_ms_per_request'] for s in steps])} | {span([s['per_second'] for s in steps], 0)} |")
    print()
    print("| deliveries per key | workerd CPU ms per delivery | object requests per delivery | req/s |")
    print("| ---: | ---: | ---: | ---: |")
    for index, row in enumerate(measured[0]["by_duplicates"]):
        steps = [scaling["by_duplicates"][index] for scaling in measured]
        print(
            f"| {row['duplicates_per_key']:,} | {span([s['cpu_ms_per_request'] for s in steps])}"
            f" | {span([s['object_requests_per_request'] for s in steps], 3)} | {span([s['per_second'] for s in steps], 0)} |"
        )


if __name__ == "__main__":
    main()
