"""Benchmark: unverified lines in one open run's thread against an unrelated run's duration.

    python bench/foreman_junk.py                 # 60,000 junk lines, 15 runs each side
    python bench/foreman_junk.py --junk 5000 --runs 5
    python bench/foreman_junk.py --quick         # 2,000 junk lines, 3 runs each side

Two homes, each with a real hub, foreman and echo lurker, and a run A (a
relay to a nick that never answers) left open, so the foreman's tick (every
0.5 s here) looks at its thread. In one home, `--junk` unverified lines from
nicks nobody trusts are in A's thread. Unrelated relay runs (operator ask →
foreman → echo → final report) are timed in both homes, alternately; the
table prints both medians and their ratio. The goal (issue 13 §3): a ratio
under 1.10; a full run exits 1 when it is missed, a --quick run (too few runs
to judge) never does.

The junk is appended to the room file while the hub is stopped, each line
stamped and chained exactly as the hub stamps it (room.log.build_line): the
foreman sees the same thread as after a flood, without the bench spending
minutes posting it. Both homes restart their hub, so each begins alike;
a hub that was up through a real flood indexed the thread as it grew, so the
one-time costs of a fresh start are paid before timing (`prime`, WARM_UP runs).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.table import goal_exit, print_table  # noqa: E402
from room.chain import line_hash  # noqa: E402
from room.ids import IdClock  # noqa: E402
from room.log import Draft, build_line  # noqa: E402
from room.message import Post  # noqa: E402
from room.reader import seq_of  # noqa: E402
from tests.support import Society, add_nick, wait_for  # noqa: E402
from tests.test_lurker import say  # noqa: E402

OPEN = "open-run"
WARM_UP = 3  # untimed runs after each (re)start: the foreman's own first read of the thread


def relay(society: Society, thread: str, to: str) -> None:
    data = {"pipeline": "relay", "to": [to], "text": f"hello from {thread}"}
    say(society, "@foreman", "relay", thread=thread, data=data)


def final(society: Society, thread: str, timeout: float = 60) -> None:
    """Long-poll the hub for the foreman's final report in `thread`."""
    after, deadline = 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        params = {"thread": thread, "from": "foreman", "after": after, "wait": 5, "limit": 1000}
        response = httpx.get(
            f"{society.strict_url}/read", params=params, headers=society.read_headers(), timeout=15
        )
        response.raise_for_status()  # /read needs the read token: a refusal is a broken bench
        answer = response.json()
        if any((m.get("data") or {}).get("final") for m in answer["messages"]):
            return
        after = answer["last_seq"]
    raise TimeoutError(f"no final report in {thread} after {timeout} s")


def prime(society: Society) -> None:
    """Pay the hub's one-time costs of a freshly started hub: its index of the open run's
    thread and its survey of the room's threads (both shared by every later reader)."""
    for thread in (OPEN, "nobody-reads-this"):
        httpx.get(
            f"{society.strict_url}/read",
            params={"thread": thread},
            headers=society.read_headers(),
            timeout=120,
        ).raise_for_status()


def one_run(society: Society, thread: str) -> float:
    started = time.perf_counter()
    relay(society, thread, "echo")
    final(society, thread)
    return time.perf_counter() - started


def ready(society: Society, junk: int) -> None:
    """Hub, foreman and echo up, run A open, `junk` lines in its thread, primed and warm."""
    toml = society.root / "society.toml"
    text = re.sub(r"(?m)^overdue_check_s = .*$", "overdue_check_s = 0.5", toml.read_text())
    toml.write_text(text)
    add_nick(society.root, "hold", handler="agents.examples:echo")  # never started
    hub = society.start_hub()
    society.start_lurker("foreman")
    society.start_lurker("echo")
    relay(society, OPEN, "hold")
    wait_for(
        lambda: any(m.get("to") == "@hold" for m in society.lines()),
        30,
        "the foreman's ask in the open run",
    )
    hub.stop()  # both homes restart their hub, so each begins alike
    if junk:
        append_junk(society.room, junk)
    society.start_hub()
    prime(society)
    for n in range(WARM_UP):
        one_run(society, f"warm-{n}")


def append_junk(room: Path, count: int) -> None:
    """`count` unverified asks in the open run's thread, chained after the room's last line."""
    last = room.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    seq, prev = seq_of(last), line_hash(last)
    clock = IdClock()
    with room.open("ab") as out:
        for n in range(count):
            post = Post.model_validate(
                {
                    "from": f"mallory{n % 50}",
                    "to": "@hold",
                    "type": "ask",
                    "body": f"junk {n} " + "x" * 120,
                    "thread": OPEN,
                }
            )
            ulid, ms = clock.next()
            seq += 1
            raw = build_line(seq, ulid, ms, Draft(post, False), prev)
            prev = line_hash(raw)
            out.write(raw + b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--junk", type=int, default=60_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="2,000 junk lines, 3 runs")
    args = parser.parse_args()
    if args.quick:
        args.junk, args.runs = min(args.junk, 2000), min(args.runs, 3)
    clean: list[float] = []
    stuffed: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        homes = (Society(Path(tmp) / "clean"), Society(Path(tmp) / "stuffed"))
        try:
            ready(homes[0], 0)
            ready(homes[1], args.junk)
            for n in range(args.runs):  # alternating, so a busier moment hits both alike
                order = [(homes[0], clean), (homes[1], stuffed)]
                for society, durations in order if n % 2 == 0 else order[::-1]:
                    durations.append(one_run(society, f"run-{n}"))
        finally:
            for society in homes:
                society.stop_all()
    for label, durations in (("clean", clean), ("stuffed", stuffed)):
        shown = " ".join(f"{d * 1000:.0f}" for d in durations)
        print(f"{label}: {shown} ms", file=sys.stderr)
    b, a = statistics.median(clean), statistics.median(stuffed)
    print_table(
        [
            ("measure", "value"),
            ("junk lines in the open run's thread", f"{args.junk}"),
            ("runs timed per home (alternating)", f"{args.runs}"),
            ("median run, no junk (ms)", f"{b * 1000:.1f}"),
            ("median run, with junk (ms)", f"{a * 1000:.1f}"),
            ("ratio (goal < 1.10)", f"{a / b:.3f}"),
            (
                "goal met",
                "not judged (--quick)" if args.quick else ("yes" if a / b < 1.10 else "no"),
            ),
        ]
    )
    return goal_exit(a / b < 1.10, args.quick)


if __name__ == "__main__":
    raise SystemExit(main())
