// Samples the CPU of a worker running under `wrangler dev` through its
// devtools inspector, and prints where the time went, top down:
//
//   scripts/dev &                       # or any wrangler dev, inspector on 9229
//   node --experimental-websocket bench/profile.mjs 10 [9229] &
//   <send load for those 10 seconds>
//
// Writes target/worker.cpuprofile too (Chrome DevTools opens it). The
// inspector itself adds cost, so read the shares, not the rates.
import { writeFileSync } from "node:fs";

const [seconds = "10", port = "9229"] = process.argv.slice(2);
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
socket.onerror = () => {
  console.error(`no inspector on 127.0.0.1:${port}`);
  process.exit(1);
};
socket.onopen = async () => {
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 200 });
  await send("Profiler.start");
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
