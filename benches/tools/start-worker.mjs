// Starts the built worker on wrangler's own dev server with the devtools
// inspector off: `node benches/tools/start-worker.mjs <wrangler.toml> <port> <persist dir>`.
// The `wrangler dev` command always attaches a devtools bridge that sends
// every console call and every subrequest's network events to Node.js, which
// writes each to its debug log; production has nothing like it. The gateway
// benchmark runs each kind of request both ways, to show what it costs.
import { unstable_startWorker } from "wrangler";

const [config, port, persist] = process.argv.slice(2);
const worker = await unstable_startWorker({
  config,
  dev: {
    inspector: false,
    watch: false,
    persist,
    logLevel: "warn",
    server: { hostname: "127.0.0.1", port: Number(port) },
  },
});
await worker.ready;
console.log(`ready on ${await worker.url}`);
const stop = async () => {
  await worker.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
