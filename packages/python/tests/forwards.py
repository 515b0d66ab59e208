"""Forwards signed as idemgate signs them, and a client that sends them."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

from idemgate_verify import sign

SECRET = "whsec_test"
SCOPE = "b7b942db19eccc4aa5b16fe1a5760b699a2b6f9c03d2be9ffa6994ce12e587cd"
BODY = b'{"amount":1000}'


def forward_headers(
    *,
    method: str = "POST",
    path_and_query: str = "/payments",
    body: bytes = BODY,
    key: str = "order-42",
    epoch: int = 1_700_000_000_000_000,
    secret: str = SECRET,
    signed_at: int | None = None,
    source: str | None = None,
    stale: bool = False,
) -> list[tuple[str, str]]:
    signed_at = int(time.time()) if signed_at is None else signed_at
    return [
        ("Content-Type", "application/json"),
        ("Idempotency-Key", f'"{key}"'),
        ("Idempotency-Scope", SCOPE),
        ("Idempotency-Epoch", str(epoch)),
        # Both signatures, and Idempotency-Source and -Stale when given.
        *sign(method, path_and_query, body, secret, SCOPE, key, epoch, signed_at, source=source, stale=stale),
    ]


@dataclass
class Answer:
    status: int
    headers: Message
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def send(base: str, path_and_query: str, headers: list[tuple[str, str]], body: bytes, method: str = "POST") -> Answer:
    """One request over a fresh connection; a header listed twice is sent twice."""
    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        connection.putrequest(method, path_and_query, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read().decode())
    finally:
        connection.close()


def post(
    base: str,
    *,
    path_and_query: str = "/payments",
    signed_path_and_query: str | None = None,
    body: bytes = BODY,
    extra: list[tuple[str, str]] | None = None,
    replace: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    **signing: Any,
) -> Answer:
    """A signed forward of `body` to `path_and_query` (signed for
    `signed_path_and_query` if a proxy in between changes it), its headers
    named in `replace` (lowercase) changed and those in `drop` removed."""
    headers = forward_headers(path_and_query=signed_path_and_query or path_and_query, body=body, **signing)
    headers = [(name, (replace or {}).get(name.lower(), value)) for name, value in headers if name.lower() not in drop]
    return send(base, path_and_query, headers + (extra or []), body)
