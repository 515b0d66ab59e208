"""IdemgateMiddleware in a Starlette app under uvicorn on a real port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from forwards import SECRET, post
from scenarios import *  # noqa: F403 (the shared scenarios run here against ASGI)
from scenarios import PaymentsRoute
from servers import uvicorn_server
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from idemgate_verify import FenceStore, IdemgateMiddleware


def payments_app(route: PaymentsRoute, **options: Any) -> Starlette:
    async def payments(request: Request) -> JSONResponse:
        body = await request.body()
        decision = route.decide(str(request.url), request.state.idemgate, body)
        await asyncio.sleep(decision.delay_seconds)
        response = JSONResponse(decision.json, status_code=decision.status)
        response.set_cookie("session", "caller-1")
        return response

    return Starlette(
        routes=[Route("/payments", payments, methods=["POST"])],
        middleware=[Middleware(IdemgateMiddleware, secret=SECRET, **options)],
    )


@pytest.fixture
def origin() -> Callable[..., AbstractContextManager[tuple[str, PaymentsRoute]]]:
    @contextmanager
    def start(store: FenceStore | None = None) -> Iterator[tuple[str, PaymentsRoute]]:
        route = PaymentsRoute()
        with uvicorn_server(payments_app(route, store=store)) as base:
            yield base, route

    return start


def test_a_proxy_that_strips_a_prefix_is_told_what_idemgate_sent() -> None:
    route = PaymentsRoute()
    app = payments_app(route, path_and_query=lambda scope: "/api" + scope["path"])
    with uvicorn_server(app) as base:
        assert post(base, path_and_query="/payments", signed_path_and_query="/api/payments").status == 201
        assert post(base, path_and_query="/payments").status == 401
