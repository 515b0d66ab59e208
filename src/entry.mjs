// The worker's entry module. worker-build exports the Rust Durable Objects
// (`DedupObject`, one per key; `FlowCoordinator`, one per flow-limited
// route; `ReconcileObject`, one per reconciled route; `AuditLog` and
// `AlertObject`, one per deployment; `OrderObject`, one per entity of an
// ordered route; `IndexShard`, `INDEX_SHARDS` per route) as plain classes, and workerd serves RPC only on classes that
// extend `DurableObject`; these subclasses hand each call to the Rust
// object, so it is reached over RPC instead of the much slower `fetch` path.
import { DurableObject } from "cloudflare:workers";
import gateway, {
  DedupObject as RustDedupObject,
  FlowCoordinator as RustFlowCoordinator,
  ReconcileObject as RustReconcileObject,
  AuditLog as RustAuditLog,
  AlertObject as RustAlertObject,
  OrderObject as RustOrderObject,
  IndexShard as RustIndexShard,
} from "../build/index.js";

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

export class FlowCoordinator extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustFlowCoordinator(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(route, line) {
    return this.#object.call(route, line);
  }
}

export class ReconcileObject extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustReconcileObject(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(route, line) {
    return this.#object.call(route, line);
  }
}

export class AlertObject extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustAlertObject(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(line) {
    return this.#object.call(line);
  }
}

export class IndexShard extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustIndexShard(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(route, line) {
    return this.#object.call(route, line);
  }
}

export class OrderObject extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustOrderObject(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(route, line) {
    return this.#object.call(route, line);
  }
}

export class AuditLog extends DurableObject {
  #object;

  constructor(ctx, env) {
    super(ctx, env);
    this.#object = new RustAuditLog(ctx, env);
  }

  fetch(request) {
    return this.#object.fetch(request);
  }

  alarm() {
    return this.#object.alarm();
  }

  call(line) {
    return this.#object.call(line);
  }
}
