"""Draws bench/results/throughput.png from bench/results/latest.json:
throughput and p50/p99 latency per kind of request, from one run."""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_dir = pathlib.Path(__file__).parent / "results"
results = json.loads((results_dir / "latest.json").read_text())
rows = results["throughput"]
kinds = [row["kind"].split(":")[0] for row in rows]

figure, (rate, latency) = plt.subplots(1, 2, figsize=(11, 4.2))
bars = rate.bar(kinds, [row["per_second"] for row in rows], color=["#9aa5b1", "#52606d", "#f0b429", "#2f80ed"])
for bar, row in zip(bars, rows):
    rate.annotate(f'{row["per_second"]:.0f}\n({row["ratio_to_baseline"]:.2f}x)', (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                  ha="center", va="bottom", fontsize=8)
rate.set_title(f'Throughput, {results["concurrency"]} connections (x GET passthrough)')
rate.set_ylabel("requests per second")
rate.margins(y=0.2)

positions = range(len(rows))
latency.bar([p - 0.2 for p in positions], [row["p50_ms"] for row in rows], width=0.4, label="p50")
latency.bar([p + 0.2 for p in positions], [row["p99_ms"] for row in rows], width=0.4, label="p99")
latency.set_xticks(list(positions), kinds)
latency.set_title("Latency")
latency.set_ylabel("milliseconds")
latency.legend()

figure.suptitle("idemgate under wrangler dev (release wasm), one run on a 2-core machine", fontsize=10)
figure.tight_layout()
figure.savefig(results_dir / "throughput.png", dpi=110)
print(f"wrote {results_dir / 'throughput.png'}")
