"""A code seat is given the manual-lookup memory it cannot look up from inside the fence.

Real hub, foreman, step lurkers and librarian; the entries are saved as an operator saves
them (`bullpen memory save`) and indexed by the librarian; the code seat is
tests/fakes/fake_coder.py, a `cmd` seat that logs the prompt it was given.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from agents.memory.index import Index
from agents.memory.namespaces import index_path
from tests.build.helpers import PY_FIX, PY_SPEC, coder_seat, set_build, ticket
from tests.support import Society, run_cli, wait_for

NICKS = ("foreman", "sandbox", "testdesigner", "py", "librarian")
SAVED = {
    "/bullpen/sandbox": "SANDBOX-HERON: build dirs live under the build root; REPO is the alias",
    "/bullpen/ops": "OPS-MARTEN: the grinder host has no network; vendor what the spec needs",
}


def test_the_code_seat_is_shown_the_sandbox_and_ops_entries_with_their_ids(
    society: Society, tmp_path: Path
) -> None:
    builds, solution, log = tmp_path / "builds", tmp_path / "solution", tmp_path / "seat.jsonl"
    builds.mkdir()
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    set_build(society.root, root=str(builds), alias=str(tmp_path / "sandbox"), max_iterations=2,
              run_timeout_s=60)  # fmt: skip
    coder_seat(society.root, "memfix", "copy", FAKE_CODER_SOLUTION=str(solution),
               FAKE_CODER_LOG=str(log))  # fmt: skip
    society.start_hub()
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
    wait_for(lambda: all("lurking" in p.output() or not p.alive() for p in procs), 60, "lurkers")
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)
    for ns, text in SAVED.items():
        saved = run_cli(society.root, "memory", "save", "--ns", ns, text)
        assert saved.returncode == 0, saved.stderr

    def ids() -> dict[str, str] | None:
        if not index_path(society.home).exists():
            return None
        with Index.open(index_path(society.home), create=False) as index:
            found = {ns: index.recall(None, ns, 1, exact=True) for ns in SAVED}
        return {ns: entries[0].id for ns, entries in found.items() if entries} or None

    saved_ids = wait_for(lambda: (i := ids()) and len(i) == len(SAVED) and i, 30, "the index")

    folder = builds / "calc"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests/test_calc.py").write_text(PY_SPEC)
    path = tmp_path / "ticket.md"
    path.write_text(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="memfix"))
    done = run_cli(society.root, "build", str(path), "--wait-timeout", "120", timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr

    thread = done.stderr.split("build ", 1)[1].split()[0]
    grind = next(
        m["data"] for m in society.lines()
        if m.get("thread") == thread and (m.get("data") or {}).get("kind") == "grind-result"
    )  # fmt: skip
    assert grind["memory"] == [saved_ids[ns] for ns in SAVED]  # the room says what it was told
    prompt = json.loads(log.read_text().splitlines()[-1])["prompt"]
    for ns, text in SAVED.items():
        assert f"- [{saved_ids[ns]}] ({ns}) {text}" in prompt, prompt
    # no instruction the seat cannot follow from inside the fence
    assert "bullpen memory recall" not in prompt and "@librarian" not in prompt
    assert not re.search(r"\bask\b.*\blibrarian\b", prompt, re.I)
