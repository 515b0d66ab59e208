// The worker's entry module. worker-build exports the Rust Durable Objects
// (`DedupObject`, one per key; `FlowCoordinator`, one per flow-limited
// route; `ReconcileObject`, one per reconciled route; `AuditLog`, one per
// deployment; `AlertObject`, one per route; `OrderObject`, one per entity
// of an ordered route; `IndexShard`, `INDEX_SHARDS` per route) as plain
// classes, and workerd serves RPC only on classes that extend
// `DurableObject`; these subclasses hand each call to the Rust object, so
// it is reached over RPC instead of the much slower `fetch` path.
//
// worker-build wraps each export in a Proxy that checks, on every call,
// whether a panic left the wasm instance unusable, and builds a new one if
// so; it builds a Proxy per request, and one per method read (SPEC §14
// v5: the worker's fixed cost per request). Here each call goes to the
// Rust class itself while the wasm is sound; a panic (a
// `WebAssembly.RuntimeError`) marks it unsound, and the next call goes
// through worker-build's wrapper once, which re-initialises the wasm.
import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";
import gateway, {
  DedupObject as RustDedupObject,
  FlowCoordinator as RustFlowCoordinator,
  ReconcileObject as RustReconcileObject,
  AuditLog as RustAuditLog,
  AlertObject as RustAlertObject,
  OrderObject as RustOrderObject,
  IndexShard as RustIndexShard,
} from "../build/index.js";

/** worker-build's record of the wasm: a panic's mark, and its generation. */
const wasmState = globalThis.__worker_init_state;

function markPanic(error) {
  if (error instanceof WebAssembly.RuntimeError) {
    wasmState.criticalError = true;
  }
  throw error;
}

/** Calls `run`, marking a panic whether it throws or its promise rejects. */
function guarded(run) {
  try {
    const answer = run();
    return answer instanceof Promise ? answer.catch(markPanic) : answer;
  } catch (error) {
    markPanic(error);
  }
}

const rustFetch = gateway.prototype.fetch;

export default class Gateway extends WorkerEntrypoint {
  fetch(request) {
    if (wasmState.criticalError) {
      // worker-build's wrapper re-initialises the wasm first.
      return new gateway(this.ctx, this.env).fetch(request);
    }
    return guarded(() => rustFetch.call(this, request));
  }

  scheduled(controller) {
    return new gateway(this.ctx, this.env).scheduled(controller);
  }
}

/** A Rust object of the current wasm instance: made again after a panic. */
class RustObject {
  #Wrapped;
  #args;
  #object;
  #generation;

  constructor(Wrapped, ctx, env) {
    this.#Wrapped = Wrapped;
    this.#args = [ctx, env];
    this.#make();
  }

  #make() {
    if (wasmState.criticalError) {
      // Through worker-build's wrapper, which re-initialises the wasm.
      new this.#Wrapped(...this.#args);
    }
    this.#object = new this.#Wrapped.prototype.constructor(...this.#args);
    this.#generation = wasmState.instanceId;
  }

  call(method, ...args) {
    if (wasmState.criticalError || this.#generation !== wasmState.instanceId) {
      this.#make();
    }
    const object = this.#object;
    return guarded(() => object[method](...args));
  }
}

export class DedupObject extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustObject(RustDedupObject, ctx, env);
  }

  fetch(request) {
    return this.#object.call("fetch", request);
  }

  alarm() {
    return this.#object.call("alarm");
  }

  dispatch(call, body) {
    return this.#object.call("dispatch", call, body);
  }
}

/** A small object's class: `fetch`, `alarm`, and its one RPC method. */
function lineObject(Wrapped) {
  return class extends DurableObject {
    #object;

    constructor(ctx, env) {
      super(ctx, env);
      this.#object = new RustObject(Wrapped, ctx, env);
    }

    fetch(request) {
      return this.#object.call("fetch", request);
    }

    alarm() {
      return this.#object.call("alarm");
    }

    call(...line) {
      return this.#object.call("call", ...line);
    }
  };
}

export class FlowCoordinator extends lineObject(RustFlowCoordinator) {}
export class ReconcileObject extends lineObject(RustReconcileObject) {}
export class AlertObject extends lineObject(RustAlertObject) {}
export class IndexShard extends lineObject(RustIndexShard) {}
export class OrderObject extends lineObject(RustOrderObject) {}
export class AuditLog extends lineObject(RustAuditLog) {}
