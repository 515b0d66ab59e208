"""The examples of docs/origin.md marked `<!-- doc-test: packages/python NAME -->`,
run as the page shows them: each is executed as a module in a scratch
folder and driven with forwards signed as idemgate signs them, the ASGI
one under uvicorn and the WSGI one under Werkzeug's server, on loopback
ports. The documentation's own test (crates/idemgate-core/tests/docs.rs)
checks that every such block names an example this file runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from forwards import BODY, SECRET, post
from servers import uvicorn_server, werkzeug_server

PAGE = Path(__file__).resolve().parents[3] / "docs" / "origin.md"
EXAMPLES = {"verify", "asgi", "wsgi"}
EPOCH = 1_700_000_000_000_000


def examples() -> dict[str, tuple[int, str]]:
    """The page's examples for this package: name -> (line, code)."""
    lines = PAGE.read_text().split("\n")
    found: dict[str, tuple[int, str]] = {}
    for at, line in enumerate(lines):
        marker = re.fullmatch(r"\s*<!-- doc-test: packages/python (\S+) -->\s*", line)
        if not marker:
            continue
        opening = next(index for index in range(at + 1, len(lines)) if lines[index].strip())
        assert lines[opening].strip() == "```python", f"{PAGE}:{opening + 1}: a python block after the marker"
        closing = next(index for index in range(opening + 1, len(lines)) if lines[index].strip() == "```")
        found[marker.group(1)] = (opening + 2, "\n".join(lines[opening + 1 : closing]) + "\n")
    return found


def run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Executes the example `name` as a module: in a scratch folder (its
    `fences.db`), with the secret in the environment."""
    line, code = examples()[name]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORWARD_SECRET", SECRET)
    namespace: dict[str, Any] = {"__name__": f"docs_origin_{name}"}
    exec(compile(code, f"{PAGE}:{line}", "exec"), namespace)
    return namespace


def test_the_page_shows_exactly_the_examples_this_file_runs() -> None:
    assert set(examples()) == EXAMPLES


def test_verify_prints_what_its_comment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run("verify", tmp_path, monkeypatch)
    assert capsys.readouterr().out == "order-42 1700000000000000 None False\n"


def test_asgi_verifies_charges_once_replays_and_fences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = run("asgi", tmp_path, monkeypatch)["app"]
    with uvicorn_server(app) as base:
        first = post(base, body=BODY, epoch=EPOCH)
        assert first.status == 201
        assert first.json == {"charged": 1000, "key": "order-42", "epoch": EPOCH}
        # A retry with a higher epoch: the first result, the app not run
        # again (the epoch in the answer is the first one's).
        retry = post(base, body=BODY, epoch=EPOCH + 1)
        assert (retry.status, retry.json) == (201, first.json)
        # The superseded forward, arriving late; another body under the key.
        assert post(base, body=BODY, epoch=EPOCH - 1).status == 409
        assert post(base, body=b'{"amount":9999}', epoch=EPOCH + 2).status == 422
        # Not signed by idemgate.
        assert post(base, body=BODY, key="order-43", secret="whsec_other").status == 401


def test_wsgi_verifies_and_hands_the_forward_to_flask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = run("wsgi", tmp_path, monkeypatch)["app"]
    with werkzeug_server(app) as base:
        signed = post(base, body=BODY)
        assert (signed.status, signed.json) == (201, {"charged": 1000, "key": "order-42"})
        forged = post(base, body=BODY, secret="whsec_other")
        assert forged.status == 401
        assert forged.headers["Content-Type"] == "application/problem+json"
