"""Suite 1: sixteen writers and eight tailing readers on one room at once.

Writers are keep-alive clients posting one message at a time (half of them
as the privileged operator with an HMAC proof); readers follow the room from
seq 0, four by the file (inotify) and four by long-polling the hub. CI runs
16 × 300 posts; `pytest --soak` runs the issue's 16 × 5,000.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from room.chain import line_hash
from tests.reliability.helpers import Load, check_acks, figures, whole_lines
from tests.support import REPO, Society
from trust.audit import audit_file

CLIENTS = 16


@pytest.mark.soak
def test_sixteen_writers_eight_readers(society: Society, tmp_path: Path, soak: bool) -> None:
    """Exactly N×M gapless, chained lines, each client's order kept, and every reader sees each line once."""
    posts = 5000 if soak else 300
    total = CLIENTS * posts
    society.start_hub()
    out = tmp_path / "readers"
    readers = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.reliability.tools.readers",
            str(society.room),
            society.strict_url,
            "--file",
            "4",
            "--hub",
            "4",
            "--until",
            str(total),
            "--out",
            str(out),
            "--read-token-file",
            str(society.home.trust.read_token_file),
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    try:
        started = time.monotonic()
        load = Load(society, tmp_path / "load", processes=4, clients=CLIENTS // 4, posts=posts)
        result = load.wait(timeout=60 + total / 200)
        elapsed = time.monotonic() - started
        assert not result.fails, f"posts failed: {list(result.fails.items())[:5]}"
        assert len(result.acks) == total
        assert readers.wait(timeout=120) == 0
    finally:
        if readers.poll() is None:
            readers.kill()
            readers.wait(10)

    lines = whole_lines(society.room)
    assert society.room.read_bytes().endswith(b"\n")
    assert len(lines) == total
    parsed = [json.loads(raw) for raw in lines]
    assert [m["seq"] for m in parsed] == list(range(1, total + 1))
    counts = check_acks(lines, result)
    assert all(m["verified"] == (m["from"] == "operator") for m in parsed)
    audit = audit_file(society.room)
    assert audit.ok and audit.lines == total, audit.summary()

    expected = [f"{seq} {line_hash(raw)}" for seq, raw in enumerate(lines, start=1)]
    seen = sorted(out.glob("*.txt"))
    assert [p.stem for p in seen] == [f"file-{i}" for i in range(4)] + [
        f"hub-{i}" for i in range(4)
    ]
    for path in seen:
        got = path.read_text().split("\n")[:-1]
        assert got == expected, f"reader {path.stem} did not see every whole line once, in order"
    figures(
        "concurrent_writers",
        clients=CLIENTS,
        posts_per_client=posts,
        lines=total,
        readers=len(seen),
        seconds=round(elapsed, 1),
        posts_per_s=round(total / elapsed),
        **counts,
    )
