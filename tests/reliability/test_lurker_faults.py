"""Suite 9: a lurker SIGKILLed again and again while it handles asks.

A lurker whose handler records every handling (tests/tools/steps.py:counted)
and takes a moment the first time is killed at random moments: while the
handler runs, just after its reply reached the room (before or after it
saved its cursor), or before it even saw the ask; it is started again each
time. Asks keep coming throughout. At the end every ask has exactly one
reply: none answered twice, none skipped. Run for a lurker reading the room
file and for one long-polling the hub; CI kills 8 times each, `pytest
--soak` 50 times each (100 in all).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import Seeded, figures
from tests.support import Society, add_nick, wait_for
from tests.test_lurker import replies_to, say


@pytest.mark.soak
@pytest.mark.parametrize("read_mode", ["file", "hub"])
def test_sigkilled_lurker_answers_each_ask_once(
    society: Society, tmp_path: Path, read_mode: str, soak: bool, rng: Seeded
) -> None:
    """Each SIGKILL mid-handling loses no ask and duplicates no reply."""
    kills = 50 if soak else 8
    count = tmp_path / "count"
    env = {"BULLPEN_TEST_COUNT_FILE": str(count)}
    add_nick(
        society.root, "worker", handler="tests.tools.steps:counted", timeout_s=30, read=read_mode
    )
    society.start_hub()
    lurker = society.start_lurker("worker", env=env)
    asks: list[dict[str, Any]] = []
    moments: dict[str, int] = {}
    started = time.monotonic()

    def handled(ask: dict[str, Any]) -> bool:
        return count.exists() and ask["id"] in count.read_text().split()

    for n in range(kills):
        ask = say(society, "@worker", f"job {n}", data={"sleep": rng.uniform(0.2, 0.8)})
        asks.append(ask)
        if rng.random() < 0.3:  # sometimes a second ask is waiting too
            asks.append(say(society, "@worker", f"job {n}b", data={"sleep": 0.1}))
        moment = rng.choice(["handling", "handling", "just replied", "any time"])
        if moment == "handling":
            wait_for(lambda ask=ask: handled(ask), 30, f"the lurker to start on job {n}")
            time.sleep(rng.uniform(0.0, 0.15))  # a random moment inside the handler's sleep
        elif moment == "just replied":
            wait_for(lambda ask=ask: replies_to(society, ask["id"]), 30, f"the reply to job {n}")
        else:
            time.sleep(rng.uniform(0.0, 0.5))
        moments[moment] = moments.get(moment, 0) + 1
        assert lurker.alive(), lurker.output()[-2000:]
        lurker.kill()
        lurker = society.start_lurker("worker", env=env)
    last = say(society, "@worker", "the last job", data={"sleep": 0})
    asks.append(last)
    for ask in asks:
        wait_for(lambda ask=ask: replies_to(society, ask["id"]), 30, f"a reply to {ask['body']}")
    twice = [a["body"] for a in asks if len(replies_to(society, a["id"])) != 1]
    assert not twice, f"answered more than once: {twice} (seed {rng.seed_value})"
    handlings = count.read_text().split()
    assert set(handlings) == {a["id"] for a in asks}
    figures(
        f"lurker sigkill ({read_mode})",
        kills=kills,
        asks=len(asks),
        handlings=len(handlings),
        moments=moments,
        seconds=round(time.monotonic() - started, 1),
    )
