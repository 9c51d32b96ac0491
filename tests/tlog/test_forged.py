"""Issue 23: a keyed nick's unsigned line appended while the hub is down is refused.

`via: "relaxed"` is as forgeable as `verified`. The hub signs a tree
checkpoint before it answers a keyed nick's proofless relaxed post, so the
live audit accepts that line; a forger who appends the same kind of line
(chained, `verified: true`, `sig: null`, `via: "relaxed"`) while the hub is
stopped gets it past nothing: `bullpen audit` fails at its seq, and the
hub's next start refuses the room (exit 78) instead of signing it.
Both engines: a file appended to, and a message published straight to the stream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from room import strictjson
from room.chain import line_hash
from room.tlog import note_path
from tests.conftest import ENGINES
from tests.jetstream.helpers import with_js
from tests.support import HTTP, Society, StreamSociety, run_cli, set_hub, society_on
from trust import note


def _keyed(society: Society) -> None:
    made = run_cli(society.root, "keys", "new", "scribe")
    assert made.returncode == 0, made.stderr
    trust = society.root / "trust.toml"
    trust.write_text(trust.read_text() + made.stdout)
    set_hub(society.root, checkpoint_interval_s=3600)  # only the cover can sign in time


def _relaxed_post(society: Society) -> dict[str, Any]:
    answer = HTTP.post(
        f"{society.relaxed_url}/say",
        json={"from": "scribe", "to": "@echo", "type": "chat", "body": "by the token"},
        headers={"authorization": f"Bearer {society.token()}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _forge(society: Society) -> bytes:
    """The forged line: the last line's fields, claiming scribe, chained to it."""
    last = society.room.read_bytes().split(b"\n")[-2]
    forged = {**json.loads(last), "seq": json.loads(last)["seq"] + 1}
    forged.update(
        {
            "id": "01FORGED0000000000000000000",
            "from": "scribe",
            "body": "forged while the hub was down",
            "sig": None,
            "verified": True,
            "via": "relaxed",
        }
    )
    forged.pop("prev")
    forged["prev"] = line_hash(last)
    return strictjson.dumps(forged).encode()


def _append(society: Society, line: bytes) -> None:
    if isinstance(society, StreamSociety):
        subject = f"{society.stream.lower()}.to.echo.chat"

        async def send(js: Any) -> None:
            await js.publish(subject, line, stream=society.stream)

        with_js(society.servers, send)
    else:
        with society.room.open("ab") as room:
            room.write(line + b"\n")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_forged_relaxed_line_is_refused_by_audit_and_hub(
    engine: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """Live: the relaxed line audits clean at once. Forged while down: audit and start refuse it."""
    society = society_on(engine, tmp_path / "home", lambda: request.getfixturevalue("nats_server"))
    _keyed(society)
    society.start_hub()
    try:
        ok = HTTP.post(
            f"{society.strict_url}/say",
            json={"from": "visitor", "to": "@echo", "type": "chat", "body": "first"},
            timeout=10,
        )
        assert ok.status_code == 200, ok.text
        stored = _relaxed_post(society)
        assert stored["via"] == "relaxed" and stored["sig"] is None and stored["verified"]
        # before the JSON checkpoint's hour is up: the tree note the hub signed covers it
        live = run_cli(society.root, "audit")
        assert live.returncode == 0, live.stdout + live.stderr
        covered = note.parse(note_path(society.home.room_path).read_text()).head()
        assert covered.size >= stored["seq"]
    finally:
        society.stop_all()

    signed_before = note_path(society.home.room_path).read_text()
    _append(society, _forge(society))
    audit = run_cli(society.root, "audit")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert audit.stdout.startswith("FAILED at seq 3:"), audit.stdout
    assert "via: relaxed" in audit.stdout and "scribe proves with its own key" in audit.stdout

    hub = society.spawn("hub-again", "hub")
    assert hub.proc.wait(60) == 78, hub.output()
    assert "line 3 says scribe posted it verified with no sig" in hub.output()
    # nothing was signed over the forged line
    assert note_path(society.home.room_path).read_text() == signed_before
    assert note.parse(signed_before).head().size == 2


def test_a_relaxed_keyed_post_is_covered_before_its_answer(tmp_path: Any) -> None:
    """When the answer to a keyed nick's relaxed post arrives, a signed note already covers it."""
    society = Society(tmp_path / "home")
    _keyed(society)
    society.start_hub()
    try:
        stored = _relaxed_post(society)
        size = note.parse(note_path(society.home.room_path).read_text()).head().size
        assert size == stored["seq"] == 1
    finally:
        society.stop_all()
