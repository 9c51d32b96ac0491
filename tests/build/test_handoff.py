"""A build whose grinder keeps its own build root: the build dir and the green clone travel
as git bundles through the room's object store, checked by hash (agents/build/handoff.py).

A real hub, foreman and step lurkers, real git. @py is started with $BULLPEN_BUILD_ROOT set
to an empty folder of its own, as a grinder on another host would have: it cannot use the
build dir @sandbox made (outside its root), so it fetches @testdesigner's bundle, unpacks
it under its own root and grinds there. `bullpen build`, whose root is neither, fetches the
green clone back, checks its hash and says where it put it.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import socket
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest

from agents.build.artifact import bring_back
from agents.build.config import ROOT_ENV
from agents.build.handoff import HandOffRefused, hand_on, receive
from agents.objects import objects_for
from room.objects import ObjectAltered
from tests.build.helpers import PY_FIX, calc_ticket, fixing_society, set_build
from tests.support import Society, StreamSociety, run_cli

pytestmark = pytest.mark.timeout(300)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
    return done.stdout.decode().strip()


def _stored(society: Society, name: str) -> bytes:
    """The object's bytes as the engine holds them, read past bullpen's client."""
    if not isinstance(society, StreamSociety):
        return (society.root / "objects" / name).read_bytes()

    async def read() -> bytes:
        nc = await nats.connect(society.servers)
        try:
            bucket = await nc.jetstream().object_store(society.home.society.objects.bucket)
            return bytes((await bucket.get(name)).data or b"")
        finally:
            await nc.close()

    return asyncio.run(read())


@pytest.mark.parametrize("engine", ["jsonl", "jetstream"])
def test_a_grinder_with_its_own_empty_root_goes_green_and_the_artifact_comes_back(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    builds, grinder_root = tmp_path / "builds", tmp_path / "py-root"
    grinder_root.mkdir()
    make: Any = Society
    if engine == "jetstream":  # the bundles go through NATS's own Object Store
        server = request.getfixturevalue("nats_server")

        def make(root: Path) -> Society:
            made = StreamSociety(root, server.urls, server.replicas)
            bucket = f"objects-{made.stream.lower()}"  # a bucket of the test's own
            society_file = made.root / "society.toml"
            society_file.write_text(
                society_file.read_text() + f'\n[objects]\nbucket = "{bucket}"\n'
            )
            return made

    society = fixing_society(tmp_path, builds, {"py": {ROOT_ENV: str(grinder_root)}}, make)
    try:
        folder = builds / "calc"
        path = calc_ticket(tmp_path, builds, "calc")
        done = run_cli(society.root, "build", str(path), "--wait-timeout", "200", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "BUILD GREEN" in done.stdout

        thread = done.stderr.split("build ", 1)[1].split()[0]
        replies = {
            (m["data"] or {}).get("kind") or m["from"]: m["data"]
            for m in society.lines()
            if m.get("thread") == thread and m["type"] == "reply" and m.get("data")
        }
        spec, grind = replies["testdesigner"], replies["grind-result"]
        handoff, artifact = spec["handoff"], grind["artifact"]
        for handed in (handoff, artifact):  # each named in the room, stored under its hash
            stored = _stored(society, handed["sha256"])
            assert hashlib.sha256(stored).hexdigest() == handed["sha256"]
            assert len(stored) == handed["bytes"]
        assert handoff["commit"] == spec["baseline"] and handoff["nick"] == "testdesigner"
        assert artifact["nick"] == "py" and artifact["step"] == "grind"

        # the grinder worked under its own root, on the unpacked bundle; the build dir kept
        # the stub and was never the grinder's
        unpacked = grinder_root / f"calc-{spec['baseline'][:12]}"
        assert _git(unpacked, "rev-parse", "HEAD") == spec["baseline"]
        assert Path(grind["clone"]).parent == grinder_root.resolve()
        assert grind["build_dir"] == str(unpacked)
        assert (folder / "calc.py").read_text() == ""

        # `bullpen build` fetched the green clone back, checked, and said where
        back = builds.resolve() / f"artifact-{artifact['commit'][:12]}"
        assert f"unpacked at {back}" in done.stderr and artifact["sha256"] in done.stderr
        assert "SHA-256 verified" in done.stderr
        assert _git(back, "rev-parse", "HEAD") == artifact["commit"]
        assert (back / "calc.py").read_text() == PY_FIX
    finally:
        society.stop_all()


def test_a_bundle_altered_in_the_store_or_holding_a_link_out_is_refused(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    try:
        society.start_hub()
        repo = tmp_path / "repo"
        repo.mkdir()
        (repo / "a.txt").write_text("a\n")
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
        home = society.home
        hand = asyncio.run(hand_on(home, "operator", "spec", repo))
        stored = society.root / "objects" / hand["sha256"]
        good = stored.read_bytes()
        stored.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
        with pytest.raises(ObjectAltered) as altered:
            asyncio.run(receive(home, "operator", "grind", hand, tmp_path / "out"))
        assert "step grind" in altered.value.message and hand["sha256"] in altered.value.message
        assert not (tmp_path / "out").exists()

        # a link out of the tree, handed on honestly: the hash is right, the tree is refused
        (repo / "escape").symlink_to("/etc/passwd")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b")
        hand = asyncio.run(hand_on(home, "operator", "spec", repo))
        with pytest.raises(HandOffRefused, match=r"link escape leaves the tree"):
            asyncio.run(receive(home, "operator", "grind", hand, tmp_path / "out"))
        assert not (tmp_path / "out").exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []

        # a hand-on naming a commit the bundle does not hold
        lying = {**hand, "commit": "0" * 40}
        with pytest.raises(HandOffRefused, match="does not hold the named commit"):
            asyncio.run(receive(home, "operator", "grind", lying, tmp_path / "out"))

        async def honest() -> bytes:
            async with objects_for(home, "operator", "grind") as store:
                return await store.get(hand["sha256"])

        assert asyncio.run(honest())  # the store itself is fine
    finally:
        society.stop_all()


def test_bullpen_build_fails_loud_when_the_green_artifact_cannot_be_had(tmp_path: Path) -> None:
    builds = tmp_path / "builds"
    society = Society(tmp_path / "home")
    try:
        set_build(society.root, root=str(builds), alias=str(tmp_path / "sandbox"))
        society.start_hub()
        elsewhere = str(tmp_path / "other-host" / "grind-x")  # not under this host's root
        never = {"sha256": "ab" * 32, "bytes": 10, "commit": "cd" * 20, "nick": "py",
                 "host": "gpu-1", "step": "grind"}  # fmt: skip
        said = io.StringIO()
        report = {"green": True, "clone": elsewhere, "artifact": never}
        assert asyncio.run(bring_back(society.home, report, said)) == 1
        text = said.getvalue()
        assert text.startswith("[ARTIFACT FAILED") and "(step artifact)" in text
        assert "@operator" in text and socket.gethostname() in text and "gpu-1" in text
        assert "no such object" in text
        assert not builds.exists() or list(builds.glob("artifact-*")) == []

        said = io.StringIO()  # no artifact named, and the clone is not here
        report = {"green": True, "clone": elsewhere, "artifact_problem": "the store was down"}
        assert asyncio.run(bring_back(society.home, report, said)) == 1
        assert "the store was down" in said.getvalue() and "not under this host" in said.getvalue()
    finally:
        society.stop_all()
