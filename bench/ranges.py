#!/usr/bin/env python3
"""Ranges over several runs of `scripts/bench` (their results files), as the
Markdown tables docs/benchmarks.md quotes:

    python3 bench/ranges.py bench/results/2026-11-30-run*.json
"""

import json
import sys

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
    print()
    sizes = [run["wasm"]["gzip_bytes"] for run in runs]
    print(f"release wasm: {span(sizes, 0)} bytes gzip ({max(sizes) / 1024:.1f} KiB at most)")
    core = [{row["body"]: row["median_us"] for row in run["core"]} for run in runs]
    print(f"pure core per delivery: {span([c['1KiB'] for c in core], 1)} us (1 KiB), {span([c['64KiB'] for c in core], 0)} us (64 KiB)")


if __name__ == "__main__":
    main()
