"""WSGI middleware (Flask, Django, any WSGI app)."""

from __future__ import annotations

import io
import logging
from http import HTTPStatus
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from .errors import VerifyError
from .fence import Completed, FenceStore, StoredResult, is_retryable_status, refusal, stored_headers
from .problem import Problem, unverified
from .verify import DEFAULT_TOLERANCE_SECONDS, Forwarded, verify

Environ = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

logger = logging.getLogger("idemgate_verify")

def environ_path_and_query(environ: Environ) -> str:
    """The request line's path and query. Gunicorn and Werkzeug keep it
    (RAW_URI, REQUEST_URI); otherwise SCRIPT_NAME + PATH_INFO, which the
    server percent-decoded, are encoded again: a path idemgate sent with
    an escape that was not needed (`%41`) then no longer matches."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw and raw.startswith("/"):
        return str(raw)
    path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1")
    encoded = quote(path, safe="/!$&'()*+,;=:@~-._") or "/"
    query = environ.get("QUERY_STRING", "")
    return f"{encoded}?{query}" if query else encoded


def environ_headers(environ: Environ) -> list[tuple[str, str]]:
    """The request headers; the server joined a repeated one with ","."""
    headers = [(name[5:].replace("_", "-"), value) for name, value in environ.items() if name.startswith("HTTP_")]
    for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(name):
            headers.append((name.replace("_", "-"), environ[name]))
    return headers


def _read_body(environ: Environ) -> bytes:
    """The body by CONTENT_LENGTH, and wsgi.input rewound for the app."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _status_line(status: int) -> str:
    """WSGI wants a reason phrase after the code."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def _answer(start_response: StartResponse, status: int, headers: list[tuple[str, str]], body: bytes) -> list[bytes]:
    start_response(_status_line(status), [*headers, ("content-length", str(len(body)))])
    return [body]


def _problem(start_response: StartResponse, problem: Problem) -> list[bytes]:
    return _answer(start_response, problem.status, problem.headers, problem.body)


class IdemgateWSGIMiddleware:
    """Only verified forwards reach `app`, with what they say in
    `environ["idemgate"]`. With a `store`, a repeated key gets its first
    result, and a stale epoch or another body is refused. Failures are 401
    application/problem+json.
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        secret: str | bytes,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        store: FenceStore | None = None,
        now: Callable[[], int] | None = None,
        is_retryable: Callable[[int], bool] = is_retryable_status,
        path_and_query: Callable[[Environ], str] = environ_path_and_query,
    ) -> None:
        self.app = app
        self.secret = secret
        self.tolerance_seconds = tolerance_seconds
        self.store = store
        self.now = now
        self.is_retryable = is_retryable
        self.path_and_query = path_and_query

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        body = _read_body(environ)
        try:
            forwarded = verify(
                environ["REQUEST_METHOD"],
                self.path_and_query(environ),
                environ_headers(environ),
                body,
                self.secret,
                now=self.now() if self.now else None,
                tolerance_seconds=self.tolerance_seconds,
            )
        except VerifyError as error:
            return _problem(start_response, unverified(error))
        environ["idemgate"] = forwarded
        if self.store is None:
            return self.app(environ, start_response)
        return self._fenced(self.store, forwarded, environ, start_response)

    def _fenced(self, store: FenceStore, forwarded: Forwarded, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        fence = store.begin(forwarded)
        problem = refusal(fence)
        if problem is not None:
            return _problem(start_response, problem)
        if isinstance(fence, Completed):
            return _answer(start_response, fence.result.status, fence.result.headers, fence.result.body)
        try:
            result = _run_held(self.app, environ)
        except BaseException:
            store.release(forwarded)
            raise
        try:
            if self.is_retryable(result.status):
                store.release(forwarded)
            else:
                store.complete(forwarded, StoredResult(result.status, stored_headers(result.headers), result.body))
        except Exception:
            # The side effect happened and idemgate keeps the answer: send it.
            logger.exception("idemgate_verify: the fence store failed")
        headers = [(name, value) for name, value in result.headers if name.lower() != "content-length"]
        return _answer(start_response, result.status, headers, result.body)


def _run_held(app: WSGIApp, environ: Environ) -> StoredResult:
    """Runs the app to the end of its response, held until it is stored."""
    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started["status"] = int(status.split(" ", 1)[0])
        started["headers"] = list(headers)
        return chunks.append

    iterable = app(environ, start_response)
    try:
        for chunk in iterable:
            chunks.append(chunk)
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            close()
    if "status" not in started:
        raise RuntimeError("idemgate_verify: the app did not start a response")
    return StoredResult(started["status"], started["headers"], b"".join(chunks))
