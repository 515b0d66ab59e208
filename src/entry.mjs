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

// The Rust object of each instance, under a symbol: RPC exposes the
// class's methods alone, never a property.
const RUST = Symbol("the Rust object");

// A Durable Object class around the Rust class `Rust`: its constructor,
// `fetch` and `alarm`; each subclass adds its RPC method.
function hosting(Rust) {
  return class extends DurableObject {
    constructor(ctx, env) {
      super(ctx, env);
      this[RUST] = new Rust(ctx, env);
    }

    fetch(request) {
      return this[RUST].fetch(request);
    }

    alarm() {
      return this[RUST].alarm();
    }
  };
}

export class DedupObject extends hosting(RustDedupObject) {
  dispatch(call, body) {
    return this[RUST].dispatch(call, body);
  }
}

export class FlowCoordinator extends hosting(RustFlowCoordinator) {
  call(route, line) {
    return this[RUST].call(route, line);
  }
}

export class ReconcileObject extends hosting(RustReconcileObject) {
  call(route, line) {
    return this[RUST].call(route, line);
  }
}

export class AlertObject extends hosting(RustAlertObject) {
  call(line) {
    return this[RUST].call(line);
  }
}

export class IndexShard extends hosting(RustIndexShard) {
  call(route, line) {
    return this[RUST].call(route, line);
  }
}

export class OrderObject extends hosting(RustOrderObject) {
  call(route, line) {
    return this[RUST].call(route, line);
  }
}

export class AuditLog extends hosting(RustAuditLog) {
  call(line) {
    return this[RUST].call(line);
  }
}
