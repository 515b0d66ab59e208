"""ASGI middleware (Starlette, FastAPI, any ASGI app on asyncio)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import quote

from .errors import VerifyError
from .fence import Completed, FenceStore, StoredResult, is_retryable_status, refusal, stored_headers
from .problem import Problem, unverified
from .verify import DEFAULT_TOLERANCE_SECONDS, Forwarded, verify

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger("idemgate_verify")


def scope_path_and_query(scope: Scope) -> str:
    """The request line's path and query: `raw_path` as received when the
    server gives it (uvicorn, hypercorn do), else `path` percent-encoded
    again."""
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(scope.get("path", "/"), safe="/!$&'()*+,;=:@~-._")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def _call(function: Callable[..., Any], *arguments: Any) -> Any:
    """A store's method: awaited if async, else run off the event loop (a
    SQLite transaction may wait on another process's lock)."""
    if inspect.iscoroutinefunction(function):
        return await function(*arguments)
    return await asyncio.get_running_loop().run_in_executor(None, lambda: function(*arguments))


async def _send_answer(send: Send, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    """The whole answer at once; its length is the body's (a stored result keeps none)."""
    sized = [(name, value) for name, value in headers if name.lower() != "content-length"]
    sized.append(("content-length", str(len(body))))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(name.encode("latin-1"), value.encode("latin-1")) for name, value in sized],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_problem(send: Send, problem: Problem) -> None:
    await _send_answer(send, problem.status, problem.headers, problem.body)


class IdemgateMiddleware:
    """Only verified forwards reach `app`, with what they say in
    `scope["state"]["idemgate"]` (Starlette's `request.state.idemgate`).
    With a `store`, a repeated key gets its first result, and a stale epoch
    or another body is refused. Failures are 401 application/problem+json.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        secret: str | bytes,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        store: FenceStore | None = None,
        now: Callable[[], int] | None = None,
        is_retryable: Callable[[int], bool] = is_retryable_status,
        path_and_query: Callable[[Scope], str] = scope_path_and_query,
    ) -> None:
        self.app = app
        self.secret = secret
        self.tolerance_seconds = tolerance_seconds
        self.store = store
        self.now = now
        self.is_retryable = is_retryable
        self.path_and_query = path_and_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client went away
        try:
            forwarded = verify(
                scope["method"],
                self.path_and_query(scope),
                scope["headers"],
                body,
                self.secret,
                now=self.now() if self.now else None,
                tolerance_seconds=self.tolerance_seconds,
            )
        except VerifyError as error:
            await _send_problem(send, unverified(error))
            return
        scope.setdefault("state", {})["idemgate"] = forwarded
        replay = _replay(body, receive)
        if self.store is None:
            await self.app(scope, replay, send)
            return
        await self._fenced(self.store, forwarded, scope, replay, send)

    async def _fenced(self, store: FenceStore, forwarded: Forwarded, scope: Scope, receive: Receive, send: Send) -> None:
        fence = await _call(store.begin, forwarded)
        problem = refusal(fence)
        if problem is not None:
            await _send_problem(send, problem)
            return
        if isinstance(fence, Completed):
            await _send_answer(send, fence.result.status, fence.result.headers, fence.result.body)
            return
        held = _HeldResponse()
        try:
            await self.app(scope, receive, held.send)
            result = held.result()
        except BaseException:
            await _call(store.release, forwarded)
            raise
        try:
            if self.is_retryable(result.status):
                await _call(store.release, forwarded)
            else:
                kept = StoredResult(result.status, stored_headers(result.headers), result.body)
                await _call(store.complete, forwarded, kept)
        except Exception:
            # The side effect happened and idemgate keeps the answer: send it.
            logger.exception("idemgate_verify: the fence store failed")
        await _send_answer(send, result.status, result.headers, result.body)


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once more for the app, then the server's own messages
    (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _HeldResponse:
    """The app's response, held until it is stored."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []
        self.ended = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(bytes(name).decode("latin-1"), bytes(value).decode("latin-1")) for name, value in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
            self.ended = not message.get("more_body", False)

    def result(self) -> StoredResult:
        if self.status is None or not self.ended:
            raise RuntimeError("idemgate_verify: the app returned without a whole response")
        return StoredResult(self.status, self.headers, b"".join(self.chunks))
