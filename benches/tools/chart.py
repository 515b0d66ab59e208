"""Draws benches/results/throughput.png from benches/results/latest.json:
throughput, p50/p99 latency and the worker process's CPU time per kind of
request, under the wrangler dev command and on wrangler's dev server without
the devtools inspector, from one run."""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_dir = pathlib.Path(__file__).parent.parent / "results"
results = json.loads((results_dir / "latest.json").read_text())
setups = [
    ("wrangler dev", results["throughput"], "#9aa5b1"),
    ("without the devtools inspector", results["without_inspector"]["throughput"], "#2f80ed"),
]
kinds = [row["kind"].split(":")[0] for row in setups[0][1]]
positions = range(len(kinds))
width = 0.4

figure, (rate, latency, cpu) = plt.subplots(1, 3, figsize=(17, 4.4))
for offset, (label, rows, color) in zip((-width / 2, width / 2), setups):
    bars = rate.bar([p + offset for p in positions], [row["per_second"] for row in rows], width=width, label=label, color=color)
    for bar, row in zip(bars, rows):
        rate.annotate(f'{row["per_second"]:.0f}\n{row["ratio_to_baseline"]:.2f}x', (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                      ha="center", va="bottom", fontsize=7)
rate.set_xticks(list(positions), kinds)
rate.set_title(f'Throughput, {results["concurrency"]} connections (x GET passthrough of the same setup)', fontsize=9)
rate.set_ylabel("requests per second")
rate.margins(y=0.25)
rate.legend(fontsize=8)

for offset, (label, rows, color) in zip((-width / 2, width / 2), setups):
    latency.bar([p + offset for p in positions], [row["p50_ms"] for row in rows], width=width, color=color, label=f"{label}: p50")
    latency.scatter([p + offset for p in positions], [row["p99_ms"] for row in rows], color="black", marker="_", s=200, zorder=3)
latency.set_xticks(list(positions), kinds)
latency.set_title("Latency: bars p50, ticks p99", fontsize=9)
latency.set_ylabel("milliseconds")

for offset, (label, rows, color) in zip((-width / 2, width / 2), setups):
    values = [row.get("worker_cpu_ms_per_request") or 0 for row in rows]
    bars = cpu.bar([p + offset for p in positions], values, width=width, color=color, label=label)
    for bar, row in zip(bars, rows):
        if row.get("worker_cpu_ratio_to_floor"):
            cpu.annotate(f'{row["worker_cpu_ratio_to_floor"]:.1f}x', (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         ha="center", va="bottom", fontsize=7)
cpu.set_xticks(list(positions), kinds)
cpu.set_title("CPU of the worker's workerd process per request (x floor)", fontsize=9)
cpu.set_ylabel("milliseconds")
cpu.margins(y=0.15)

figure.suptitle("idemgate (release wasm), one run on a 2-core machine, load client on the same machine", fontsize=10)
figure.tight_layout()
figure.savefig(results_dir / "throughput.png", dpi=110)
print(f"wrote {results_dir / 'throughput.png'}")

# docs/images/scaling.png: how CPU per request grows with the objects alive,
# the duplicates per key and the body size, from the same run.
scaling = results.get("scaling")
bodies = results.get("bodies")
if scaling and bodies:
    figure, (by_keys, by_duplicates, by_size) = plt.subplots(1, 3, figsize=(17, 4.4))
    rows = scaling["by_keys"]
    by_keys.plot([row["live_objects"] for row in rows], [row["cpu_ms_per_request"] for row in rows], marker="o", color="#2f80ed")
    paced = rows[0].get("paced_per_second")
    by_keys.set_xlabel("distinct keys (one Durable Object each)")
    by_keys.set_ylabel("workerd CPU ms per first delivery")
    by_keys.set_ylim(bottom=0)
    pace = f", {paced:g} a second" if paced else ", unpaced"
    by_keys.set_title(f"First deliveries as keys grow (steps of {rows[0]['live_objects']:,}{pace})", fontsize=9)

    rows = scaling["by_duplicates"]
    counts = [row["duplicates_per_key"] for row in rows]
    by_duplicates.plot(counts, [row["cpu_ms_per_request"] for row in rows], marker="o", color="#2f80ed", label="CPU ms per delivery")
    by_duplicates.set_xscale("log")
    by_duplicates.set_xlabel("identical deliveries per key")
    by_duplicates.set_ylabel("workerd CPU ms per delivery")
    by_duplicates.set_ylim(bottom=0)
    objects = by_duplicates.twinx()
    objects.plot(counts, [row["object_requests_per_request"] for row in rows], marker="s", color="#9aa5b1", label="object requests per delivery")
    objects.set_ylabel("Durable Object requests per delivery")
    objects.set_ylim(bottom=0)
    by_duplicates.set_title("Duplicates per key: cost falls toward a replay's", fontsize=9)
    by_duplicates.legend(loc="upper right", fontsize=7)
    objects.legend(loc="center right", fontsize=7)

    rows = [row for row in bodies["rows"] if row.get("cpu_ms_per_delivery")]
    by_size.plot([row["bytes"] / 1024 for row in rows], [row["cpu_ms_per_delivery"] for row in rows], marker="o", color="#2f80ed")
    by_size.axhline(10, color="#d64545", linestyle="--", linewidth=1, label="free plan: 10 ms CPU")
    by_size.set_xscale("log")
    by_size.set_yscale("log")
    by_size.set_xlabel("JSON body, KiB")
    by_size.set_ylabel("workerd CPU ms per first delivery")
    by_size.set_title("Body size", fontsize=9)
    by_size.legend(fontsize=7)

    figure.suptitle("idemgate scaling (release wasm, wrangler dev without the inspector, one run on 2 cores)", fontsize=10)
    figure.tight_layout()
    images = pathlib.Path(__file__).parent.parent.parent / "docs" / "images"
    figure.savefig(images / "scaling.png", dpi=100)
    print(f"wrote {images / 'scaling.png'}")
