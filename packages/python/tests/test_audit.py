"""verify_audit_chain() and the verify-audit command against every case of
tests/vectors/audit.json: the good chain verifies, each broken variant
names its first broken entry; and read_audit_export() with the command
against every hostile export of tests/vectors/audit-hostile.json; and every
export checked against a checkpoint in tests/vectors/audit-checkpoints.json."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from idemgate_verify import (
    AuditCheckpoint,
    ChainVerified,
    is_audit_hash,
    parse_audit_checkpoint,
    read_audit_checkpoint,
    read_audit_export,
    verify_audit_chain,
)

VECTORS_DIR = Path(__file__).parents[3] / "tests" / "vectors"
VECTORS = json.loads((VECTORS_DIR / "audit.json").read_text(encoding="utf-8"))
HOSTILE = json.loads((VECTORS_DIR / "audit-hostile.json").read_text(encoding="utf-8"))
CHECKPOINTS = json.loads((VECTORS_DIR / "audit-checkpoints.json").read_text(encoding="utf-8"))


def as_expected(verdict: Any) -> dict[str, Any]:
    if isinstance(verdict, ChainVerified):
        return {"valid": True, "entries": verdict.entries}
    return {"valid": False, "index": verdict.index, "seq": verdict.seq, "fault": verdict.fault}


@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_audit_vector(vector: dict[str, Any]) -> None:
    assert as_expected(verify_audit_chain(vector["chain"])) == vector["expected"], vector["description"]
    if "head" in vector:
        assert as_expected(verify_audit_chain(vector["chain"], vector["head"])) == vector["expected_with_head"]
    assert read_and_verify(json.dumps(vector["chain"])) == vector["expected"]


def read_and_verify(text: str) -> dict[str, Any]:
    try:
        entries = read_audit_export(text)
    except ValueError:
        return {"valid": False, "error": "unreadable"}
    return as_expected(verify_audit_chain(entries))


def run_command(file: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    src = Path(__file__).parents[1] / "src"
    return subprocess.run(
        [sys.executable, "-m", "idemgate_verify.audit", str(file), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        input=stdin,
        env={"PYTHONPATH": str(src)},
    )


@pytest.mark.parametrize("vector", HOSTILE, ids=[vector["name"] for vector in HOSTILE])
def test_hostile_audit_vector(vector: dict[str, Any], tmp_path: Path) -> None:
    expected = vector["expected"]
    if "export" in vector:
        assert read_and_verify(vector["export"]) == expected, vector["description"]
        exported = vector["export"].encode("utf-8")
    else:
        exported = base64.b64decode(vector["export_base64"])
    file = tmp_path / "export.json"
    file.write_bytes(exported)
    run = run_command(file)
    if expected["valid"]:
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(f"ok: {expected['entries']} entries, head "), run.stdout
    elif "error" in expected:
        assert (run.returncode, run.stdout) == (2, ""), run.stdout
        assert "verify-audit: " in run.stderr, run.stderr
    else:
        seq = "null" if expected["seq"] is None else expected["seq"]
        line = f"broken: entry {expected['index']} (seq {seq}) breaks the chain: {expected['fault']}\n"
        assert (run.returncode, run.stdout) == (1, line), run.stderr


def test_the_command_says_ok_or_names_the_broken_entry(tmp_path: Path) -> None:
    def run(name: str) -> subprocess.CompletedProcess[str]:
        vector = next(vector for vector in VECTORS if vector["name"] == name)
        file = tmp_path / f"{name}.json"
        file.write_text(json.dumps(vector["chain"]))
        return run_command(file)

    good = run("good")
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("ok: 5 entries, head 5 ")
    edited = run("edited-result")
    assert edited.returncode == 1
    assert "entry 2 (seq 3) breaks the chain: hash" in edited.stdout


def test_the_checkpoint_vectors_are_many() -> None:
    assert len(CHECKPOINTS["cases"]) > 40


def head_of(checkpoint: dict[str, str]) -> Any:
    """What --head names, read by the library as the command reads it: a
    hash, SEQ:HASH, or a checkpoint file's text."""
    if "file" in checkpoint:
        return read_audit_checkpoint(checkpoint["file"])
    arg = checkpoint["arg"]
    return arg if is_audit_hash(arg) else parse_audit_checkpoint(arg)


@pytest.mark.parametrize("vector", CHECKPOINTS["cases"], ids=[vector["name"] for vector in CHECKPOINTS["cases"]])
def test_audit_checkpoint_vector(vector: dict[str, Any], tmp_path: Path) -> None:
    expected = vector["expected"]
    chain = CHECKPOINTS["chains"][vector["export"]["chain"]][: vector["export"]["length"]]
    assert len(chain) == vector["export"]["length"]
    text = json.dumps(chain, ensure_ascii=False)
    assert as_expected(verify_audit_chain(chain)) == vector["expected_without_checkpoint"]
    try:
        head = head_of(vector["checkpoint"])
    except ValueError:
        assert expected == {"valid": False, "error": "unreadable"}, vector["description"]
    else:
        for entries in (chain, read_audit_export(text)):
            if isinstance(head, AuditCheckpoint):
                verdict = verify_audit_chain(entries, checkpoint=head)
            else:
                verdict = verify_audit_chain(entries, head)
            assert as_expected(verdict) == expected, vector["description"]
    exported = tmp_path / "export.json"
    exported.write_text(text, encoding="utf-8")
    if "file" in vector["checkpoint"]:
        checkpoint_file = tmp_path / "checkpoint.json"
        checkpoint_file.write_bytes(vector["checkpoint"]["file"].encode("utf-8"))
        arg = str(checkpoint_file)
    else:
        arg = vector["checkpoint"]["arg"]
    run = run_command(exported, "--head", arg)
    if "output" in vector:
        assert (run.returncode, run.stdout) == (0 if expected["valid"] else 1, vector["output"] + "\n"), run.stderr
    else:
        assert (run.returncode, run.stdout) == (2, ""), run.stdout
        # The line after any warning python -m prints of the package's import.
        assert run.stderr.splitlines()[-1].startswith("verify-audit: --head "), run.stderr


def test_a_head_option_without_its_value_is_a_usage_error() -> None:
    run = run_command(Path("-"), "--head", stdin="[]")
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1].startswith("usage: verify-audit"), run.stderr
