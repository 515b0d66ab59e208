"""A FenceStore on SQLite (the standard library's sqlite3), with the same
table and semantics as the Node.js package's store."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .fence import (
    BodyMismatch,
    Completed,
    Fence,
    FenceKey,
    InProgress,
    Proceed,
    StaleEpoch,
    StoredResult,
)

_SCHEMA = """
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
    )"""

#: ORIGIN_TIMEOUT_MS can be at most 300 s: a handler idemgate still waits on keeps its key.
DEFAULT_LEASE_SECONDS = 300


class SqliteFenceStore:
    """Each decision is one BEGIN IMMEDIATE transaction on a connection of
    its own, so threads and processes sharing the file decide one at a time
    (waiting up to `busy_timeout_seconds` for each other)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: Callable[[], int] | None = None,
        busy_timeout_seconds: float = 10.0,
    ) -> None:
        if str(path) == ":memory:":
            raise ValueError("SqliteFenceStore opens a connection per decision: give it a file, not :memory:")
        self._path = path
        self._lease_seconds = lease_seconds
        self._now = now or (lambda: int(time.time()))
        self._busy_timeout_seconds = busy_timeout_seconds
        with self._immediate() as connection:
            connection.execute(_SCHEMA)

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock first: no two decisions interleave."""
        # isolation_level=None: the transaction is the explicit BEGIN below.
        connection = sqlite3.connect(self._path, timeout=self._busy_timeout_seconds, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()

    def begin(self, forward: FenceKey) -> Fence:
        with self._immediate() as connection:
            row = connection.execute(
                """SELECT highest_epoch, body_sha256, running_epoch, running_until,
                          result_status, result_headers, result_body
                   FROM idemgate_fences WHERE scope = ? AND idempotency_key = ?""",
                (forward.scope, forward.key),
            ).fetchone()
            now = self._now()
            if row is None:
                connection.execute(
                    """INSERT INTO idemgate_fences
                       (scope, idempotency_key, highest_epoch, body_sha256, running_epoch, running_until)
                       VALUES (?, ?, ?, ?, ?, ?)""",
                    (forward.scope, forward.key, forward.epoch, forward.body_sha256, forward.epoch, now + self._lease_seconds),
                )
                return Proceed()
            highest, body_sha256, running_epoch, running_until, status, headers, body = row
            if highest > forward.epoch:
                return StaleEpoch(highest_epoch=highest)
            if body_sha256 != forward.body_sha256:
                return BodyMismatch()
            if status is not None:
                connection.execute(
                    "UPDATE idemgate_fences SET highest_epoch = ? WHERE scope = ? AND idempotency_key = ?",
                    (forward.epoch, forward.scope, forward.key),
                )
                pairs = [(name, value) for name, value in json.loads(headers or "[]")]
                return Completed(StoredResult(status=status, headers=pairs, body=bytes(body or b"")))
            if running_epoch is not None and running_until is not None and running_until > now:
                return InProgress(retry_after_seconds=running_until - now)
            connection.execute(
                """UPDATE idemgate_fences SET highest_epoch = ?, running_epoch = ?, running_until = ?
                   WHERE scope = ? AND idempotency_key = ?""",
                (forward.epoch, forward.epoch, now + self._lease_seconds, forward.scope, forward.key),
            )
            return Proceed()

    def complete(self, forward: FenceKey, result: StoredResult) -> None:
        with self._immediate() as connection:
            connection.execute(
                """UPDATE idemgate_fences
                   SET result_status = ?, result_headers = ?, result_body = ?, running_epoch = NULL, running_until = NULL
                   WHERE scope = ? AND idempotency_key = ? AND result_status IS NULL""",
                (result.status, json.dumps([list(pair) for pair in result.headers]), result.body, forward.scope, forward.key),
            )

    def release(self, forward: FenceKey) -> None:
        with self._immediate() as connection:
            connection.execute(
                """UPDATE idemgate_fences SET running_epoch = NULL, running_until = NULL
                   WHERE scope = ? AND idempotency_key = ? AND running_epoch = ? AND result_status IS NULL""",
                (forward.scope, forward.key, forward.epoch),
            )
