// Compiled (not run) by the build: the middlewares fit the real types of
// Express, Hono, better-sqlite3 and a Worker's fetch handler.
import Database from "better-sqlite3";
import express from "express";
import { Hono, type Context } from "hono";
import {
  idemgateExpress,
  idemgateHono,
  SqliteFenceStore,
  verify,
  withIdemgate,
  type Forwarded,
} from "../../src/index.js";

const store = new SqliteFenceStore(new Database(":memory:"));

const app = express();
app.post("/payments", express.raw({ type: "*/*" }), idemgateExpress({ secret: "whsec", store }), (req, res) => {
  const forwarded: Forwarded | undefined = req.idemgate;
  res.json({ key: forwarded?.key });
});

type HonoEnv = { Variables: { idemgate: Forwarded }; Bindings: { FORWARD_SECRET: string } };
const hono = new Hono<HonoEnv>();
hono.use("/payments", idemgateHono<Context<HonoEnv>>((c) => ({ secret: c.env.FORWARD_SECRET })));
hono.post("/payments", (c) => c.json({ epoch: c.get("idemgate").epoch }));

interface Env {
  FORWARD_SECRET: string;
}
export const worker = {
  fetch: withIdemgate(
    async (_request: Request, forwarded: Forwarded, _env: Env) => Response.json({ scope: forwarded.scope }),
    (_request, env) => ({ secret: env.FORWARD_SECRET }),
  ),
};

export async function fromPairs(): Promise<number> {
  const forwarded = await verify({
    method: "POST",
    pathAndQuery: "/",
    headers: [["Idempotency-Key", '"k"']],
    body: new Uint8Array(),
    secret: "whsec",
  });
  return forwarded.epoch;
}
