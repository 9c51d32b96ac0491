"""The fence around a `cmd` code seat: real turns of tests/fakes/fake_coder.py, bwrap where it works.

One home for the module (no hub: a turn needs none). Each test gives the seat a fresh
clone under the home's build root and calls `take_turn` as the grind does, under
`[build] seat_fence = "guarded"` (the default: the secrets hidden, the build root read-only
but the clone) or "strict" (everything read-only but the clone and `writable`, the home
hidden). Where bubblewrap cannot create namespaces, the bwrap assertions become assertions
about the fallback: the seat's fence is `none` and the environment is still clean.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.build.codeseat import (
    SEAT_STRICT,
    SEAT_UNFENCED,
    CodeTurn,
    check_code_seat,
    take_turn,
)
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, RLIMITS, choose
from agents.build.grind import ladder
from agents.build.runs import Workspace
from room.errors import ConfigError, StepFailed
from tests.build.helpers import coder_seat, set_build
from tests.support import Society, free_port

FENCE = choose("auto")
FENCED = FENCE == BWRAP


class Place:
    """The module's home, its build root and a folder outside both."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.society = Society(base / "home")
        self.builds = base / "builds"
        self.builds.mkdir()
        set_build(self.society.root, root=str(self.builds), alias=str(base / "sandbox"))

    @property
    def root(self) -> Path:
        return self.society.root

    def seat(self, name: str, mode: str, writable: list[str] | None = None, **env: str) -> None:
        coder_seat(self.root, name, mode, timeout_s=30, writable=writable, **env)

    def space(self, fence: str = FENCE) -> Workspace:
        clone = self.builds / f"grind-{secrets.token_hex(4)}"
        cache = clone.with_name(clone.name + ".cache")
        clone.mkdir()
        cache.mkdir()
        return Workspace(clone, cache, fence, (self.root.resolve(),))

    def build(self, seat_fence: str = "guarded") -> BuildConfig:
        return BuildConfig(
            root=str(self.builds), alias=str(self.base / "sandbox"), seat_fence=seat_fence
        )

    def turn(self, name: str, space: Workspace, seat_fence: str = "guarded") -> CodeTurn:
        home, build = self.society.home, self.build(seat_fence)
        extra = {"BULLPEN_SPEC": str(space.folder / "test_x.py"), "BULLPEN_TIER": name,
                 "BULLPEN_ITERATION": "1"}  # fmt: skip
        return asyncio.run(take_turn(home, "py", name, space, "step: code\n", extra, build))


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Place]:
    made = Place(tmp_path_factory.mktemp("seatfence"))
    try:
        yield made
    finally:
        made.society.stop_all()


@pytest.mark.parametrize("mode", ["guarded", "strict"])
def test_the_seat_never_sees_the_homes_secret(
    place: Place, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The secrets (strict: the whole home) are hidden, empty in the sandbox; nothing in the
    seat's environment points at them or holds one, whatever the grinder's environment held."""
    secret_file = place.root / "secrets" / "post-secret"
    secret = secret_file.read_text().strip()
    assert len(secret) >= 16
    monkeypatch.setenv("BULLPEN_HOME", str(place.root))
    monkeypatch.setenv("SOME_TOKEN_FILE", str(secret_file))
    monkeypatch.setenv("LEAKED_SECRET", secret)
    monkeypatch.setenv("HARMLESS", "kept")
    where = place.base / "where-the-secret-is.txt"
    where.write_text(str(secret_file))
    place.seat("look", "look", FAKE_CODER_READ=str(where))
    space = place.space()
    turn = place.turn("look", space, mode)
    assert turn.ok, turn.problem
    seen = json.loads((space.folder / "look.json").read_text())
    env = seen["env"]
    assert "SOME_TOKEN_FILE" not in env and "LEAKED_SECRET" not in env
    assert env["HARMLESS"] == "kept" and env["FAKE_CODER_MODE"] == "look"
    assert {k for k in env if k.startswith("BULLPEN_")} == {
        "BULLPEN_SPEC", "BULLPEN_TIER", "BULLPEN_ITERATION",
    }  # fmt: skip
    if FENCED and mode == "strict":
        assert turn.fence == SEAT_STRICT
        assert seen["read"].startswith("unreadable: No such file")
        assert seen["listed"] == "unlistable: No such file or directory"  # secrets/ is gone
        assert seen["scratch"] and env["TMPDIR"].startswith(str(space.cache))
        found = [p for p in space.folder.rglob("*") if p.is_file()]
        assert all(secret not in p.read_text(errors="replace") for p in found)
        assert not list(space.cache.glob("seat-tmp-*"))  # the scratch went with the turn
    elif FENCED:  # guarded: the home is there, its secrets are not
        assert turn.fence == BWRAP
        assert seen["read"].startswith("unreadable: No such file")
        assert seen["listed"] == []  # secrets/ is an empty folder in the sandbox
        assert (place.root / "society.toml").is_file() and seen["scratch"]
        found = [p for p in space.folder.rglob("*") if p.is_file()]
        assert all(secret not in p.read_text(errors="replace") for p in found)
    else:
        assert turn.fence == SEAT_UNFENCED  # the fallback does not hide the home


@pytest.mark.parametrize(
    ("mode", "where"), [("guarded", "build dir"), ("strict", "build dir"), ("strict", "tmp")]
)
def test_a_write_outside_the_clone_fails_inside_the_fence(
    place: Place, mode: str, where: str
) -> None:
    """A refused write stops the grind (fatal), naming the seat and what it tried."""
    campaign = place.builds / "campaign"
    campaign.mkdir(exist_ok=True)
    target = (campaign if where == "build dir" else Path("/tmp")) / f"escaped-{os.getpid()}.txt"
    place.seat("escape", "escape", FAKE_CODER_ESCAPE=str(target))
    turn = place.turn("escape", place.space(), mode)
    try:
        if FENCED:
            assert not turn.ok and turn.fatal
            assert turn.fence == (SEAT_STRICT if mode == "strict" else BWRAP)
            assert "code seat escape tried to write outside the clone" in str(turn.problem)
            assert "Read-only file system" in str(turn.problem)
            assert not target.exists() and os.listdir(campaign) == []
        else:
            assert turn.ok and target.exists()  # unfenced: only the grind's check catches it
    finally:
        target.unlink(missing_ok=True)


def test_guarded_leaves_the_rest_of_the_users_files_as_they_are(place: Place) -> None:
    """Under the default, a seat may write where its user may (its own logs, /tmp), but the
    clone is the only place under the build root it may change."""
    target = place.base / f"seat-log-{os.getpid()}.txt"
    place.seat("logger", "escape", FAKE_CODER_ESCAPE=str(target))
    try:
        turn = place.turn("logger", place.space())
        assert turn.ok, turn.problem
        assert target.read_text() == "escaped\n"
        assert turn.fence == (BWRAP if FENCED else SEAT_UNFENCED)
    finally:
        target.unlink(missing_ok=True)


def test_the_seat_reaches_a_server_on_the_host(place: Place) -> None:
    """The network is shared (a coding agent must reach its model): a real listening socket
    on the host answers the seat."""
    port = free_port()
    greeting = f"hello from port {port}".encode()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        listener.settimeout(20)

        def serve() -> None:
            try:
                peer, _ = listener.accept()
            except TimeoutError:  # the seat never came: the assertions below say so
                return
            with peer:
                peer.sendall(greeting)

        server = threading.Thread(target=serve)
        server.start()
        place.seat("connect", "connect", FAKE_CODER_PORT=str(port))
        space = place.space()
        turn = place.turn("connect", space)
        server.join(25)
    assert turn.ok, turn.problem
    assert turn.fence == (BWRAP if FENCED else SEAT_UNFENCED)
    assert (space.folder / "reply.txt").read_bytes() == greeting


def test_a_declared_writable_path_is_writable_and_no_other(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under strict, `writable = ["~/.agent"]` (~ expanded) is open to the seat; its sibling
    is not."""
    user_home = place.base / "user"
    (user_home / ".agent").mkdir(parents=True)
    (user_home / ".other").mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    declared, undeclared = user_home / ".agent" / "state.json", user_home / ".other" / "x"
    place.seat("stateful", "escape", writable=["~/.agent"], FAKE_CODER_ESCAPE=str(declared))
    turn = place.turn("stateful", place.space(), "strict")
    assert turn.ok, turn.problem
    assert declared.read_text() == "escaped\n"
    place.seat("nosy", "escape", writable=["~/.agent"], FAKE_CODER_ESCAPE=str(undeclared))
    turn = place.turn("nosy", place.space(), "strict")
    if FENCED:
        assert not turn.ok and "Read-only file system" in str(turn.problem)
        assert not undeclared.exists()
    else:
        assert turn.ok and undeclared.exists()


def test_under_rlimits_the_seat_runs_unfenced_and_says_so(place: Place) -> None:
    target = place.base / "unfenced.txt"
    place.seat("plain", "escape", FAKE_CODER_ESCAPE=str(target))
    turn = place.turn("plain", place.space(RLIMITS))
    assert turn.ok and turn.fence == SEAT_UNFENCED and target.read_text() == "escaped\n"


def _refused(place: Place, writable: list[str], mode: str = "guarded", **env: str) -> str:
    place.seat("bad", "nothing", writable=writable, **env)
    with pytest.raises(ConfigError) as caught:
        check_code_seat(place.society.home, "bad", place.build(mode))
    with pytest.raises(StepFailed):  # the grind's ladder check refuses it before any clone
        ladder(place.society.home, ["bad"], place.build(mode))
    return caught.value.message


def test_a_bad_writable_path_or_env_is_a_clear_config_error(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(place.base / "user"))
    (place.base / "user").mkdir(exist_ok=True)
    home = place.root.resolve()
    cases = {
        str(place.base / "missing"): "does not exist; create it (mkdir -p",
        str(place.root): f"overlaps the bullpen home {home}",
        str(place.root / "secrets"): f"overlaps the bullpen home {home}",
        str(place.base): f"overlaps the bullpen home {home}",  # it holds the home
        str(place.builds): "overlaps the build root ([build] root)",
        "/": "is a system folder",
        "/etc": "is a system folder",
        "/usr/lib": "is a system folder",
        "/tmp": "is a system folder",
        "~": "is your whole home folder",
    }
    for given, says in cases.items():
        message = _refused(place, [given])
        assert f"[seats.bad] writable {given!r}" in message and says in message, message
    secret = place.society.secret().decode().strip()
    message = _refused(place, [], TOKEN_FILE=str(place.root / "secrets/gateway/py.token"))
    assert "env TOKEN_FILE holds a path to the bullpen home's secrets" in message
    message = _refused(place, [], "strict", LOG=str(place.root / "seat.log"))
    assert "env LOG holds a path in the bullpen home" in message  # strict hides it all
    place.seat("fine", "nothing", LOG=str(place.root / "seat.log"))
    assert check_code_seat(place.society.home, "fine", place.build()) == []  # guarded: ok
    message = _refused(place, [], KEY=secret)
    place.seat("bad", "nothing")  # the secret leaves society.toml again
    assert "env KEY holds the shared secret" in message and secret not in message
    place.seat("relative", "nothing", writable=["state"])
    with pytest.raises(ConfigError, match="must be an absolute path or start with ~"):
        check_code_seat(place.society.home, "relative", place.build())
