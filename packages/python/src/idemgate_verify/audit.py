"""Verify an audit chain exported from idemgate
(``GET /__idemgate/audit?order=oldest``).

Each entry's ``hash`` is the hex SHA-256 of its ``prev_hash``, a newline and
the RFC 8785 canonical JSON of the entry without ``hash``; each
``prev_hash`` is the previous entry's ``hash`` (64 zeros for the first);
``seq`` counts up from 1 by one. The first entry that breaks any of these
is named, so an edited, deleted or reordered entry shows. Pass ``head``
(the summary's ``audit.hash`` when the export was taken) so that entries
cut from the end show too.

Command line: ``verify-audit FILE|- [--head HASH]`` (or
``python -m idemgate_verify.audit``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Literal, Optional, Sequence, Union

AUDIT_GENESIS = "0" * 64

FIELDS = ("seq", "at", "actor", "action", "route", "target", "result", "prev_hash", "hash")

AuditFault = Literal["malformed", "seq", "prev_hash", "hash", "head"]

_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ChainVerified:
    entries: int
    head_seq: int
    head_hash: str
    valid: bool = True


@dataclass(frozen=True)
class ChainBroken:
    """The first broken entry: its position in the export (from 0), the
    ``seq`` it claims (``None`` when it has none) and why."""

    index: int
    seq: Optional[int]
    fault: AuditFault
    valid: bool = False


AuditVerdict = Union[ChainVerified, ChainBroken]


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON of what an entry holds (strings and integers;
    names sorted by UTF-16 code units)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, dict):
        names = sorted(value, key=lambda name: name.encode("utf-16-be"))
        return "{" + ",".join(f"{_string(name)}:{canonical_json(value[name])}" for name in names) + "}"
    raise TypeError(f"no canonical form for {type(value).__name__}")


def audit_entry_hash(entry: dict[str, Any]) -> str:
    """The hash an entry should carry."""
    unhashed = {name: value for name, value in entry.items() if name != "hash"}
    content = f"{entry.get('prev_hash')}\n{canonical_json(unhashed)}"
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _well_formed(entry: Any) -> bool:
    if not isinstance(entry, dict) or set(entry) != set(FIELDS):
        return False
    if not (_count(entry["seq"]) and _count(entry["at"])):
        return False
    if not all(isinstance(entry[name], str) for name in ("actor", "action", "route", "target", "result")):
        return False
    return all(isinstance(entry[name], str) and _HASH.fullmatch(entry[name]) for name in ("prev_hash", "hash"))


def verify_audit_chain(entries: Sequence[Any], head: Optional[str] = None) -> AuditVerdict:
    """Checks a chain exported oldest first; names the first broken entry."""
    previous_hash, previous_seq = AUDIT_GENESIS, 0
    for index, entry in enumerate(entries):
        claimed = entry.get("seq") if isinstance(entry, dict) else None
        seq = claimed if _count(claimed) else None
        if not _well_formed(entry):
            return ChainBroken(index, seq, "malformed")
        if seq != previous_seq + 1:
            return ChainBroken(index, seq, "seq")
        if entry["prev_hash"] != previous_hash:
            return ChainBroken(index, seq, "prev_hash")
        if audit_entry_hash(entry) != entry["hash"]:
            return ChainBroken(index, seq, "hash")
        previous_hash, previous_seq = entry["hash"], entry["seq"]
    if head is not None and head != previous_hash:
        return ChainBroken(len(entries), None, "head")
    return ChainVerified(len(entries), previous_seq, previous_hash)


def read_audit_export(text: str) -> list[Any]:
    """Reads an export: a JSON array, a page's ``{"entries": [...]}``, or JSON Lines."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(parsed, list):
        return parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("entries"), list):
        return parsed["entries"]
    raise ValueError("neither an array of entries nor a page of them")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    head = None
    if "--head" in args:
        at = args.index("--head")
        head = args[at + 1] if at + 1 < len(args) else None
        del args[at : at + 2]
    if len(args) != 1:
        print("usage: verify-audit FILE|- [--head HASH]", file=sys.stderr)
        return 2
    name = args[0]
    try:
        text = sys.stdin.read() if name == "-" else open(name, encoding="utf-8").read()
        entries = read_audit_export(text)
    except (OSError, ValueError) as error:
        print(f"verify-audit: {name}: {error}", file=sys.stderr)
        return 2
    verdict = verify_audit_chain(entries, head)
    if isinstance(verdict, ChainVerified):
        print(f"ok: {verdict.entries} entries, head {verdict.head_seq} {verdict.head_hash}")
        return 0
    print(f"broken: entry {verdict.index} (seq {verdict.seq}) breaks the chain: {verdict.fault}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
