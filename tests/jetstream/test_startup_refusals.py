"""A hub or room command that cannot use the NATS servers says why and exits; it never hangs.

Transient trouble (no server answers, a cluster without quorum) exits 1, so
systemd or `bullpen up` starts the hub again later; a configuration that
cannot work (no JetStream, replicas the servers cannot hold, subjects that
clash with another stream, refused credentials) exits 78, so systemd stops
retrying until a person fixes it (docs/scaling.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import ServiceUnavailableError

from room.jetstream.stream import sync_warning
from tests.jetstream.helpers import Finished, log_events, run_side_by_side, with_js
from tests.jetstream.servers import NatsCluster
from tests.support import Society, StreamSociety, free_port, set_room_engine, wait_for

pytestmark = pytest.mark.long  # one of the suite's slowest: run first (tests/conftest.py)

EXIT_START, EXIT_CONFIG = 1, 78


def room_commands(home: Path) -> dict[str, list[str]]:
    """The hub and the three room commands that talk to the stream."""
    empty = home / "empty-room.jsonl"
    empty.write_bytes(b"")
    return {
        "hub": ["hub"],
        "audit": ["audit"],
        "export": ["export", str(home / "exported.jsonl")],
        "import": ["import", str(empty)],
    }


def assert_clean(result: Finished, code: int, *phrases: str) -> None:
    """Exited with `code`, said every phrase, and showed no traceback."""
    assert result.code == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, f"{phrase!r} not in:\n{result.stderr}"


def set_prefix(root: Path, prefix: str) -> None:
    society = root / "society.toml"
    text = society.read_text()
    society.write_text(
        re.sub(r'^subject_prefix = ".*"$', f'subject_prefix = "{prefix}"', text, flags=re.M)
    )


class TestUnreachable:
    def test_no_server_reachable_fails_each_command_in_bounded_time(self, tmp_path: Path) -> None:
        """Nothing listens at [room] servers: hub, audit, export, import each say so and exit 1."""
        society = Society(tmp_path / "home")
        url = f"nats://127.0.0.1:{free_port()}"
        set_room_engine(society.root, [url], "NOWHERE", 1)
        done = run_side_by_side(society.root, room_commands(society.root), timeout=60)
        for name, result in done.items():
            assert_clean(result, EXIT_START, f"cannot reach NATS at {url}")
            limit = 40 if name == "hub" else 20
            assert result.seconds < limit, f"{name} took {result.seconds:.1f} s"
            assert result.stderr.count("nats connection error") == 0, result.stderr
        assert "bullpen-audit" in done["audit"].stderr
        assert "bullpen-export" not in done["audit"].stderr

    def test_refused_credentials_are_a_configuration_error(
        self, tmp_path: Path, own_nats: Callable[..., NatsCluster]
    ) -> None:
        """A server that refuses the connection: fixing the credentials is a person's job (78)."""
        server = own_nats(token="only-with-this-token")
        society = Society(tmp_path / "home")
        set_room_engine(society.root, server.urls, "LOCKED", 1)
        done = run_side_by_side(society.root, room_commands(society.root), timeout=60)
        for name, result in done.items():
            assert_clean(result, EXIT_CONFIG, "refused", "[room] credentials")
            assert result.seconds < 20, f"{name} took {result.seconds:.1f} s"


class TestJetStreamMissing:
    def test_server_without_jetstream_says_to_enable_it(
        self, tmp_path: Path, own_nats: Callable[..., NatsCluster]
    ) -> None:
        """nats-server started without -js: a configuration error that names the fix."""
        server = own_nats(jetstream=False)
        society = Society(tmp_path / "home")
        set_room_engine(society.root, server.urls, "NOJS", 1)
        done = run_side_by_side(society.root, room_commands(society.root), timeout=60)
        for result in done.values():
            assert_clean(result, EXIT_CONFIG, "without JetStream", "-js", "jetstream {}")

    def test_cluster_without_quorum_is_transient(
        self, tmp_path: Path, own_nats: Callable[..., NatsCluster]
    ) -> None:
        """One server of three is up: not ready yet, try again (exit 1, not 78)."""
        cluster = own_nats(3)
        cluster.stop()
        alone = cluster.nodes[0]
        alone.start()

        def not_ready() -> bool:
            async def probe(js: Any) -> bool:
                try:
                    await js.stream_info("ANY")
                except ServiceUnavailableError as exc:
                    return exc.err_code == 10008
                except Exception:
                    return False
                return False

            try:
                return with_js([alone.url], probe)
            except Exception:
                return False

        wait_for(not_ready, 30, "the lone server to report JetStream temporarily unavailable")
        society = Society(tmp_path / "home")
        set_room_engine(society.root, cluster.urls, "NOQUORUM", 3)
        commands = room_commands(society.root)
        done = run_side_by_side(
            society.root, {"hub": commands["hub"], "audit": commands["audit"]}, timeout=90
        )
        for result in done.values():
            assert_clean(result, EXIT_START, "not ready")


class TestStreamConfiguration:
    def test_three_replicas_on_one_server(self, tmp_path: Path, nats_server: Any) -> None:
        """replicas = 3 on a single server: say to set replicas = 1 or add servers (78)."""
        society = StreamSociety(tmp_path / "home", nats_server.urls, replicas=3)
        commands = room_commands(society.root)
        done = run_side_by_side(
            society.root, {"hub": commands["hub"], "import": commands["import"]}, timeout=60
        )
        for result in done.values():
            assert_clean(result, EXIT_CONFIG, "replicas = 1", "not clustered")

    def test_subjects_taken_by_another_stream(self, tmp_path: Path, nats_server: Any) -> None:
        """Another room's stream takes this subject_prefix: say to change it (78)."""
        first = StreamSociety(tmp_path / "first", nats_server.urls)
        first.start_hub()
        second = StreamSociety(tmp_path / "second", nats_server.urls)
        set_prefix(second.root, first.stream.lower())
        commands = room_commands(second.root)
        done = run_side_by_side(
            second.root, {"hub": commands["hub"], "import": commands["import"]}, timeout=60
        )
        for result in done.values():
            assert_clean(result, EXIT_CONFIG, "overlap", "subject_prefix")

    def test_another_rooms_stream_is_refused_with_78_everywhere(
        self, tmp_path: Path, nats_server: Any
    ) -> None:
        """A stream of that name with other subjects: the same refusal and exit code from every command."""
        first = StreamSociety(tmp_path / "first", nats_server.urls)
        first.start_hub()
        second = StreamSociety(tmp_path / "second", nats_server.urls)
        set_room_engine(second.root, nats_server.urls, first.stream, 1)
        set_prefix(second.root, "elsewhere")
        done = run_side_by_side(second.root, room_commands(second.root), timeout=60)
        for result in done.values():
            assert_clean(result, EXIT_CONFIG, "not this room's stream")


class TestStartupLog:
    def test_hub_names_its_stream_and_warns_about_old_servers(
        self, tmp_path: Path, nats_server: Any
    ) -> None:
        """`hub listening` names the stream and servers; a pre-2.10 server draws the fsync warning."""
        society = StreamSociety(tmp_path / "home", nats_server.urls)
        hub = society.start_hub()
        wait_for(lambda: "hub listening" in hub.output(), 10, "the hub's listening line")
        events = log_events(hub.output())
        listening = next(e for e in events if e.get("event") == "hub listening")
        assert listening["stream"] == society.stream
        assert listening["servers"] == ", ".join(nats_server.urls)
        assert "room.jsonl" not in str(listening)
        warnings = [e for e in events if "power" in str(e.get("event"))]
        if nats_server.version < (2, 10, 0):
            assert len(warnings) == 1, events
            assert "`bullpen docs scaling`" in warnings[0]["event"]
            assert warnings[0]["version"] == ".".join(str(p) for p in nats_server.version)
        else:
            assert warnings == [], warnings


class TestSyncWarning:
    """Which server versions draw the warning (pure: no server needed)."""

    @pytest.mark.parametrize("version", ["2.9.10", "2.2.0", "1.4.1", "2.9.25-beta.1"])
    def test_older_than_2_10_warns(self, version: str) -> None:
        """Servers that cannot be told `sync_interval: always` draw it."""
        assert sync_warning(version) is not None

    @pytest.mark.parametrize("version", ["2.10.0", "2.15.1", "3.0.0", "2.11.0-RC.2"])
    def test_2_10_and_later_do_not(self, version: str) -> None:
        """Servers that can fsync before acknowledging do not."""
        assert sync_warning(version) is None

    def test_an_unreadable_version_is_not_an_error(self) -> None:
        """A version string it cannot read warns rather than fails."""
        assert sync_warning("weird") is not None
