"""A lurker on JetStream reads through its durable consumer and resumes from it after any restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from nats.js.errors import NotFoundError

from room.jetstream.follow import consumer_name
from tests.jetstream.helpers import post, read, with_js
from tests.support import StreamSociety, add_nick, wait_for


def replies(society: StreamSociety) -> dict[str, int]:
    """How many replies the worker posted to each message id."""
    counts: dict[str, int] = {}
    for line in read(society, **{"from": "worker"}):
        counts[line["in_reply_to"]] = counts.get(line["in_reply_to"], 0) + 1
    return counts


def handled(count_file: Path) -> list[str]:
    return count_file.read_text().split() if count_file.exists() else []


def ack_floor(society: StreamSociety) -> int:
    """The worker's consumer's ack floor; -1 while a starting lurker re-creates the consumer.

    A lurker binds by deleting its consumer and adding it again at the old floor
    (room/jetstream/follow.py), so a poll that lands between the two finds none.
    """

    async def floor(js: Any) -> int:
        try:
            info = await js.consumer_info(society.stream, consumer_name("worker"))
        except NotFoundError:
            return -1
        return int(info.ack_floor.stream_seq)

    return with_js(society.servers, floor)


def test_durable_consumer_resumes_with_nothing_missed_or_answered_twice(
    tmp_path: Path, nats_server: Any
) -> None:
    """Killed mid-handling, down while asks arrive, killed before it acked: every ask answered once."""
    society = StreamSociety(tmp_path / "home", nats_server.urls)
    add_nick(society.root, "worker", handler="tests.tools.steps:counted", timeout_s=30)
    count_file = tmp_path / "handled"
    env = {"BULLPEN_TEST_COUNT_FILE": str(count_file)}
    try:
        society.start_hub()
        post(society, "@someone-else", "not for the worker")
        lurker = society.start_lurker("worker", env=env)
        asks = [post(society, "@worker", f"ask {n}") for n in range(3)]
        wait_for(lambda: len(replies(society)) == 3, 20, "the first three replies")

        # Killed while handling: the ask was delivered but never acknowledged.
        slow = post(society, "@worker", "slow", data={"sleep": 30})
        wait_for(lambda: slow["id"] in handled(count_file), 20, "the slow ask to be picked up")
        lurker.kill()
        asks += [slow] + [post(society, "@worker", f"while down {n}") for n in range(2)]
        lurker = society.start_lurker("worker", env=env)
        wait_for(lambda: len(replies(society)) == 6, 30, "every ask to be answered")

        # Killed after replying, before acknowledging: the consumer delivers it again, and the
        # lurker finds its own reply in the room instead of answering twice. The acknowledgement
        # follows the reply within 0.25 s, so freeze the lurker the moment its reply shows and
        # draw again (a few times at most) when the acknowledgement got out first.
        redelivered = None
        for attempt in range(8):
            last = post(society, "@worker", f"last {attempt}")
            asks.append(last)
            deadline = time.monotonic() + 20
            while last["id"] not in replies(society):  # polled tightly: the window is short
                assert time.monotonic() < deadline, "timed out waiting for the last reply"
                time.sleep(0.002)
            lurker.signal(signal.SIGSTOP)
            if ack_floor(society) < last["seq"]:
                redelivered = last
                break
            lurker.signal(signal.SIGCONT)
        assert redelivered is not None, "the acknowledgement always got out before the freeze"
        lurker.kill()
        lurker = society.start_lurker("worker", env=env)
        wait_for(
            lambda: ack_floor(society) >= redelivered["seq"],
            20,
            "the consumer to pass the last ask",
        )

        counts = replies(society)
        assert counts == {a["id"]: 1 for a in asks}, counts
        seen = handled(count_file)
        assert seen.count(slow["id"]) == 2  # interrupted once, handled again: not missed
        assert all(seen.count(a["id"]) == 1 for a in asks if a is not slow), seen
        assert all(
            r["to"] == "@operator" and r["verified"] for r in read(society, **{"from": "worker"})
        )
        # The consumer took only what is addressed to the worker.
        info = with_js(
            society.servers, lambda js: js.consumer_info(society.stream, consumer_name("worker"))
        )
        assert info.config.filter_subject == f"{society.stream.lower()}.to.worker.>"
        assert info.num_pending == 0
    finally:
        society.stop_all()
