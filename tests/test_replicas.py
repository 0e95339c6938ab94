"""Replicas sharing one PostgreSQL store (tests/support/postgres.py): leases, claimed slots
and the outbox's sender, in-process against the real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.measure.lease import hold
from monitor.store import PgStore, RunRow, Store
from monitor.store.coordination import endpoint_lease
from monitor.vocab import RunStatus
from tests.support.postgres import Cluster, cluster


@pytest.fixture(scope="module")
def pg() -> Iterator[Cluster]:
    with cluster() as found:
        yield found


def _two(pg: Cluster, tmp_path: Path) -> tuple[PgStore, PgStore]:
    """Two replicas' stores on one database (two connections, as two machines have)."""
    url = pg.database()
    return (PgStore(url, env="X", path=tmp_path / "a"), PgStore(url, env="X", path=tmp_path / "b"))


def test_a_lease_has_one_holder_until_it_expires(pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)
    name = endpoint_lease("local")
    assert a.acquire_lease(name, "A", 60) and not b.acquire_lease(name, "B", 60)
    assert a.acquire_lease(name, "A", 60)  # ours already: renewed
    assert b.lease_holder(name) == "A" and a.renew_lease(name, "A", 60)
    assert a.renew_lease(name, "A", 0)  # ... now expired (by the database's clock)
    assert b.lease_holder(name) is None
    assert b.acquire_lease(name, "B", 60)
    assert not a.renew_lease(name, "A", 60)  # taken meanwhile: A must stop
    a.release_lease(name, "A")  # not A's to release: B keeps it
    assert a.lease_holder(name) == "B"
    b.release_lease(name, "B")
    assert a.lease_holder(name) is None


def test_a_slot_is_claimed_by_one_replica(pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)
    slot = datetime(2026, 12, 5, 12, tzinfo=UTC)
    assert a.claim_slot("local", slot, "A")
    assert not b.claim_slot("local", slot, "B") and not b.claim_slot("local", slot, "B")
    assert b.claim_slot("local", slot.replace(hour=13), "B")


def test_an_unattended_run_is_found_once_its_lease_is_gone(pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)
    a.acquire_lease(endpoint_lease("local"), "A", 60)
    a.create_run(RunRow(run_id="r1", endpoint="local", model="openai/x", simulated=False,
                        run_index=0, seed=0, catalog_version="c", scenarios=["university"],
                        languages=["en"], variants=["plain"], triplets=1, planned_calls=2,
                        started_at=datetime.now(UTC), finished_at=None,
                        status=RunStatus.RUNNING, owner="A"))
    assert b.unattended(["local", "other"]) == []  # A holds it: its run is A's
    a.renew_lease(endpoint_lease("local"), "A", 0)  # A died: its lease ran out
    assert b.unattended(["local", "other"]) == ["local"]
    b.close_run("r1", RunStatus.COMPLETE, "done")
    assert b.unattended(["local"]) == []


def test_one_replica_at_a_time_sends_an_endpoints_messages_to_a_sink(
        pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)
    with a.outbox_claim("local", "slack") as mine:
        assert mine
        with b.outbox_claim("local", "slack") as theirs:
            assert not theirs
        with b.outbox_claim("local", "webhook") as other_sink:
            assert other_sink
    with b.outbox_claim("local", "slack") as theirs:
        assert theirs


def test_a_hold_is_waited_for_and_lost_holds_stop_the_work(pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)

    async def scenario() -> None:
        async with hold(a, "local", "A", 60) as held:
            assert held
            async with hold(b, "local", "B", 60, wait_s=0) as other:
                assert not other
        async with hold(b, "local", "B", 60, wait_s=5) as other:  # A released it
            assert other

        async def work() -> None:
            async with hold(a, "local", "A", 3) as mine:
                assert mine
                b.renew_lease(endpoint_lease("local"), "A", 0)  # A's hold runs out ...
                assert b.acquire_lease(endpoint_lease("local"), "B", 60)  # ... B takes it
                await asyncio.Event().wait()  # A's renewal finds it gone: cancelled

        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(work(), timeout=60)
        assert a.lease_holder(endpoint_lease("local")) == "B"  # A released nothing of B's

    asyncio.run(scenario())


def test_a_file_takes_no_turns(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.duckdb")

    async def scenario() -> None:
        async with hold(store, "local", "A", 60) as held, hold(store, "local", "B", 60) as too:
            assert held and too

    asyncio.run(scenario())
    with store.outbox_claim("local", "slack") as mine:
        assert mine


def test_held_messages_are_adopted_once_on_postgres(pg: Cluster, tmp_path: Path) -> None:
    a, b = _two(pg, tmp_path)
    a.outbox_add("local", ['{"kind": "note", "text": "held"}'], [])  # no sink could take it
    assert b.outbox_backlog("local") == {"": 1}
    assert a.outbox_adopt("local", ["slack", "webhook"]) == 1
    assert b.outbox_adopt("local", ["slack", "webhook"]) == 0  # owed once, not twice
    assert b.outbox_backlog("local") == {"slack": 1, "webhook": 1}
    a.outbox_delivered([1], "slack")  # small ids travel as smallint[]: compared with bigint
    b.outbox_delivered([1], "webhook")
    assert a.outbox_backlog("local") == {} and a.outbox_pending("local") == []
