"""The fencing store's interface: what an origin keeps per (scope, key)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, Union

from .problem import Problem, body_mismatch, in_progress, stale_epoch


class FenceKey(Protocol):
    """What a fence is kept by; a verified `Forwarded` is one."""

    @property
    def scope(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def body_sha256(self) -> str: ...


@dataclass(frozen=True)
class StoredResult:
    """A response as stored, to answer a repeated key with."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Proceed:
    """Run the handler, then `complete` (or `release` if it failed)."""


@dataclass(frozen=True)
class Completed:
    """The key was completed: answer with its first result, run nothing."""

    result: StoredResult


@dataclass(frozen=True)
class StaleEpoch:
    """A higher epoch of the key was accepted: 409."""

    highest_epoch: int


@dataclass(frozen=True)
class BodyMismatch:
    """The key's first request had another body: 422."""


@dataclass(frozen=True)
class InProgress:
    """Another forward of the key is running: 503, retried by idemgate."""

    retry_after_seconds: int


Fence = Union[Proceed, Completed, StaleEpoch, BodyMismatch, InProgress]


class FenceStore(Protocol):
    """Per (scope, key): the highest epoch accepted, the first body hash,
    the forward running, and the first completed result. `begin` decides in
    one transaction; SqliteFenceStore has the reference semantics."""

    def begin(self, forward: FenceKey) -> Fence: ...

    def complete(self, forward: FenceKey, result: StoredResult) -> None:
        """Keeps `result` as the key's answer, unless one was kept already."""

    def release(self, forward: FenceKey) -> None:
        """The handler failed: a later forward of the key may run it again."""


def is_retryable_status(status: int) -> bool:
    """idemgate's default RETRYABLE_STATUSES (408, 425, 429, 500-599):
    answers it retries rather than keeps, so the origin must not keep them."""
    return status in (408, 425, 429) or 500 <= status <= 599


def is_async_retryable_status(status: int) -> bool:
    """For origins behind an async route: idemgate retries every answer but
    a 2xx there (GIVE_UP_STATUSES aside), so only a 2xx is kept."""
    return not 200 <= status <= 299


def refusal(fence: Fence) -> Problem | None:
    """The answer to a fence that does not let the handler run, if any."""
    if isinstance(fence, StaleEpoch):
        return stale_epoch(fence.highest_epoch)
    if isinstance(fence, BodyMismatch):
        return body_mismatch()
    if isinstance(fence, InProgress):
        return in_progress(fence.retry_after_seconds)
    return None


#: Response headers that describe one connection or one caller, never kept
#: for a replay (idemgate does not replay Set-Cookie either).
_NOT_STORED = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "date",
    "server",
    "set-cookie",
    "upgrade",
    "trailer",
    "proxy-connection",
}


def stored_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name.lower(), value) for name, value in headers if name.lower() not in _NOT_STORED]
