"""Objects by SHA-256 in NATS's own Object Store, on a real nats-server (room/jetstream/objects.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import nats
import pytest

from agents.objects import objects_for
from room.jetstream.objects import StreamObjects
from room.objects import ObjectAltered, ObjectMissing, ObjectTooBig, sha256_of
from tests.support import StreamSociety

BOUND = 64 * 1024


@pytest.fixture
def society(tmp_path: Path, nats_server: Any) -> Any:
    made = StreamSociety(tmp_path / "home", nats_server.urls, nats_server.replicas)
    bucket = f"objects-{uuid.uuid4().hex[:10]}"
    society_file = made.root / "society.toml"
    society_file.write_text(
        society_file.read_text() + f'\n[objects]\nmax_bytes = {BOUND}\nbucket = "{bucket}"\n'
    )
    made.bucket = bucket
    yield made
    made.stop_all()


async def _raw_names(servers: list[str], bucket: str) -> list[str]:
    nc = await nats.connect(servers)
    try:
        store = await nc.jetstream().object_store(bucket)
        try:
            return sorted(info.name for info in await store.list())
        except Exception as exc:  # nats-py: NotFoundError when the bucket holds nothing
            if "not found" in str(exc).lower() or type(exc).__name__ == "NotFoundError":
                return []
            raise
    finally:
        await nc.close()


def test_put_get_round_trip_in_the_object_store(society: Any) -> None:
    data = os.urandom(BOUND - 1)

    async def go() -> tuple[str, bytes, list[str]]:
        async with objects_for(society.home, "testdesigner", "spec") as store:
            assert isinstance(store, StreamObjects)
            name = await store.put(data)
        async with objects_for(society.home, "py", "grind") as other:  # another client
            back = await other.get(name)
        return name, back, await _raw_names(society.servers, society.bucket)

    name, back, names = asyncio.run(go())
    assert name == sha256_of(data) and back == data
    assert names == [name]  # named by its SHA-256 in NATS's own bucket


def test_bytes_put_under_another_name_are_refused_on_read(society: Any) -> None:
    """Anyone with the account's rights can put any bytes under any name: the reader checks."""
    honest = b"the green clone's bundle"
    name = sha256_of(honest)

    async def go() -> bytes:
        async with objects_for(society.home, "py", "grind") as store:
            await store._open(name)  # the bucket, made as a step makes it
        nc = await nats.connect(society.servers)
        try:
            bucket = await nc.jetstream().object_store(society.bucket)
            await bucket.put(name, b"something else entirely")
        finally:
            await nc.close()
        async with objects_for(society.home, "operator", "artifact") as store:
            return await store.get(name)

    with pytest.raises(ObjectAltered) as refused:
        asyncio.run(go())
    said = refused.value.message
    assert name in said and "@operator" in said and "step artifact" in said
    assert socket.gethostname() in said and society.bucket in said


def test_missing_and_over_the_bound_fail_loud_and_store_nothing(society: Any) -> None:
    big = os.urandom(BOUND + 1)

    async def put() -> str:
        async with objects_for(society.home, "py", "grind") as store:
            return await store.put(big)

    with pytest.raises(ObjectTooBig, match="max_bytes"):
        asyncio.run(put())

    async def get() -> bytes:
        async with objects_for(society.home, "py", "grind") as store:
            return await store.get(sha256_of(big))

    with pytest.raises(ObjectMissing, match="no such object"):
        asyncio.run(get())
    assert asyncio.run(_raw_names(society.servers, society.bucket)) == []


def test_many_puts_side_by_side_each_store_their_object(society: Any) -> None:
    """agents/objects/travel.put_all, as @retriever hands on a dig's files: the first put
    opens the connection and makes the bucket, the rest go side by side on it; every one
    is stored, under its own name, in a bucket that did not exist before."""
    from agents.objects.travel import put_all

    blobs = [os.urandom(2048) + bytes([n]) for n in range(24)]
    names, problem = asyncio.run(put_all(society.home, "retriever", "retrieve", blobs))
    assert problem is None
    assert names == [sha256_of(blob) for blob in blobs]
    assert asyncio.run(_raw_names(society.servers, society.bucket)) == sorted(names)
