"""The same scenarios for ASGI and WSGI: a real server running an origin
app behind the middleware, driven over loopback.

A test module that imports these defines an `origin` fixture: a function
of the middleware's `store` that returns a context manager yielding the
server's base URL and its PaymentsRoute. The route answers 201 with a
charge number and the cookie session=caller-1, waits `?delay_ms=`, and
fails with 500 on `?fail=1`.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from forwards import BODY, forward_headers, post, send

from idemgate_verify import Forwarded, SqliteFenceStore


@dataclass
class Decision:
    status: int
    json: dict[str, Any]
    delay_seconds: float


@dataclass
class PaymentsRoute:
    charges: list[dict[str, Any]] = field(default_factory=list)
    #: Every verified forward the app was handed, as handed.
    forwards: list[Forwarded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, url: str, forwarded: Forwarded, body: bytes) -> Decision:
        with self.lock:
            self.forwards.append(forwarded)
        query = parse_qs(urlsplit(url).query)
        delay = int(query.get("delay_ms", ["0"])[0]) / 1000
        if query.get("fail") == ["1"]:
            return Decision(500, {"error": "boom"}, delay)
        with self.lock:
            self.charges.append({"key": forwarded.key, "epoch": forwarded.epoch, "body": body.decode()})
            charge = len(self.charges)
        return Decision(201, {"charge": charge, "key": forwarded.key, "epoch": forwarded.epoch}, delay)


def store_in(tmp_path: Path) -> SqliteFenceStore:
    return SqliteFenceStore(tmp_path / "fences.db")


def test_a_signed_forward_reaches_the_app_with_what_it_says(origin: Any) -> None:
    with origin() as (base, route):
        answer = post(base, key="order-1", epoch=7, path_and_query="/payments?currency=eur")
        assert answer.status == 201, answer.text
        assert answer.json == {"charge": 1, "key": "order-1", "epoch": 7}
        assert route.charges == [{"key": "order-1", "epoch": 7, "body": BODY.decode()}]


def test_a_reconciled_stale_forward_reaches_the_app_with_its_source_and_staleness(origin: Any) -> None:
    with origin() as (base, route):
        live = post(base, epoch=7)
        assert live.status == 201, live.text
        late = post(base, epoch=8, source="reconciliation", stale=True)
        assert late.status == 201, late.text
        assert [(f.epoch, f.source, f.stale) for f in route.forwards] == [(7, None, False), (8, "reconciliation", True)]
        # Signed by v2: not to be removed or added on the way.
        stripped = post(base, source="reconciliation", stale=True, drop=("idempotency-source",))
        assert stripped.json["code"] == "bad-signature"
        added = post(base, extra=[("Idempotency-Stale", "true")])
        assert added.json["code"] == "bad-signature"
        without_v2 = post(base, drop=("idempotency-signature-v2",))
        assert without_v2.json["code"] == "missing-header"
        assert len(route.forwards) == 2


def test_an_async_routes_retry_with_an_hours_old_sender_signature_passes(origin: Any) -> None:
    with origin() as (base, _route):
        stale = int(time.time()) - 5 * 3600
        answer = post(base, extra=[("Stripe-Signature", f"t={stale},v1={'5' * 64}")])
        assert answer.status == 201, answer.text


def test_unsigned_tampered_and_stale_forwards_get_401_problem_json(origin: Any) -> None:
    with origin() as (base, route):
        unsigned = send(base, "/payments", [("Content-Type", "application/json")], b"{}")
        assert unsigned.status == 401
        assert unsigned.headers["content-type"] == "application/problem+json"
        assert unsigned.json["code"] == "missing-header"
        assert post(base, epoch=7, replace={"idempotency-epoch": "8"}).json["code"] == "bad-signature"
        assert post(base, secret="whsec_other").json["code"] == "bad-signature"
        stale = post(base, signed_at=int(time.time()) - 3600)
        assert (stale.status, stale.json["code"], stale.json["status"]) == (401, "stale", 401)
        assert route.charges == []


def test_an_idempotency_header_sent_twice_is_refused(origin: Any) -> None:
    with origin() as (base, route):
        headers = forward_headers(source="reconciliation", stale=True)
        names = ("Idempotency-Key", "Idempotency-Signature", "Idempotency-Signature-V2", "Idempotency-Source", "Idempotency-Stale")
        for name in names:
            twice = headers + [(name, value) for header, value in headers if header == name]
            answer = send(base, "/payments", twice, BODY)
            assert (answer.status, answer.json["code"]) == (401, "malformed-header"), name
        assert route.charges == []


def test_with_a_store_a_repeated_key_gets_the_first_result_without_its_cookie(origin: Any, tmp_path: Path) -> None:
    with origin(store_in(tmp_path)) as (base, route):
        first = post(base, epoch=1)
        again = post(base, epoch=2)
        assert first.status == 201
        assert first.headers["set-cookie"].startswith("session=caller-1")
        assert (again.status, again.json) == (201, first.json)
        assert again.headers["set-cookie"] is None
        assert again.headers["content-length"] == str(len(again.text))
        assert len(route.charges) == 1


def test_with_a_store_a_lower_epoch_gets_409_and_another_body_422(origin: Any, tmp_path: Path) -> None:
    with origin(store_in(tmp_path)) as (base, route):
        assert post(base, epoch=5).status == 201
        stale = post(base, epoch=4)
        assert (stale.status, stale.headers["content-type"]) == (409, "application/problem+json")
        assert stale.json["highest_epoch"] == 5
        assert post(base, epoch=6, body=b'{"amount":1001}').status == 422
        assert len(route.charges) == 1


def test_with_a_store_concurrent_forwards_of_a_key_charge_once(origin: Any, tmp_path: Path) -> None:
    with origin(store_in(tmp_path)) as (base, route):
        path = "/payments?delay_ms=300"
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda epoch: post(base, epoch=epoch, path_and_query=path), [1, 2, 3, 4]))
        statuses = [answer.status for answer in answers]
        assert statuses.count(201) == 1, statuses
        # The others came while it ran: lower epochs than the first to run
        # are refused, higher ones are told to retry.
        for answer in answers:
            assert answer.status in (201, 409, 503), statuses
            if answer.status == 503:
                assert int(answer.headers["retry-after"]) >= 1
        retry = post(base, epoch=9, path_and_query=path)
        assert (retry.status, retry.json["charge"]) == (201, 1)
        assert len(route.charges) == 1


def test_with_a_store_a_failed_forward_is_not_kept_and_its_retry_runs(origin: Any, tmp_path: Path) -> None:
    with origin(store_in(tmp_path)) as (base, route):
        assert post(base, epoch=1, path_and_query="/payments?fail=1").status == 500
        retried = post(base, epoch=2)
        assert (retried.status, retried.json["charge"]) == (201, 1), "a 500 is not replayed: idemgate retries it"
