import type { Fence, FenceKey, FenceStore, StoredResult } from "./fence.js";

/**
 * The part of a synchronous SQLite connection the store uses: what
 * better-sqlite3's `Database` (and Node's `node:sqlite` `DatabaseSync`)
 * have. Passed in by the application, so the package depends on neither.
 */
export interface SqliteDatabase {
  exec(sql: string): unknown;
  prepare(sql: string): {
    get(...parameters: unknown[]): unknown;
    run(...parameters: unknown[]): unknown;
  };
}

export interface SqliteFenceStoreOptions {
  /** How long a running forward holds its key before a later one may run; seconds. */
  leaseSeconds?: number;
  /** Unix seconds; the system clock by default. */
  now?: () => number;
}

/** The same table the Python package's store writes. */
const SCHEMA = `
  CREATE TABLE IF NOT EXISTS idemgate_fences (
    scope TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    highest_epoch INTEGER NOT NULL,
    body_sha256 TEXT NOT NULL,
    running_epoch INTEGER,
    running_until INTEGER,
    result_status INTEGER,
    result_headers TEXT,
    result_body BLOB,
    PRIMARY KEY (scope, idempotency_key)
  )`;

interface FenceRow {
  highest_epoch: number;
  body_sha256: string;
  running_epoch: number | null;
  running_until: number | null;
  result_status: number | null;
  result_headers: string | null;
  result_body: Uint8Array | null;
}

/** Default lease: ORIGIN_TIMEOUT_MS can be at most 300 s, so a handler idemgate still waits on keeps its key. */
export const DEFAULT_LEASE_SECONDS = 300;

/**
 * A FenceStore on one SQLite database. Each decision is one
 * `BEGIN IMMEDIATE` transaction, so processes sharing the file decide one
 * at a time (set a busy timeout on the connection for them to wait).
 */
export class SqliteFenceStore implements FenceStore {
  readonly #database: SqliteDatabase;
  readonly #leaseSeconds: number;
  readonly #now: () => number;

  constructor(database: SqliteDatabase, options: SqliteFenceStoreOptions = {}) {
    this.#database = database;
    this.#leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
    this.#now = options.now ?? (() => Math.floor(Date.now() / 1000));
    database.exec(SCHEMA);
  }

  begin(forward: FenceKey): Fence {
    return this.#immediate(() => {
      const row = this.#database
        .prepare(
          `SELECT highest_epoch, body_sha256, running_epoch, running_until, result_status, result_headers, result_body
           FROM idemgate_fences WHERE scope = ? AND idempotency_key = ?`,
        )
        .get(forward.scope, forward.key) as FenceRow | undefined;
      const now = this.#now();
      if (row === undefined) {
        this.#database
          .prepare(
            `INSERT INTO idemgate_fences (scope, idempotency_key, highest_epoch, body_sha256, running_epoch, running_until)
             VALUES (?, ?, ?, ?, ?, ?)`,
          )
          .run(forward.scope, forward.key, forward.epoch, forward.bodySha256, forward.epoch, now + this.#leaseSeconds);
        return { outcome: "proceed" };
      }
      if (row.highest_epoch > forward.epoch) return { outcome: "stale-epoch", highestEpoch: row.highest_epoch };
      if (row.body_sha256 !== forward.bodySha256) return { outcome: "body-mismatch" };
      if (row.result_status !== null) {
        this.#raiseFence(forward);
        return {
          outcome: "completed",
          result: {
            status: row.result_status,
            headers: JSON.parse(row.result_headers ?? "[]") as [string, string][],
            body: new Uint8Array(row.result_body ?? new Uint8Array()),
          },
        };
      }
      if (row.running_epoch !== null && row.running_until !== null && row.running_until > now) {
        return { outcome: "in-progress", retryAfterSeconds: row.running_until - now };
      }
      this.#database
        .prepare(
          `UPDATE idemgate_fences SET highest_epoch = ?, running_epoch = ?, running_until = ?
           WHERE scope = ? AND idempotency_key = ?`,
        )
        .run(forward.epoch, forward.epoch, now + this.#leaseSeconds, forward.scope, forward.key);
      return { outcome: "proceed" };
    });
  }

  complete(forward: FenceKey, result: StoredResult): void {
    this.#immediate(() => {
      this.#database
        .prepare(
          `UPDATE idemgate_fences
           SET result_status = ?, result_headers = ?, result_body = ?, running_epoch = NULL, running_until = NULL
           WHERE scope = ? AND idempotency_key = ? AND result_status IS NULL`,
        )
        .run(result.status, JSON.stringify(result.headers), result.body, forward.scope, forward.key);
    });
  }

  release(forward: FenceKey): void {
    this.#immediate(() => {
      this.#database
        .prepare(
          `UPDATE idemgate_fences SET running_epoch = NULL, running_until = NULL
           WHERE scope = ? AND idempotency_key = ? AND running_epoch = ? AND result_status IS NULL`,
        )
        .run(forward.scope, forward.key, forward.epoch);
    });
  }

  #raiseFence(forward: FenceKey): void {
    this.#database
      .prepare("UPDATE idemgate_fences SET highest_epoch = ? WHERE scope = ? AND idempotency_key = ?")
      .run(forward.epoch, forward.scope, forward.key);
  }

  /** BEGIN IMMEDIATE takes the write lock first: no two decisions interleave. */
  #immediate<T>(decide: () => T): T {
    this.#database.exec("BEGIN IMMEDIATE");
    try {
      const decided = decide();
      this.#database.exec("COMMIT");
      return decided;
    } catch (error) {
      this.#database.exec("ROLLBACK");
      throw error;
    }
  }
}
