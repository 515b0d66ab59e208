"""Draws bench/results/throughput.png from bench/results/latest.json:
throughput, p50/p99 latency and the worker process's CPU time per kind of
request, under the wrangler dev command and on wrangler's dev server without
the devtools inspector, from one run."""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_dir = pathlib.Path(__file__).parent / "results"
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
