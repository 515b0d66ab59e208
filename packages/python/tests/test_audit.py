"""verify_audit_chain() and the verify-audit command against every case of
tests/vectors/audit.json: the good chain verifies, each broken variant
names its first broken entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from idemgate_verify import ChainVerified, verify_audit_chain

VECTORS = json.loads((Path(__file__).parents[3] / "tests" / "vectors" / "audit.json").read_text())


def as_expected(verdict: Any) -> dict[str, Any]:
    if isinstance(verdict, ChainVerified):
        return {"valid": True, "entries": verdict.entries}
    return {"valid": False, "index": verdict.index, "seq": verdict.seq, "fault": verdict.fault}


@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_audit_vector(vector: dict[str, Any]) -> None:
    assert as_expected(verify_audit_chain(vector["chain"])) == vector["expected"], vector["description"]
    if "head" in vector:
        assert as_expected(verify_audit_chain(vector["chain"], vector["head"])) == vector["expected_with_head"]


def test_the_command_says_ok_or_names_the_broken_entry(tmp_path: Path) -> None:
    def run(name: str) -> subprocess.CompletedProcess[str]:
        vector = next(vector for vector in VECTORS if vector["name"] == name)
        file = tmp_path / f"{name}.json"
        file.write_text(json.dumps(vector["chain"]))
        src = Path(__file__).parents[1] / "src"
        return subprocess.run(
            [sys.executable, "-m", "idemgate_verify.audit", str(file)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(src)},
        )

    good = run("good")
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("ok: 5 entries, head 5 ")
    edited = run("edited-result")
    assert edited.returncode == 1
    assert "entry 2 (seq 3) breaks the chain: hash" in edited.stdout
