// Serves a Fetch API handler on a real port with @hono/node-server's
// Node.js adapter (Request in, Response out).
import { serve } from "@hono/node-server";

export function listenFetch(fetchHandler) {
  return new Promise((resolve) => {
    const server = serve({ fetch: fetchHandler, port: 0, hostname: "127.0.0.1" }, (info) => {
      resolve({
        base: `http://127.0.0.1:${info.port}`,
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
