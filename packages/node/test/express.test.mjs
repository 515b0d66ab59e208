// idemgateExpress in an Express app listening on a real port.
import assert from "node:assert/strict";
import { test } from "node:test";
import express from "express";
import { idemgateExpress } from "../dist/esm/index.js";
import { post, SECRET } from "./helpers.mjs";
import { originScenarios, paymentsRoute } from "./origin-scenarios.mjs";

function listen(app) {
  return new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => {
      resolve({
        base: `http://127.0.0.1:${server.address().port}`,
        // Keep-alive sockets of the test's own clients would hold close() open.
        close: () =>
          new Promise((done) => {
            server.close(done);
            server.closeAllConnections();
          }),
      });
    });
  });
}

function paymentsApp(options, route, bodyParser = express.raw({ type: "*/*" })) {
  const app = express();
  const parsers = bodyParser ? [bodyParser] : [];
  app.post("/payments", ...parsers, idemgateExpress(options), async (req, res, next) => {
    try {
      const answer = await route.handle({ url: req.originalUrl, forwarded: req.idemgate, body: req.body });
      res.cookie("session", "caller-1");
      res.status(answer.status).json(answer.json);
    } catch (error) {
      next(error);
    }
  });
  return app;
}

originScenarios("express", (options, route) => listen(paymentsApp(options, route)));

test("express without a body parser: the middleware reads the raw body itself", async () => {
  const route = paymentsRoute();
  const origin = await listen(paymentsApp({ secret: SECRET }, route, null));
  try {
    const answer = await post(origin.base, { body: '{"amount":7}' });
    assert.equal(answer.status, 201, answer.text);
    assert.equal(route.charges[0].body, '{"amount":7}');
  } finally {
    await origin.close();
  }
});

test("express after express.json(): a clear error, since the raw bytes are gone", async () => {
  const route = paymentsRoute();
  const app = paymentsApp({ secret: SECRET }, route, express.json());
  const errors = [];
  app.use((error, _req, res, _next) => {
    errors.push(error.message);
    res.status(500).end();
  });
  const origin = await listen(app);
  try {
    assert.equal((await post(origin.base)).status, 500);
    assert.match(errors[0], /express\.raw/);
  } finally {
    await origin.close();
  }
});
