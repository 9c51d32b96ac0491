"""What the reliability suites share: seeded randomness, load processes, and room checks."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from room.chain import split_lines
from tests.support import REPO, Society, wait_for
from trust.audit import AuditResult, audit_lines


class Seeded(random.Random):
    """A random.Random that remembers its seed, so a failure can name it."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.seed_value = seed


def seed_for(nodeid: str) -> int:
    """BULLPEN_SEED when set (to replay a failure), else a fixed seed per test."""
    explicit = os.environ.get("BULLPEN_SEED")
    return int(explicit) if explicit else zlib.crc32(nodeid.encode())


def figures(name: str, **values: Any) -> None:
    """Print one line of measured figures; docs/reliability.md quotes them."""
    print(f"FIGURES {name}: " + json.dumps(values, sort_keys=True), flush=True)


def whole_lines(path: Path) -> list[bytes]:
    """The room's whole lines (split on \\n only); a line still being written is left out."""
    lines, _ = split_lines(path.read_bytes()) if path.exists() else ([], b"")
    return lines


def audit_whole(path: Path) -> AuditResult:
    """Audit the whole lines of a room that a hub may still be appending to."""
    return audit_lines(whole_lines(path))


@dataclass
class LoadResult:
    acks: dict[tuple[str, int], int] = field(default_factory=dict)  # (client, k) -> seq
    fails: dict[tuple[str, int], str] = field(default_factory=dict)

    def add(self, text: str) -> None:
        for line in text.splitlines():  # the loader's own output, not room lines
            kind, client, k, what = line.split(" ", 3)
            key = (client, int(k))
            assert key not in self.acks and key not in self.fails, f"loader repeated {key}"
            if kind == "ack":
                self.acks[key] = int(what)
            else:
                self.fails[key] = what


class Load:
    """Loader processes (tests/reliability/tools/loader.py) posting to a society's hub."""

    def __init__(
        self,
        society: Society,
        workdir: Path,
        *,
        processes: int = 2,
        clients: int = 4,
        posts: int = 0,
        signed: bool = True,
        pad: int = 0,
        rate: float = 0,
        url: str | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.stop_file = workdir / "stop"
        self.outs = [workdir / f"load-{p}.txt" for p in range(processes)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for p, out in enumerate(self.outs):
            argv = [
                sys.executable,
                "-m",
                "tests.reliability.tools.loader",
                url or society.strict_url,
                "--name",
                f"p{p}c",
                "--clients",
                str(clients),
                "--posts",
                str(posts),
                "--stop-file",
                str(self.stop_file),
                "--out",
                str(out),
                "--pad",
                str(pad),
                "--rate",
                str(rate),
            ]
            if signed:
                argv += ["--secret-file", str(society.home.trust.secret_file)]
            self.procs.append(subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL))

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def wait(self, timeout: float) -> LoadResult:
        """Wait for the loaders to finish on their own (a fixed number of posts)."""
        wait_for(lambda: not self.running(), timeout, "the loaders to finish")
        return self._collect()

    def stop(self, timeout: float = 60) -> LoadResult:
        self.stop_file.touch()
        return self.wait(timeout)

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def _collect(self) -> LoadResult:
        result = LoadResult()
        for proc, out in zip(self.procs, self.outs, strict=True):
            assert proc.returncode == 0, f"a loader exited {proc.returncode}"
            result.add(out.read_text())
        return result


def posts_in_room(lines: Iterable[bytes]) -> dict[tuple[str, int], list[int]]:
    """(client, k) -> the seqs of the room lines carrying that loader post."""
    found: dict[tuple[str, int], list[int]] = {}
    for raw in lines:
        line = json.loads(raw)
        data = line.get("data") or {}
        if "c" in data and "k" in data:
            found.setdefault((data["c"], data["k"]), []).append(line["seq"])
    return found


def check_acks(lines: list[bytes], load: LoadResult) -> dict[str, int]:
    """Every acknowledged post is in the room at its seq, no post is there twice, order is kept."""
    by_seq = {json.loads(raw)["seq"]: raw for raw in lines}
    lost = [key for key, seq in load.acks.items() if seq not in by_seq]
    assert not lost, f"{len(lost)} acknowledged posts are missing, e.g. {lost[:5]}"
    wrong = []
    for (client, k), seq in load.acks.items():
        line = json.loads(by_seq[seq])
        if line["data"] != {"c": client, "k": k} or not line["body"].startswith(f"{client} {k}"):
            wrong.append((client, k, seq))
    assert not wrong, f"acknowledged seqs hold other posts: {wrong[:5]}"
    stored = posts_in_room(lines)
    twice = {key: seqs for key, seqs in stored.items() if len(seqs) > 1}
    assert not twice, f"posts stored twice: {list(twice.items())[:5]}"
    unknown = [key for key in stored if key not in load.acks and key not in load.fails]
    assert not unknown, f"room lines no loader sent: {unknown[:5]}"
    per_client: dict[str, list[tuple[int, int]]] = {}
    for (client, k), seqs in stored.items():
        per_client.setdefault(client, []).append((k, seqs[0]))
    for client, pairs in per_client.items():
        seqs = [seq for _, seq in sorted(pairs)]
        assert seqs == sorted(seqs), f"client {client}'s posts are out of order in the room"
    return {
        "acked": len(load.acks),
        "failed": len(load.fails),
        "failed_but_stored": sum(1 for key in load.fails if key in stored),
    }


async def exchange(
    url: str, requests: list[bytes], connections: int = 8, timeout: float = 30.0
) -> list[tuple[int, bytes]]:
    """Send whole HTTP/1.1 requests over keep-alive connections; (status, body) for each, in order.

    Raw bytes, so a test controls every header and byte; a connection the
    server closes is reopened for the next request.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    answers: list[tuple[int, bytes]] = [(0, b"")] * len(requests)
    cursor = iter(range(len(requests)))

    async def one(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
    ) -> tuple[int, bytes, bool]:
        writer.write(request)
        await writer.drain()
        status = int((await reader.readuntil(b"\r\n")).split(b" ", 2)[1])
        length, close = 0, False
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        return status, await reader.readexactly(length), close

    async def worker() -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for index in cursor:
            if conn is None:
                conn = await asyncio.open_connection(host, port)
            status, body, close = await asyncio.wait_for(one(*conn, requests[index]), timeout)
            answers[index] = (status, body)
            if close:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return answers


def http_request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    """One well-formed HTTP/1.1 request's bytes."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    all_headers = {"content-type": "application/json", **(headers or {})}
    head += [f"{name}: {value}" for name, value in all_headers.items()]
    head.append(f"content-length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
