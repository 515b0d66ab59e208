"""Verify an audit chain exported from idemgate
(``GET /__idemgate/audit?order=oldest``).

Each entry's ``hash`` is the hex SHA-256 of its ``prev_hash``, a newline and
the RFC 8785 canonical JSON of the entry without ``hash``; each
``prev_hash`` is the previous entry's ``hash`` (64 zeros for the first);
``seq`` counts up from 1 by one. The first entry that breaks any of these
is named, so an edited, deleted or reordered entry shows. Pass ``head``
(the summary's ``audit.hash`` when the export was taken) so that entries
cut from the end show too.

A chain rewritten inside the deployment (an entry edited and every hash
after it recomputed) still verifies as a chain, so idemgate anchors it
outside: after each act (at most once a minute) and daily it sends the
head to its ``json`` alert sinks as a signed ``idemgate.audit_head``
checkpoint. Pass ``checkpoint`` (one a sink received, read with
:func:`read_audit_checkpoint`) so that the chain must reach its ``seq``
(``truncated``) and agree with its ``hash`` there (``checkpoint``).

Exports are read strictly, as the Rust and Node.js verifiers read them:
an entry with a member named twice, a lone surrogate (``"\\ud800"``), or a
``seq`` or ``at`` not written as a plain integer (``1.0``, ``1e0``, ``-0``)
or beyond 2^53 - 1 is malformed; a page naming a member twice, ``NaN`` or
``Infinity``, and nesting deeper than 64 levels make the export unreadable.

Command line: ``verify-audit FILE|- [--head HASH|SEQ:HASH|CHECKPOINT_FILE]``
(or ``python -m idemgate_verify.audit``): ``--head`` takes a hash (the
export must end at it), ``SEQ:HASH`` or a file holding a checkpoint as a
sink received it (the export must agree with it, and may have grown since).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, Optional, Sequence, Union

AUDIT_GENESIS = "0" * 64

FIELDS = ("seq", "at", "actor", "action", "route", "target", "result", "prev_hash", "hash")

# ``truncated``: the export ends before the checkpoint's ``seq`` (named at
# the position after the last entry, with no ``seq``, as ``head`` is);
# ``checkpoint``: the entry at the checkpoint's ``seq`` carries another hash
# (the chain was rewritten since the sinks received it).
AuditFault = Literal["malformed", "seq", "prev_hash", "hash", "head", "truncated", "checkpoint"]

# What a checkpoint's ``type`` is.
AUDIT_CHECKPOINT_TYPE = "idemgate.audit_head"

_HASH = re.compile(r"[0-9a-f]{64}")
_UTC_TIME = re.compile(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?Z"
)
_SEQ_HASH = re.compile(r"([1-9][0-9]{0,15}):([0-9a-f]{64})")

# The largest integer an integer field (``seq``, ``at``) may hold: 2^53 - 1,
# JavaScript's Number.MAX_SAFE_INTEGER. Beyond it (|n| > 2^53 - 1) the
# entry is malformed, in the Rust and Node.js verifiers too.
MAX_SAFE_INTEGER = 2**53 - 1

# No export nests deeper than 3 levels (a page, its entries, an entry);
# one nesting deeper than this is unreadable, in all three verifiers.
MAX_DEPTH = 64

# Surrogates left in a str after JSON decoding are lone ones: json joins
# an escaped pair (\ud83d\udcb3) into one character.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON string, or a bracket outside one.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


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


@dataclass(frozen=True)
class AuditCheckpoint:
    """The head of the chain as idemgate sent it to its ``json`` alert
    sinks: a ``seq`` from 1 to 2^53 - 1 and the ``hash`` of the entry at
    that ``seq``; ``at`` (RFC 3339, UTC) when read from a sink's body."""

    seq: int
    hash: str
    at: Optional[str] = None


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
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER


@dataclass(frozen=True)
class MalformedEntry:
    """An entry of an export that is malformed however its members are
    read: it names a member twice, or holds a lone surrogate (in a name or
    a string, at any depth). ``seq`` is the one it claims (its ``seq``
    member, named once, an integer from 0 to 2^53 - 1), else ``None``.
    :func:`read_audit_export` returns it in the entry's place."""

    seq: Optional[int]


def _well_formed(entry: Any) -> bool:
    if not isinstance(entry, dict) or set(entry) != set(FIELDS):
        return False
    if not (_count(entry["seq"]) and _count(entry["at"])):
        return False
    if not all(isinstance(entry[name], str) for name in ("actor", "action", "route", "target", "result")):
        return False
    return all(isinstance(entry[name], str) and _HASH.fullmatch(entry[name]) for name in ("prev_hash", "hash"))


def is_audit_hash(text: str) -> bool:
    """Whether ``text`` is a hash as idemgate writes one: 64 lowercase hex digits."""
    return _HASH.fullmatch(text) is not None


def verify_audit_chain(
    entries: Sequence[Any], head: Optional[str] = None, checkpoint: Optional[AuditCheckpoint] = None
) -> AuditVerdict:
    """Checks a chain exported oldest first; names the first broken entry.
    With ``head``, the chain must end at that hash; with ``checkpoint``, it
    must reach the checkpoint's ``seq`` and carry its ``hash`` there (it may
    have grown since)."""
    previous_hash, previous_seq = AUDIT_GENESIS, 0
    for index, entry in enumerate(entries):
        if isinstance(entry, MalformedEntry):
            return ChainBroken(index, entry.seq, "malformed")
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
    if checkpoint is not None:
        if checkpoint.seq > previous_seq:
            return ChainBroken(len(entries), None, "truncated")
        # Verified: the entry at position i has seq i + 1; seq 0 is the
        # empty chain's head.
        at = checkpoint.seq - 1
        hash_there = AUDIT_GENESIS if at < 0 else entries[at]["hash"]
        if hash_there != checkpoint.hash:
            return ChainBroken(max(at, 0), None if at < 0 else checkpoint.seq, "checkpoint")
    return ChainVerified(len(entries), previous_seq, previous_hash)


def parse_audit_checkpoint(text: str) -> AuditCheckpoint:
    """Reads ``SEQ:HASH``, as ``verify-audit --head`` takes a checkpoint
    written out: ``SEQ`` a plain integer from 1 to 2^53 - 1, ``HASH`` 64
    lowercase hex digits. Raises ``ValueError`` otherwise."""
    match = _SEQ_HASH.fullmatch(text)
    if match is None or int(match.group(1)) > MAX_SAFE_INTEGER:
        raise ValueError(f"{text!r} is not SEQ:HASH")
    return AuditCheckpoint(int(match.group(1)), match.group(2))


def _finite(value: Any) -> bool:
    """Whether every number in ``value`` is within a double's range."""
    if isinstance(value, float):
        return not math.isinf(value)
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


def read_audit_checkpoint(text: str) -> AuditCheckpoint:
    """Reads a checkpoint as a ``json`` sink receives it (the body, its
    signature already checked by the receiver):
    ``{"type":"idemgate.audit_head","seq":42,"hash":"<64 hex>","at":"2026-12-05T16:00:00Z"}``,
    members in any order, other members ignored. As strictly as an export:
    a member named twice or a lone surrogate anywhere, a number out of a
    double's range, or nesting deeper than 64 levels make it unreadable; so
    do a ``type`` other than ``idemgate.audit_head``, a ``seq`` not a plain
    integer from 1 to 2^53 - 1, a ``hash`` not 64 lowercase hex digits, and
    an ``at`` not ``YYYY-MM-DDTHH:MM:SS[.F]Z``. Raises ``ValueError`` when
    it cannot be read."""
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    parsed = _loads(text)
    if not isinstance(parsed, dict):
        raise ValueError("not a JSON object")
    if _hostile(parsed):
        raise ValueError("names a member twice or holds a lone surrogate")
    if not _finite(parsed):
        raise ValueError("holds a number beyond a double's range")
    if parsed.get("type") != AUDIT_CHECKPOINT_TYPE:
        raise ValueError(f"its `type` is not `{AUDIT_CHECKPOINT_TYPE}`")
    seq, hash_, at = parsed.get("seq"), parsed.get("hash"), parsed.get("at")
    if not (_count(seq) and seq >= 1):
        raise ValueError("its `seq` is not an integer from 1 to 2^53 - 1")
    if not (isinstance(hash_, str) and is_audit_hash(hash_)):
        raise ValueError("its `hash` is not 64 lowercase hex digits")
    if not (isinstance(at, str) and _UTC_TIME.fullmatch(at)):
        raise ValueError("its `at` is not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    return AuditCheckpoint(seq, hash_, at)


class _Repeated(dict):  # type: ignore[type-arg]
    """A JSON object that names a member twice (json keeps the last)."""

    repeated: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    repeated = _Repeated(members)
    counts = Counter(name for name, _ in pairs)
    repeated.repeated = frozenset(name for name, count in counts.items() if count > 1)
    return repeated


def _integer(token: str) -> Union[int, float]:
    # -0 and integers too long to be at most 2^53 - 1 (which also keeps
    # int() from refusing thousands of digits) read as floats, which no
    # integer field takes.
    return float(token) if token == "-0" or len(token) > 17 else int(token)


def _not_json(name: str) -> Any:
    # json takes NaN, Infinity and -Infinity, which JSON has not: the
    # export is unreadable, as JSON.parse and serde_json find it.
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_object, parse_int=_integer, parse_constant=_not_json)


def _hostile(value: Any) -> bool:
    """A member named twice or a lone surrogate, anywhere in ``value``."""
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(_hostile(item) for item in value)
    if isinstance(value, dict):
        return isinstance(value, _Repeated) or any(_hostile(name) or _hostile(item) for name, item in value.items())
    return False


def _entry(value: Any) -> Any:
    if not _hostile(value):
        return value
    claimed = None
    if isinstance(value, dict) and "seq" not in getattr(value, "repeated", ()):
        claimed = value.get("seq")
    return MalformedEntry(claimed if _count(claimed) else None)


def _depth(text: str) -> int:
    depth = deepest = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        bracket = match.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def read_audit_export(text: str) -> list[Any]:
    """Reads an export: a JSON array, a page's ``{"entries": [...]}``, or JSON
    Lines (split at LF; lines of only spaces, tabs and CR are skipped). An
    entry with a member named twice or a lone surrogate is returned as a
    :class:`MalformedEntry`; raises ``ValueError`` when the export cannot
    be read."""
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        parsed = _loads(text)
    except json.JSONDecodeError:
        return [_entry(_loads(line)) for line in text.split("\n") if line.strip(" \t\r")]
    if isinstance(parsed, list):
        return [_entry(entry) for entry in parsed]
    if isinstance(parsed, dict) and isinstance(parsed.get("entries"), list):
        if isinstance(parsed, _Repeated) or any(_hostile(name) for name in parsed):
            raise ValueError("a page that names a member twice or holds a lone surrogate in a name")
        return [_entry(entry) for entry in parsed["entries"]]
    raise ValueError("neither an array of entries nor a page of them")


_USAGE = "usage: verify-audit FILE|- [--head HASH|SEQ:HASH|CHECKPOINT_FILE]"


def _read_text(name: str) -> str:
    # As bytes, strictly UTF-8, with no newline translated (a BOM kept).
    with open(name, encoding="utf-8", newline="") as file:
        return file.read()


def _read_head(arg: str) -> Union[str, AuditCheckpoint]:
    """A hash, ``SEQ:HASH``, or else a checkpoint file."""
    if is_audit_hash(arg):
        return arg
    try:
        return parse_audit_checkpoint(arg)
    except ValueError:
        pass  # Not SEQ:HASH: a file.
    try:
        text = _read_text(arg)
    except (OSError, ValueError) as error:
        raise ValueError(f"neither a hash, SEQ:HASH nor a readable checkpoint file: {error}") from error
    try:
        return read_audit_checkpoint(text)
    except ValueError as error:
        raise ValueError(f"not a checkpoint: {error}") from error


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    head_arg = None
    if "--head" in args:
        at = args.index("--head")
        if at + 1 >= len(args):
            print(_USAGE, file=sys.stderr)
            return 2
        head_arg = args[at + 1]
        del args[at : at + 2]
    if len(args) != 1:
        print(_USAGE, file=sys.stderr)
        return 2
    name = args[0]
    head: Optional[str] = None
    checkpoint: Optional[AuditCheckpoint] = None
    if head_arg is not None:
        try:
            read = _read_head(head_arg)
        except ValueError as error:
            print(f"verify-audit: --head {head_arg}: {error}", file=sys.stderr)
            return 2
        if isinstance(read, AuditCheckpoint):
            checkpoint = read
        else:
            head = read
    try:
        # As bytes, strictly UTF-8, with no newline translated.
        text = sys.stdin.buffer.read().decode("utf-8") if name == "-" else _read_text(name)
        entries = read_audit_export(text)
    except (OSError, ValueError) as error:
        print(f"verify-audit: {name}: {error}", file=sys.stderr)
        return 2
    verdict = verify_audit_chain(entries, head, checkpoint)
    if isinstance(verdict, ChainVerified):
        print(f"ok: {verdict.entries} entries, head {verdict.head_seq} {verdict.head_hash}")
        return 0
    seq = "null" if verdict.seq is None else verdict.seq
    why = ""
    if verdict.fault == "truncated" and checkpoint is not None:
        why = f" (the export ends at seq {verdict.index}, before the checkpoint's seq {checkpoint.seq})"
    elif verdict.fault == "checkpoint":
        why = " (its hash disagrees with the checkpoint's)"
    print(f"broken: entry {verdict.index} (seq {seq}) breaks the chain: {verdict.fault}{why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
