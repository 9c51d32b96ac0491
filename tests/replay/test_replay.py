"""`bullpen replay`: a recorded expedition's steps listed and asked again, posting nothing."""

from __future__ import annotations

import json
from typing import Any

from tests.replay.conftest import RecordedRun, checkpointed, tree
from tests.support import run_cli


def replayed(recorded: RecordedRun, step: str, seat: str) -> dict[str, Any]:
    """`bullpen replay THREAD --step STEP --seat SEAT --json`'s answer; the room must be
    byte-identical after it."""
    before = recorded.society.room.read_bytes()
    done = run_cli(
        recorded.society.root, "replay", recorded.thread, "--step", step, "--seat", seat,
        "--json", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert recorded.society.room.read_bytes() == before
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_list_names_each_answered_step(recorded: RecordedRun) -> None:
    """--list --json gives every replayable step with its nick, seat and seqs, in ask order."""
    done = run_cli(recorded.society.root, "replay", recorded.thread, "--list", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    keys = [row["key"] for row in rows]
    assert keys[:3] == ["context", "terms", "retrieve"] and "scotoma" in keys
    assert "excerpts" in keys and "score/1" in keys
    terms = next(row for row in rows if row["key"] == "terms")
    assert terms["nick"] == "termgen" and terms["seat"] == "termgen"
    lines = {line["seq"]: line for line in recorded.society.lines()}
    assert lines[terms["ask_seq"]]["to"] == "@termgen"
    assert lines[terms["answer_seq"]]["in_reply_to"] == lines[terms["ask_seq"]]["id"]


def test_replay_with_another_cmd_seat_leaves_the_room_byte_identical(
    recorded: RecordedRun,
) -> None:
    """The terms step asked again through the `alt` cmd seat: both answers side by side with
    their gates, the alt program really asked, and not one byte of the room changed."""
    result = replayed(recorded, "terms", "alt")
    assert result["thread"] == recorded.thread and result["step"] == "terms"
    assert result["seat"] == "alt"
    assert result["recorded"]["data"]["seat"] == "termgen"
    assert result["replayed"]["data"]["seat"] == "alt"
    assert "rushed" in result["replayed"]["data"]["terms"]
    assert result["gates"]["recorded"]["pass"] is True
    assert result["gates"]["replayed"]["checks"] == {"answered": True, "fanout": True}
    calls = [json.loads(line) for line in recorded.calls.read_text().splitlines()]
    assert [c["step"] for c in calls] == ["termgen"]


def test_a_replayed_failure_fails_its_gates(recorded: RecordedRun, tmp_path) -> None:
    """A seat that answers garbage twice: the replayed answer is the FAILED reply the lurker
    would have posted, and it fails the `answered` gate; the recorded one still passes."""
    from tests.replay.conftest import FAKES, cmd_table
    from tests.support import set_seat

    set_seat(
        recorded.society.root,
        "broken",
        cmd_table(FAKES / "expedition_model.py", {"FAKE_EXPEDITION_MODE": "garbage-always"}),
    )
    result = replayed(recorded, "terms", "broken")
    assert result["replayed"]["body"].startswith("[termgen FAILED — ")
    assert result["gates"]["replayed"]["pass"] is False
    assert "answered" in result["gates"]["replayed"]["failed"]
    assert result["gates"]["recorded"]["pass"] is True


def test_refusals_are_clear(recorded: RecordedRun) -> None:
    """An unknown step, an unknown seat, a step that writes files, an unknown thread: exit 2,
    each saying what to do."""
    root, thread = recorded.society.root, recorded.thread
    done = run_cli(root, "replay", thread, "--step", "nope")
    assert done.returncode == 2 and "--list" in done.stderr and "terms" in done.stderr
    done = run_cli(root, "replay", thread, "--step", "terms", "--seat", "nowhere")
    assert done.returncode == 2 and "no seat named 'nowhere'" in done.stderr
    done = run_cli(root, "replay", "exp-00000000", "--list")
    assert done.returncode == 2 and "no run with the thread" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_side_by_side_for_a_terminal(recorded: RecordedRun) -> None:
    """Without --json: the two answers in two columns, each with its seat and gate verdict."""
    done = run_cli(
        recorded.society.root, "replay", recorded.thread, "--step", "scotoma", "--seat", "alt",
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()
    assert head[0].startswith(f"{recorded.thread} step scotoma (@scotoma, ask seq ")
    assert "recorded (seq " in head[2] and "| replayed (seat alt)" in head[2]
    assert "seat: scotoma" in head[3] and "| seat: alt" in head[3]
    assert head[4].count("gates: pass") == 2
    assert "deep cut" in done.stdout
    listed = run_cli(recorded.society.root, "replay", recorded.thread, "--list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[0].split()[:3] == [
        "KEY",
        "NICK",
        "SEAT",
    ]
    assert any(line.startswith("terms ") for line in listed.stdout.splitlines())


def test_the_brief_is_replayed_against_a_private_copy(recorded: RecordedRun) -> None:
    """The brief writes a file: confirmed, its step replays in a private copy of the briefs
    folder and the knowledge base. The replayed answer names the brief where the run wrote
    it, the copy's summary lists that file as written, and the room and every file of the
    home (but the running lurkers' own logs and cursors) are exactly as they were."""
    root = recorded.society.root
    confirm = run_cli(root, "expedition", "confirm", recorded.thread, timeout=240)
    assert confirm.returncode == 0, confirm.stdout + confirm.stderr
    (brief,) = sorted((root / "briefs").glob("*.md"))
    listed = json.loads(run_cli(root, "replay", recorded.thread, "--list", "--json").stdout)
    assert "brief" in [row["key"] for row in listed]
    checkpointed(recorded.society)  # the hub's own files settled before the tree is taken
    before, room = tree(root, skip=("logs", "state")), recorded.society.room.read_bytes()
    done = run_cli(root, "replay", recorded.thread, "--step", "brief", "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["recorded"]["data"]["written"] is True
    assert result["replayed"]["data"]["written"] is True
    assert result["replayed"]["data"]["path"] == str(brief.resolve())
    assert result["gates"]["replayed"]["pass"] is True
    copied = {c["path"] for c in result["copy"]["copied"]}
    assert str((root / "briefs").resolve()) in copied
    written = result["copy"]["written"]
    assert str(brief.resolve()) in written["changed"] + written["created"]
    assert written["deleted"] == [] and result["copy"]["would_post"] == []
    assert tree(root, skip=("logs", "state")) == before
    assert recorded.society.room.read_bytes() == room
    shown = run_cli(root, "replay", recorded.thread, "--step", "brief", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "replayed against a private copy" in shown.stdout and str(brief.name) in shown.stdout


def test_a_step_of_an_external_program_is_refused(recorded: RecordedRun) -> None:
    """A nick run as an external program: nothing can point it at a copy, so its step is
    refused by name, exit 2, before anything runs, and the room is as it was."""
    society_file = recorded.society.root / "society.toml"
    text = society_file.read_text()
    step = '[nicks.termgen]\nhandler = "agents.expedition.steps:gen_terms"\n'
    assert step in text
    society_file.write_text(text.replace(step, '[nicks.termgen]\ncommand = ["/bin/true"]\n'))
    room = recorded.society.room.read_bytes()
    try:
        done = run_cli(recorded.society.root, "replay", recorded.thread, "--step", "terms")
    finally:
        society_file.write_text(text)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "@termgen runs an external program" in done.stderr and "Traceback" not in done.stderr
    assert recorded.society.room.read_bytes() == room
