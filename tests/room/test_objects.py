"""Objects by SHA-256 through a real hub over HTTP (room/objectstore.py, room/objects.py)."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from agents.objects import objects_for
from room import strictjson
from room.objectnames import PROOF_HEADER, proof_post
from room.objects import (
    Asker,
    HubObjects,
    ObjectAltered,
    ObjectMissing,
    ObjectRefused,
    ObjectTooBig,
    sha256_of,
)
from tests.support import HTTP, Society, add_nick, set_hub
from trust.proof import SecretSigner

BOUND = 64 * 1024


@pytest.fixture
def hubbed(tmp_path: Path) -> Any:
    society = Society(tmp_path / "home")
    society_file = society.root / "society.toml"
    society_file.write_text(society_file.read_text() + f"\n[objects]\nmax_bytes = {BOUND}\n")
    # privileged, and speaks through the relaxed listener
    add_nick(society.root, "scout", relaxed=True, handler="agents.examples:echo")
    society.start_hub()
    yield society
    society.stop_all()


def _stored(society: Society) -> list[str]:
    folder = society.root / "objects"
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_put_then_get_round_trips_by_hash_into_a_private_folder(hubbed: Society) -> None:
    data = os.urandom(BOUND - 10)

    async def go() -> tuple[str, bytes]:
        async with objects_for(hubbed.home, "operator", "test") as store:
            name = await store.put(data)
            return name, await store.get(name)

    name, back = asyncio.run(go())
    assert name == sha256_of(data) and back == data
    folder = hubbed.root / "objects"
    assert _stored(hubbed) == [name]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    # the read token is needed to read one
    assert HTTP.get(f"{hubbed.strict_url}/objects/{name}").status_code == 401
    answer = HTTP.get(f"{hubbed.strict_url}/objects/{name}", headers=hubbed.read_headers())
    assert answer.status_code == 200 and answer.content == data


def test_a_tampered_object_is_refused_on_read_naming_object_step_nick_and_host(
    hubbed: Society,
) -> None:
    async def put() -> str:
        async with objects_for(hubbed.home, "operator", "prepare") as store:
            return await store.put(b"the baseline bundle")

    name = asyncio.run(put())
    (hubbed.root / "objects" / name).write_bytes(b"the baseline bundle, altered")

    async def get() -> bytes:
        async with objects_for(hubbed.home, "operator", "grind") as store:
            return await store.get(name)

    with pytest.raises(ObjectAltered) as refused:
        asyncio.run(get())
    said = refused.value.message
    assert name in said and "step grind" in said and "@operator" in said
    assert socket.gethostname() in said and "altered" in said


def test_a_missing_object_fails_loud(hubbed: Society) -> None:
    async def get() -> bytes:
        async with objects_for(hubbed.home, "operator", "grind") as store:
            return await store.get(sha256_of(b"never stored"))

    with pytest.raises(ObjectMissing, match="no such object"):
        asyncio.run(get())


def test_over_the_bound_is_413_and_nothing_is_stored(hubbed: Society) -> None:
    home = hubbed.home
    big = os.urandom(BOUND + 1)
    # a client that believes in a larger bound sends it all: the hub refuses it
    loose = HubObjects(
        home.society.hub.strict_url(),
        Asker("operator", "test", "here"),
        10 * BOUND,
        signer=home.signer_for("operator"),
        token=home.read_token(),
    )

    async def put() -> str:
        async with loose:
            return await loose.put(big)

    with pytest.raises(ObjectTooBig, match=r"413.*max_bytes"):
        asyncio.run(put())
    assert _stored(hubbed) == []  # no object, no half-written file
    # and the client itself refuses before sending, with the same bound
    with pytest.raises(ObjectTooBig, match="max_bytes"):

        async def own() -> str:
            async with objects_for(home, "operator", "test") as store:
                return await store.put(big)

        asyncio.run(own())


def _raw_put(
    society: Society, nick: str, name: str, body: bytes, prove: bool, declared: int | None = None
) -> Any:
    from room.message import parse_request_obj

    size = len(body) if declared is None else declared
    post = parse_request_obj(proof_post(nick, name, size)).post
    payload = post.signed_fields()
    if prove:
        payload.update(SecretSigner(society.secret()).prove(post))
    header = base64.urlsafe_b64encode(strictjson.dumps(payload).encode()).decode()
    return HTTP.put(
        f"{society.strict_url}/objects/{name}", content=body, headers={PROOF_HEADER: header}
    )


def test_an_unverified_poster_is_refused_and_nothing_is_stored(hubbed: Society) -> None:
    body = b"a stranger's bytes"
    name = sha256_of(body)
    # a nick that is not privileged, even with a valid HMAC: verified false, so refused
    answer = _raw_put(hubbed, "stranger", name, body, prove=True)
    assert answer.status_code == 403 and "not verified" in answer.json()["message"]
    # a privileged nick without its proof on the strict listener: 401
    answer = _raw_put(hubbed, "operator", name, body, prove=False)
    assert answer.status_code == 401
    # no proof header at all
    assert HTTP.put(f"{hubbed.strict_url}/objects/{name}", content=body).status_code == 401
    assert _stored(hubbed) == []

    async def put() -> str:
        async with objects_for(hubbed.home, "stranger", "test") as store:
            return await store.put(body)

    with pytest.raises(ObjectRefused, match="@stranger"):
        asyncio.run(put())


def test_a_body_whose_hash_is_not_its_name_is_refused(hubbed: Society) -> None:
    body = b"one thing"
    answer = _raw_put(hubbed, "operator", sha256_of(b"another"), body, prove=True)
    assert answer.status_code == 400 and "SHA-256" in answer.json()["message"]
    assert _stored(hubbed) == []
    bad = HTTP.get(f"{hubbed.strict_url}/objects/../secrets", headers=hubbed.read_headers())
    assert bad.status_code in (400, 404)


def test_a_proof_declaring_the_wrong_size_leaves_the_stored_object_alone(
    hubbed: Society,
) -> None:
    """A second PUT of a stored object whose proof declares another size is refused, and
    the object the room already names stays (it was deleted with the refusal before)."""
    body = b"a bundle another host will fetch"
    name = sha256_of(body)
    assert _raw_put(hubbed, "operator", name, body, prove=True).status_code == 201
    answer = _raw_put(hubbed, "operator", name, body, prove=True, declared=len(body) + 1)
    assert answer.status_code == 400 and "declared" in answer.json()["message"]
    assert _stored(hubbed) == [name]
    got = HTTP.get(f"{hubbed.strict_url}/objects/{name}", headers=hubbed.read_headers())
    assert got.status_code == 200 and got.content == body
    # a new object with a lying proof is refused and nothing is stored
    other = b"a second bundle"
    answer = _raw_put(hubbed, "operator", sha256_of(other), other, prove=True, declared=3)
    assert answer.status_code == 400 and _stored(hubbed) == [name]


def test_the_schema_describes_the_objects_endpoints(hubbed: Society) -> None:
    schema = HTTP.get(f"{hubbed.strict_url}/openapi.json").json()
    path = schema["paths"]["/objects/{sha256}"]
    assert set(path) >= {"get", "put"} and "413" in path["put"]["responses"]


def test_a_relaxed_nick_stores_and_reads_through_the_relaxed_listener(hubbed: Society) -> None:
    data = b"handed on by a nick without the secret"

    async def go() -> tuple[str, bytes]:
        async with objects_for(hubbed.home, "scout", "spec") as store:
            assert isinstance(store, HubObjects) and store.url == hubbed.relaxed_url
            name = await store.put(data)
            return name, await store.get(name)

    name, back = asyncio.run(go())
    assert back == data and _stored(hubbed) == [name]
    # without the relaxed token, the relaxed listener tells nothing
    assert HTTP.get(f"{hubbed.relaxed_url}/objects/{name}").status_code == 401


def test_an_object_never_takes_the_disk_under_the_rooms_low_water_mark(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    try:
        set_hub(society.root, min_free_disk_bytes=1 << 60)  # more than any disk has free
        society.start_hub()

        async def put() -> str:
            async with objects_for(society.home, "operator", "spec") as store:
                return await store.put(b"a bundle")

        with pytest.raises(ObjectRefused, match=r"507.*min_free_disk_bytes"):
            asyncio.run(put())
        assert _stored(society) == []
    finally:
        society.stop_all()


def test_a_replays_home_reads_objects_and_stores_none(hubbed: Society) -> None:
    from agents.home import Home

    class Replaying(Home):
        stores_objects = False  # as agents/replay/shadow.py's ShadowHome

    async def go() -> None:
        async with objects_for(hubbed.home, "operator", "spec") as live:
            name = await live.put(b"recorded in the run")
        async with objects_for(Replaying(hubbed.root), "operator", "spec") as replay:
            assert await replay.get(name) == b"recorded in the run"
            with pytest.raises(ObjectRefused, match="replayed step hands nothing on"):
                await replay.put(b"made by the replay")

    asyncio.run(go())
    assert _stored(hubbed) == [sha256_of(b"recorded in the run")]
