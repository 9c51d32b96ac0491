"""Suite 2: the hub SIGKILLed at random moments under load, again and again.

Like Kafka's leader-kill tests: eight clients keep posting (half with HMAC
proofs) while the hub is killed with SIGKILL — mostly while serving, one
time in eight while it is still starting up and recovering — and started
again. After every restart the room's chain must verify; at the end every
acknowledged post must be in the room at the seq it was acknowledged with,
and no post may be there twice. CI kills 25 times; `pytest --soak` 200.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability.helpers import Load, Seeded, audit_whole, check_acks, figures, whole_lines
from tests.support import Proc, Society
from trust.audit import audit_file

pytestmark = pytest.mark.long  # one of the suite's slowest: run first (tests/conftest.py)


@pytest.mark.soak
def test_sigkill_loop_loses_no_acknowledged_post(
    society: Society, tmp_path: Path, soak: bool, rng: Seeded
) -> None:
    """Hundreds of SIGKILLs under load: 0 acknowledged posts lost, 0 duplicates, the chain verifies after every restart."""
    kills = 200 if soak else 25
    hub: Proc = society.start_hub()
    # Paced (8 × 60 posts/s), so the room grows linearly and auditing it after every
    # restart stays cheap; the hub is still mid-batch at almost every kill.
    load = Load(society, tmp_path / "load", processes=2, clients=4, rate=60)
    started = time.monotonic()
    during_startup = 0
    try:
        for n in range(kills):
            if rng.random() < 1 / 8:
                hub.kill()
                hub = society.spawn(f"hub-{n}", "hub")
                time.sleep(rng.uniform(0.0, 0.4))  # a random moment during start-up
                during_startup += 1
            else:
                time.sleep(rng.uniform(0.02, 0.5))  # a random moment while serving
            assert hub.alive(), f"the hub died before kill {n}:\n{hub.output()[-2000:]}"
            hub.kill()
            hub = society.start_hub()
            audit = audit_whole(society.room)
            assert audit.ok, f"after kill {n} (seed {rng.seed_value}): {audit.summary()}"
        result = load.stop()
    finally:
        load.kill()
    assert hub.stop() == 0
    lines = whole_lines(society.room)
    assert society.room.read_bytes().endswith(b"\n")
    final = audit_file(society.room)
    assert final.ok, final.summary()
    counts = check_acks(lines, result)
    assert counts["acked"] > kills * 20, "the load hardly ran: the test proved little"
    sides = list(society.room.parent.glob("room.jsonl.torn-*"))
    figures(
        "hub_sigkill",
        kills=kills,
        kills_during_startup=during_startup,
        lines=len(lines),
        torn_tails_moved_aside=len(sides),
        seconds=round(time.monotonic() - started, 1),
        **counts,
    )
