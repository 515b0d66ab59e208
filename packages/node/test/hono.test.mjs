// idemgateHono in a Hono app served by @hono/node-server on a real port.
import { Hono } from "hono";
import { idemgateHono } from "../dist/esm/index.js";
import { listenFetch } from "./node-server.mjs";
import { originScenarios } from "./origin-scenarios.mjs";

originScenarios("hono", (options, route) => {
  const app = new Hono();
  app.use("/payments", idemgateHono(options));
  app.post("/payments", async (c) => {
    const body = new Uint8Array(await c.req.arrayBuffer());
    const answer = await route.handle({ url: c.req.url, forwarded: c.get("idemgate"), body });
    c.header("set-cookie", "session=caller-1");
    return c.json(answer.json, answer.status);
  });
  return listenFetch(app.fetch);
});
