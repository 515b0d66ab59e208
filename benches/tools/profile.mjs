// Samples the CPU of a worker running under `wrangler dev` through its
// devtools inspector, and prints where the time went, top down:
//
//   scripts/dev &                       # or any wrangler dev, inspector on 9229
//   node --experimental-websocket benches/tools/profile.mjs 10 [9229] &
//   <send load for those 10 seconds>
//
// Writes target/worker.cpuprofile too (Chrome DevTools opens it). The
// inspector itself adds cost, so read the shares, not the rates.
//
// `profile.mjs --busy PORT` is the benchmark's measure of CPU per request:
// it prints `profiling` once sampling runs, stops when its standard input
// closes, and prints one JSON line: the isolate's busy time (every sample
// but idle ones) and where it went.
import { writeFileSync } from "node:fs";

const busyMode = process.argv[2] === "--busy";
const SAMPLING_US = 200;
const [seconds = "10", port = "9229"] = busyMode ? ["0", process.argv[3]] : process.argv.slice(2);
// wrangler's inspector proxy wants an Origin it knows.
const socket = new WebSocket(`ws://127.0.0.1:${port}/ws`, {
  headers: { Origin: "http://localhost" },
});
const pending = new Map();
let lastId = 0;
const send = (method, params = {}) =>
  new Promise((resolve) => {
    lastId += 1;
    pending.set(lastId, resolve);
    socket.send(JSON.stringify({ id: lastId, method, params }));
  });
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  pending.get(message.id)?.(message);
  pending.delete(message.id);
};
socket.onclose = () => process.exit(1);
socket.onerror = () => {
  console.error(`no inspector on 127.0.0.1:${port}`);
  process.exit(1);
};
socket.onopen = async () => {
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: SAMPLING_US });
  await send("Profiler.start");
  if (busyMode) {
    // An inspector that stops answering must not hang the benchmark.
    setTimeout(() => process.exit(1), 120_000).unref();
    console.log("profiling");
    await new Promise((resolve) => {
      process.stdin.on("end", resolve).resume();
    });
    const { result } = await send("Profiler.stop");
    console.log(JSON.stringify(busyTime(result.profile)));
    process.exit(0);
  }
  await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
  const { result } = await send("Profiler.stop");
  writeFileSync("target/worker.cpuprofile", JSON.stringify(result.profile));
  printTree(result.profile, 1.5);
  process.exit(0);
};

/// Each frame with its inclusive and self share of the samples, children
/// under their parents, frames under `minPercent` left out.
function printTree(profile, minPercent) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const own = new Map();
  for (const sample of profile.samples) own.set(sample, (own.get(sample) ?? 0) + 1);
  const inclusive = new Map();
  const total = (node) => {
    if (!inclusive.has(node.id)) {
      const children = (node.children ?? []).map((id) => total(nodes.get(id)));
      inclusive.set(node.id, children.reduce((a, b) => a + b, own.get(node.id) ?? 0));
    }
    return inclusive.get(node.id);
  };
  const samples = profile.samples.length;
  const percent = (count) => ((100 * count) / samples).toFixed(1).padStart(5);
  const walk = (node, depth) => {
    if ((100 * total(node)) / samples < minPercent) return;
    const frame = node.callFrame;
    const where = frame.url ? ` ${frame.url.split("/").pop()}:${frame.lineNumber + 1}` : "";
    const name = `${frame.functionName || "(anonymous)"}${where}`.slice(0, 110);
    console.log(`${percent(total(node))}% self ${percent(own.get(node.id) ?? 0)}%  ${"  ".repeat(depth)}${name}`);
    const children = (node.children ?? []).map((id) => nodes.get(id));
    children.sort((a, b) => total(b) - total(a)).forEach((child) => walk(child, depth + 1));
  };
  console.log(`${samples} samples`);
  walk(profile.nodes[0], 0);
}

/// Milliseconds of the profile by what the isolate was doing: idle (waiting
/// for work), and, busy, in wasm (any wasm frame on the stack), in
/// JavaScript, in the runtime's native code ("(program)") or collecting
/// garbage. V8 takes a sample at each tick of its sampling thread while
/// workerd holds the isolate's lock, and none while it does not, so each
/// sample stands for one tick (the median gap between samples that follow
/// each other, about the interval asked for), and the rest of the wall
/// time is `unsampled`: the isolate was not running. Sampled wall-clock
/// time: on a shared machine a preempted thread still counts.
function busyTime(profile) {
  const gaps = profile.timeDeltas.filter((delta) => delta > 0 && delta <= 2 * SAMPLING_US).sort((a, b) => a - b);
  const tick = gaps.length ? gaps[Math.floor(gaps.length / 2)] : SAMPLING_US;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const bucketOf = new Map();
  const bucket = (id) => {
    if (bucketOf.has(id)) return bucketOf.get(id);
    const name = nodes.get(id).callFrame.functionName;
    let found;
    if (name === "(idle)") found = "idle";
    else if (name === "(program)") found = "program";
    else if (name === "(garbage collector)") found = "gc";
    else {
      found = "javascript";
      for (let at = id; at !== undefined; at = parent.get(at)) {
        const frame = nodes.get(at).callFrame;
        if (frame.url.includes("wasm") || frame.functionName.startsWith("$")) {
          found = "wasm";
          break;
        }
      }
    }
    bucketOf.set(id, found);
    return found;
  };
  const ms = { idle: 0, wasm: 0, javascript: 0, program: 0, gc: 0 };
  for (const id of profile.samples) ms[bucket(id)] += tick / 1000;
  const busy = ms.wasm + ms.javascript + ms.program + ms.gc;
  const wall = (profile.endTime - profile.startTime) / 1000;
  return { samples: profile.samples.length, tick_us: tick, wall_ms: wall, busy_ms: busy, ...ms, unsampled: Math.max(0, wall - busy - ms.idle) };
}
