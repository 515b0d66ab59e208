// The worker's entry module. worker-build exports the Rust `DedupObject`
// as a plain class, and workerd serves RPC only on classes that extend
// `DurableObject`; this subclass hands each call to the Rust object, so the
// gateway can reach it over RPC instead of the much slower `fetch` path.
import { DurableObject } from "cloudflare:workers";
import gateway, { DedupObject as RustDedupObject } from "../build/index.js";

export default gateway;

export class DedupObject extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustDedupObject(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  dispatch(call, body) {
    return this.#object.dispatch(call, body);
  }
}
