"""The JSONL log: one writer, whole lines, durable acks, recovery of a torn tail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from room.chain import GENESIS, line_hash
from room.reader import RoomFile
from tests.support import HTTP, REPO, Society, run_cli
from trust.audit import audit_file

POSTER = str(REPO / "tests" / "tools" / "poster.py")


def chat(society: Society, body: str, nick: str = "stranger") -> dict:
    answer = HTTP.post(
        f"{society.strict_url}/say",
        json={"from": nick, "to": "@sink", "type": "chat", "body": body},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


class TestChain:
    @pytest.fixture
    def society(self, engine_society: Society) -> Society:
        """Both engines: these cases are the room's behaviour, not the file's."""
        return engine_society

    def test_lines_are_stamped_and_chained(self, society: Society) -> None:
        """seq runs 1, 2, 3; prev is the SHA-256 of the previous line's exact bytes."""
        society.start_hub()
        for n in range(5):
            chat(society, f"line {n}")
        raw = society.room.read_bytes().split(b"\n")
        assert raw[-1] == b""
        lines = raw[:-1]
        parsed = [json.loads(line) for line in lines]
        assert [p["seq"] for p in parsed] == [1, 2, 3, 4, 5]
        assert parsed[0]["prev"] == GENESIS
        for before, after in zip(lines, parsed[1:], strict=False):
            assert after["prev"] == line_hash(before)
        assert len({p["id"] for p in parsed}) == 5
        assert [p["id"] for p in parsed] == sorted(p["id"] for p in parsed)
        assert all(p["ts"].endswith("Z") and len(p["ts"]) == 24 for p in parsed)

    def test_line_separators_inside_strings_do_not_split_lines(self, society: Society) -> None:
        """U+2028, U+0085 and friends stay inside their line: lines split on \\n only."""
        society.start_hub()
        chat(society, "a\u2028b\u0085c\x1cd\re")
        chat(society, "after")
        result = audit_file(society.room)
        assert result.ok, result.summary()
        assert result.lines == 2
        assert society.lines()[0]["body"] == "a\u2028b\u0085c\x1cd\re"

    def test_chain_continues_across_restarts(self, society: Society) -> None:
        """A restarted hub continues the seq and the chain from the last line."""
        hub = society.start_hub()
        chat(society, "before")
        assert hub.stop() == 0
        society.start_hub()
        line = chat(society, "after")
        assert line["seq"] == 2
        assert audit_file(society.room).ok


class TestOneWriter:
    def test_second_hub_refuses_to_start(self, society: Society) -> None:
        """A second hub on the same room exits non-zero saying another hub holds it."""
        first = society.start_hub()
        second = society.spawn("hub2", "hub")
        code = second.proc.wait(20)
        assert code == 1
        assert "another hub" in second.output()
        assert str(first.pid) in second.output()
        assert first.alive() and society.healthy()


class TestRecovery:
    def test_torn_last_line_is_moved_aside(self, society: Society) -> None:
        """A half-written last line is moved to a side file at start-up and reported."""
        hub = society.start_hub()
        for n in range(3):
            chat(society, f"kept {n}")
        hub.stop()
        whole = society.room.read_bytes()
        torn = b'{"seq":4,"id":"01ABC","ts":"2026-'
        society.room.write_bytes(whole + torn)
        society.start_hub()
        assert society.room.read_bytes() == whole
        sides = list(society.room.parent.glob("room.jsonl.torn-*"))
        assert len(sides) == 1 and sides[0].read_bytes() == torn
        assert "moved" in society.procs[-1].output() and sides[0].name in society.procs[-1].output()
        assert chat(society, "next")["seq"] == 4
        assert audit_file(society.room).ok

    def test_garbage_lines_after_the_last_good_line_are_moved_aside(self, society: Society) -> None:
        """Unparseable whole lines at the tail are moved aside too, never silently dropped."""
        hub = society.start_hub()
        chat(society, "good")
        hub.stop()
        whole = society.room.read_bytes()
        garbage = b'not json\n{"half": \n\x00\x01\x02'
        society.room.write_bytes(whole + garbage)
        society.start_hub()
        assert society.room.read_bytes() == whole
        side = next(society.room.parent.glob("room.jsonl.torn-*"))
        assert side.read_bytes() == garbage

    def test_edited_last_line_stops_the_hub(self, society: Society) -> None:
        """A last line that no longer chains is tampering: the hub refuses to guess (exit 78,
        restarting cannot help) and leaves the room as it found it."""
        hub = society.start_hub()
        chat(society, "one")
        chat(society, "two")
        hub.stop()
        lines = society.room.read_bytes().split(b"\n")
        doctored = json.loads(lines[1])
        doctored["prev"] = "f" * 64
        lines[1] = json.dumps(doctored, separators=(",", ":")).encode()
        society.room.write_bytes(b"\n".join(lines))
        edited = society.room.read_bytes()
        proc = society.spawn("hub-bad", "hub")
        assert proc.proc.wait(20) == 78
        assert "bullpen audit" in proc.output()
        assert society.room.read_bytes() == edited


class TestConcurrency:
    @pytest.fixture
    def society(self, engine_society: Society) -> Society:
        """Both engines: these cases are the room's behaviour, not the file's."""
        return engine_society

    @pytest.mark.long
    def test_sixteen_posting_processes(self, society: Society) -> None:
        """16 processes × 100 posts: exactly 1,600 new lines, seq gapless, order per client kept, audit ok."""
        society.start_hub()
        chat(society, "before the crowd")
        secret_file = str(society.home.trust.secret_file)
        procs = []
        for i in range(16):
            argv = [sys.executable, POSTER, society.strict_url, f"client{i}", "100"]
            if i % 2 == 0:
                argv = [
                    sys.executable,
                    POSTER,
                    society.strict_url,
                    "operator",
                    "100",
                    "--start",
                    str(i * 1000),
                    "--secret-file",
                    secret_file,
                ]
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=240)[0] for p in procs]
        acks = [line for out in outputs for line in out.splitlines() if line.startswith("ack")]
        assert len(acks) == 1600, [out.splitlines()[:3] for out in outputs]
        lines = society.lines()
        assert len(lines) == 1601
        assert [m["seq"] for m in lines] == list(range(1, 1602))
        by_body: dict[str, list[int]] = {}
        for m in lines[1:]:
            sender, k = m["body"].rsplit(" ", 1)
            key = sender if sender != "operator" else f"op{int(k) // 1000}"
            by_body.setdefault(key, []).append(int(k))
        assert len(by_body) == 16
        assert all(ks == sorted(ks) and len(ks) == 100 for ks in by_body.values())
        assert all(m["verified"] for m in lines[1:] if m["from"] == "operator")
        assert audit_file(society.room).ok
        cli = run_cli(society.root, "audit")
        assert cli.returncode == 0 and cli.stdout.strip() == "ok: 1601 lines"


class TestReader:
    def test_offset_after_finds_each_seq(self, tmp_path: Path) -> None:
        """Bisecting byte offsets finds the line after any seq in a large room."""
        room = tmp_path / "room.jsonl"
        prev = GENESIS
        with room.open("wb") as f:
            for seq in range(1, 3001):
                line = json.dumps(
                    {
                        "seq": seq,
                        "id": str(seq),
                        "ts": "t",
                        "from": "a",
                        "to": "@b",
                        "type": "chat",
                        "body": "x" * (seq % 97),
                        "prev": prev,
                    },
                    separators=(",", ":"),
                ).encode()
                prev = line_hash(line)
                f.write(line + b"\n")
        with RoomFile(room) as reader:
            for after in (0, 1, 2, 999, 1500, 2800, 2999, 3000, 5000):
                offset = reader.offset_after(after)
                nxt = next(reader.lines_from(offset), None)
                if after >= 3000:
                    assert nxt is None
                else:
                    assert json.loads(nxt[1])["seq"] == after + 1
            assert reader.last_seq() == 3000

    def test_partial_line_is_not_returned(self, tmp_path: Path) -> None:
        """A line still being written (no newline yet) is left for the next read."""
        room = tmp_path / "room.jsonl"
        room.write_bytes(b'{"seq":1}\n{"seq":2,"par')
        with RoomFile(room) as reader:
            assert [raw for _, raw in reader.lines_from(0)] == [b'{"seq":1}']


def test_hub_stops_on_sigterm_and_writes_a_checkpoint(society: Society) -> None:
    """SIGTERM stops the hub with exit 0 and leaves a signed checkpoint of the head."""
    hub = society.start_hub()
    chat(society, "one")
    assert hub.stop() == 0
    checkpoint = json.loads((society.room.parent / "room.jsonl.checkpoint").read_text())
    assert checkpoint["seq"] == 1
    assert checkpoint["head"] == line_hash(society.room.read_bytes().rstrip(b"\n"))
