"""SqliteFenceStore: the ledger's rules of crates/demo-origin/src/ledger.rs,
plus a running forward's lease, and processes deciding one at a time."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from pathlib import Path

import pytest

from idemgate_verify import BodyMismatch, Completed, InProgress, Proceed, SqliteFenceStore, StaleEpoch, StoredResult

HASH = "a" * 64
OTHER_HASH = "b" * 64


@dataclass(frozen=True)
class Forward:
    epoch: int
    body_sha256: str = HASH
    key: str = "k"
    scope: str = "s"


def result(text: str) -> StoredResult:
    return StoredResult(status=201, headers=[("content-type", "text/plain")], body=text.encode())


class Clock:
    def __init__(self, now: int = 1000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "fences.db"


def test_a_completed_key_answers_every_later_forward_with_its_first_result(database: Path) -> None:
    store = SqliteFenceStore(database)
    assert store.begin(Forward(1)) == Proceed()
    store.complete(Forward(1), result("first"))
    for epoch in (1, 2):
        assert store.begin(Forward(epoch)) == Completed(result("first"))
    # The repeat at epoch 2 raised the fence, as the ledger does.
    assert store.begin(Forward(1)) == StaleEpoch(highest_epoch=2)


def test_a_lower_epoch_is_refused_and_does_not_lower_the_fence(database: Path) -> None:
    store = SqliteFenceStore(database)
    assert store.begin(Forward(3)) == Proceed()
    assert store.begin(Forward(1)) == StaleEpoch(highest_epoch=3)
    assert store.begin(Forward(2)) == StaleEpoch(highest_epoch=3)


def test_another_body_under_the_key_is_refused(database: Path) -> None:
    store = SqliteFenceStore(database)
    store.begin(Forward(1))
    store.complete(Forward(1), result("first"))
    assert store.begin(Forward(2, OTHER_HASH)) == BodyMismatch()


def test_keys_are_per_scope(database: Path) -> None:
    store = SqliteFenceStore(database)
    store.begin(Forward(5))
    store.complete(Forward(5), result("first"))
    assert store.begin(Forward(1, OTHER_HASH, scope="another-scope")) == Proceed()


def test_a_running_forward_holds_its_key_until_its_lease_ends(database: Path) -> None:
    clock = Clock()
    store = SqliteFenceStore(database, lease_seconds=60, now=clock)
    assert store.begin(Forward(1)) == Proceed()
    assert store.begin(Forward(2)) == InProgress(retry_after_seconds=60)
    clock.now += 59
    assert store.begin(Forward(2)) == InProgress(retry_after_seconds=1)
    clock.now += 1
    assert store.begin(Forward(2)) == Proceed(), "a later epoch takes over an expired lease"
    assert store.begin(Forward(1)) == StaleEpoch(highest_epoch=2)


def test_a_released_key_runs_again_and_the_first_completed_result_stays(database: Path) -> None:
    store = SqliteFenceStore(database)
    store.begin(Forward(1))
    store.release(Forward(1))
    assert store.begin(Forward(2)) == Proceed()
    store.complete(Forward(2), result("second"))
    store.complete(Forward(2), result("overwritten?"))
    assert store.begin(Forward(3)) == Completed(result("second"))


def test_a_release_by_a_superseded_forward_leaves_the_later_ones_claim(database: Path) -> None:
    clock = Clock(0)
    store = SqliteFenceStore(database, lease_seconds=10, now=clock)
    store.begin(Forward(1))
    clock.now = 10
    assert store.begin(Forward(2)) == Proceed()
    store.release(Forward(1))
    assert isinstance(store.begin(Forward(3)), InProgress)


def test_memory_databases_are_refused() -> None:
    with pytest.raises(ValueError, match="memory"):
        SqliteFenceStore(":memory:")


def _decide_rounds(path: str, epoch: int, rounds: int) -> list[str]:
    store = SqliteFenceStore(path)
    return [type(store.begin(Forward(epoch, key=f"k{round}"))).__name__ for round in range(rounds)]


def test_processes_sharing_the_file_decide_one_at_a_time(database: Path) -> None:
    SqliteFenceStore(database)
    rounds = 30
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        runs = pool.starmap(_decide_rounds, [(str(database), epoch, rounds) for epoch in (1, 2, 3, 4)])
    for round in range(rounds):
        outcomes = [decided[round] for decided in runs]
        # One runs; a lower epoch than its is refused, a higher one waits for it.
        assert outcomes.count("Proceed") == 1, outcomes
        assert set(outcomes) <= {"Proceed", "StaleEpoch", "InProgress"}
