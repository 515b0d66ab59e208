"""IdemgateWSGIMiddleware in a Flask app under Werkzeug's server on a real
port, and under the standard library's wsgiref."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from flask import Flask, Response, jsonify, request
from forwards import SECRET, post
from scenarios import *  # noqa: F403 (the shared scenarios run here against WSGI)
from scenarios import PaymentsRoute
from servers import werkzeug_server, wsgiref_server

from idemgate_verify import FenceStore, IdemgateWSGIMiddleware


def payments_app(route: PaymentsRoute, **options: Any) -> Flask:
    app = Flask(__name__)

    @app.post("/payments")
    @app.post("/payments/<path:rest>")
    def payments(rest: str = "") -> Response:
        decision = route.decide(request.url, request.environ["idemgate"], request.get_data())
        time.sleep(decision.delay_seconds)
        response = jsonify(decision.json)
        response.status_code = decision.status
        response.set_cookie("session", "caller-1")
        return response

    app.wsgi_app = IdemgateWSGIMiddleware(app.wsgi_app, secret=SECRET, **options)  # type: ignore[method-assign]
    return app


@pytest.fixture
def origin() -> Callable[..., AbstractContextManager[tuple[str, PaymentsRoute]]]:
    @contextmanager
    def start(store: FenceStore | None = None) -> Iterator[tuple[str, PaymentsRoute]]:
        route = PaymentsRoute()
        with werkzeug_server(payments_app(route, store=store)) as base:
            yield base, route

    return start


def test_under_wsgiref_the_path_is_encoded_again_as_idemgate_sent_it() -> None:
    route = PaymentsRoute()
    with wsgiref_server(payments_app(route)) as base:
        answer = post(base, path_and_query="/payments/caf%C3%A9%20noir?note=a%20b")
        assert answer.status == 201, answer.text


def test_the_body_is_still_there_for_the_app() -> None:
    route = PaymentsRoute()
    with werkzeug_server(payments_app(route)) as base:
        assert post(base, body=b'{"amount":7}').status == 201
        assert route.charges[0]["body"] == '{"amount":7}'
