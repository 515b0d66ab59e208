"""verify() against every case of tests/vectors/forwards.json, with the
headers in each form the package accepts."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from starlette.datastructures import Headers as StarletteHeaders
from werkzeug.datastructures import Headers as WerkzeugHeaders

from idemgate_verify import VerifyError, verify

VECTORS = json.loads((Path(__file__).parents[3] / "tests" / "vectors" / "forwards.json").read_text())


def joined(pairs: list[list[str]]) -> dict[str, str]:
    """As a WSGI server hands headers over: a repeated one joined with ","."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        lower = name.lower()
        headers[lower] = f"{headers[lower]},{value}" if lower in headers else value
    return headers


HEADER_FORMS: dict[str, Callable[[list[list[str]]], Any]] = {
    "pairs": lambda pairs: [(name, value) for name, value in pairs],
    "asgi-bytes": lambda pairs: [(name.lower().encode(), value.encode("latin-1")) for name, value in pairs],
    "joined-dict": joined,
    "starlette": lambda pairs: StarletteHeaders(raw=[(n.lower().encode(), v.encode("latin-1")) for n, v in pairs]),
    "werkzeug": lambda pairs: WerkzeugHeaders([(name, value) for name, value in pairs]),
}


def answer(vector: dict[str, Any], headers: Any) -> dict[str, Any]:
    request = vector["request"]
    try:
        forwarded = verify(
            request["method"],
            request["path_and_query"],
            headers,
            base64.b64decode(request["body_base64"]),
            vector["secret"],
            now=vector["now"],
            tolerance_seconds=vector["tolerance_seconds"],
        )
    except VerifyError as error:
        return {"valid": False, "error": error.code}
    return {
        "valid": True,
        "scope": forwarded.scope,
        "key": forwarded.key,
        "epoch": forwarded.epoch,
        "body_sha256": forwarded.body_sha256,
        "signed_at": forwarded.signed_at,
        "source": forwarded.source,
        "stale": forwarded.stale,
    }


def test_the_vectors_cover_every_error_category() -> None:
    categories = {vector["expected"].get("error", "valid") for vector in VECTORS}
    assert categories == {"valid", "missing-header", "malformed-header", "stale", "bad-signature"}


@pytest.mark.parametrize("form", HEADER_FORMS)
@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_vector(vector: dict[str, Any], form: str) -> None:
    assert answer(vector, HEADER_FORMS[form](vector["request"]["headers"])) == vector["expected"]
