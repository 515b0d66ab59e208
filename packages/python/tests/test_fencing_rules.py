"""The middleware's fencing rules, called as WSGI without a server: what
is kept, what is released, and a store that fails after the app ran."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from forwards import BODY, SECRET, forward_headers

from idemgate_verify import IdemgateWSGIMiddleware, Proceed, SqliteFenceStore, is_async_retryable_status


class App:
    """Answers `status` with a cookie, counting its runs."""

    def __init__(self, status: str) -> None:
        self.status = status
        self.runs = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.runs += 1
        start_response(self.status, [("Content-Type", "text/plain"), ("Set-Cookie", "c=1"), ("X-Run", str(self.runs))])
        return [b"ran"]


def call(app: Any, epoch: int) -> tuple[str, dict[str, str]]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/payments",
        "QUERY_STRING": "",
        "CONTENT_LENGTH": str(len(BODY)),
        "wsgi.input": io.BytesIO(BODY),
    }
    for name, value in forward_headers(epoch=epoch):
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answered: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answered.update(status=status, headers={name.lower(): value for name, value in headers})
        return lambda chunk: None

    b"".join(app(environ, start_response))
    return answered["status"], answered["headers"]


def test_a_kept_result_is_replayed_without_its_cookie(tmp_path: Path) -> None:
    app = App("201 Created")
    middleware = IdemgateWSGIMiddleware(app, secret=SECRET, store=SqliteFenceStore(tmp_path / "f.db"))
    status, headers = call(middleware, 1)
    assert (status, headers["set-cookie"]) == ("201 Created", "c=1")
    status, headers = call(middleware, 2)
    assert (status, headers["x-run"], "set-cookie" in headers) == ("201 Created", "1", False)
    assert app.runs == 1


def test_a_4xx_is_kept_by_default_and_released_with_is_async_retryable_status(tmp_path: Path) -> None:
    sync_app = App("400 Bad Request")
    sync = IdemgateWSGIMiddleware(sync_app, secret=SECRET, store=SqliteFenceStore(tmp_path / "sync.db"))
    call(sync, 1)
    call(sync, 2)
    assert sync_app.runs == 1
    async_app = App("400 Bad Request")
    store = SqliteFenceStore(tmp_path / "async.db")
    asynchronous = IdemgateWSGIMiddleware(async_app, secret=SECRET, store=store, is_retryable=is_async_retryable_status)
    call(asynchronous, 1)
    call(asynchronous, 2)
    assert async_app.runs == 2


def test_an_app_that_raises_releases_the_key(tmp_path: Path) -> None:
    store = SqliteFenceStore(tmp_path / "f.db")

    def failing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        call(IdemgateWSGIMiddleware(failing, secret=SECRET, store=store), 1)
    app = App("201 Created")
    call(IdemgateWSGIMiddleware(app, secret=SECRET, store=store), 2)
    assert app.runs == 1


class FailingStore:
    def begin(self, forward: Any) -> Proceed:
        return Proceed()

    def complete(self, forward: Any, result: Any) -> None:
        raise OSError("disk full")

    def release(self, forward: Any) -> None:
        pass


def test_a_store_that_fails_after_the_app_ran_still_answers_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    app = App("201 Created")
    with caplog.at_level(logging.ERROR, logger="idemgate_verify"):
        status, _headers = call(IdemgateWSGIMiddleware(app, secret=SECRET, store=FailingStore()), 1)
    assert status == "201 Created"
    assert "the fence store failed" in caplog.text
