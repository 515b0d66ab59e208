// Starts wrangler's dev server, the same DevEnv that `wrangler dev` runs
// (bundle, Miniflare, workerd, devtools inspector), and prints the address
// of the user worker's own socket:
// `node dev-server.mjs <wrangler.toml> <port> <inspector port> <persist dir> <log level> [registry dir]`.
// With a registry directory, workers started with the same one reach each
// other through their service bindings, as `wrangler dev` sessions do.
//
// The end-to-end tests send their requests to that socket, not to the
// proxy in front of it. The proxy keeps idle connections to the user
// worker, which closes them after 5 s idle; a POST the proxy sends on one
// as it closes fails, and the proxy answers 503 "Your worker restarted
// mid-request" though nothing restarted (docs/wrangler-dev-proxy-race.md).
// Production has no such proxy: Cloudflare's edge hands requests to the
// worker.
import { unstable_DevEnv as DevEnv } from "wrangler";

const [config, port, inspectorPort, persist, logLevel, registry] = process.argv.slice(2);
const devEnv = new DevEnv();
const sendToProxy = devEnv.proxy.onReloadComplete.bind(devEnv.proxy);
devEnv.proxy.onReloadComplete = (event) => {
  sendToProxy(event);
  const userWorker = event.proxyData.userWorkerUrl;
  console.log(`user worker on ${userWorker.protocol}//${userWorker.hostname}:${userWorker.port}`);
};
const worker = await devEnv.startWorker({
  config,
  dev: {
    inspector: { port: Number(inspectorPort) },
    watch: false,
    persist,
    logLevel,
    // `GET /__scheduled` runs the Cron Trigger (the sweep) on demand.
    testScheduled: true,
    server: { hostname: "127.0.0.1", port: Number(port) },
    ...(registry ? { registry } : {}),
  },
});
await worker.ready;
const stop = async () => {
  await worker.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
