"""Promoting a nick to privileged, and demoting it, loses no ask (issue 14, seed §3).

Real hub and lurker processes: a nick made privileged while its lurker runs
is refused (401) until it proves itself; the lurker keeps the ask before its
cursor, reads trust.toml and its proof again, retries, reports to the
operator after a bound, and answers the ask once it can, even after a
restart. `bullpen trust promote` / `demote` carry out the order and end with
the live check.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
import structlog

from agents.cli.hubrestart import classify
from agents.config import LurkerDefaults
from agents.home import Home
from agents.runtime.cursor import Cursor
from agents.runtime.outcome import OutPost
from agents.runtime.refused import Refusal, Refusals, problems
from room.errors import ConfigError
from room.message import Message
from tests.support import HTTP, Proc, Society, add_nick, run_cli, start_up, wait_for
from tests.test_lurker import replies_to, say, wait_reply
from trust import keys
from trust.table import digest
from trust.tableedit import replace_table, with_privileged, without_privileged

FAST_REFUSALS = "refused_retries = 3\nrefused_backoff_s = 0.05\nrefused_backoff_max_s = 0.2\n"


def fast_refusals(root: Path) -> None:
    """Retry a refused post quickly and report after 3 tries (the defaults take a minute)."""
    path = root / "society.toml"
    path.write_text(
        re.sub(r"^\[lurker\]\n", "[lurker]\n" + FAST_REFUSALS, path.read_text(), flags=re.M)
    )


def only_nicks(root: Path) -> None:
    """Drop every [nicks.X] table `bullpen init` wrote: `bullpen up` then starts only ours."""
    path = root / "society.toml"
    text = re.sub(r"^\[nicks\.[^\]]+\]\n(?:(?!\[).*\n?)*", "", path.read_text(), flags=re.M)
    path.write_text(text)


def make_privileged(root: Path, nick: str, how: str) -> None:
    path = root / "trust.toml"
    path.write_text(path.read_text().rstrip("\n") + f'\n{nick} = "{how}"\n')


def cursor_seq(society: Society, nick: str) -> int:
    saved = Cursor(society.root / "state" / nick / "cursor").load()
    assert saved is not None
    return saved.seq


def start_lurker(society: Society, nick: str, run: int) -> Proc:
    """Lurker run number `run` of `nick`, with a log of its own (so its start is its own)."""
    proc = society.spawn(f"lurk-{nick}-{run}", "lurk", nick)
    wait_for(lambda: '"lurking"' in proc.output() or not proc.alive(), 20, f"{nick} to start")
    assert proc.alive(), proc.output()
    return proc


def restart_hub(society: Society, hub: Proc) -> Proc:
    hub.stop()
    return society.start_hub()


def from_nick(society: Society, nick: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("from") == nick]


@pytest.fixture
def worker(society: Society) -> Society:
    """A trusted echo nick `worker`, not yet privileged, in a home with fast refusals."""
    add_nick(society.root, "worker", privileged=False, handler="agents.examples:echo")
    fast_refusals(society.root)
    return society


class TestTheOrder:
    def test_documented_order_loses_nothing(self, worker: Society) -> None:
        """docs/operating.md's order: proof (here the shared secret), table, hub. The lurker,
        started before the nick was privileged and not restarted, answers the next ask
        verified, with no FAILED reply."""
        hub = worker.start_hub()
        lurker = start_lurker(worker, "worker", 1)
        # One wake first: a lean lurker reads the home's trust only on its first wake, and
        # this is about one that was already running its full loop when promoted.
        wait_reply(worker, say(worker, "@worker", "before the promotion")["id"])
        make_privileged(worker.root, "worker", "secret")  # the table, then the hub
        restart_hub(worker, hub)
        ask = say(worker, "@worker", "after the promotion")
        reply = wait_reply(worker, ask["id"])
        assert reply["verified"] is True, reply
        assert reply["to"] == "@operator"
        assert reply["body"] == "echo: after the promotion"
        assert [m for m in from_nick(worker, "worker") if "FAILED" in m["body"]] == []
        assert "the hub refused our post" in lurker.output()  # it was refused, then reproved

    def test_reversed_order_keeps_the_ask_until_the_proof_arrives(self, worker: Society) -> None:
        """Table and hub first, the nick's key last: the ask waits (the cursor stays before
        it, the lurker retries) and is answered verified once the key is in place."""
        hub = worker.start_hub()
        lurker = start_lurker(worker, "worker", 1)
        key_file = worker.home.trust.key_file("worker")
        public = keys.public_text(keys.generate_private_key(key_file))
        aside = worker.root / "worker.key.aside"
        shutil.move(key_file, aside)
        make_privileged(worker.root, "worker", public)
        restart_hub(worker, hub)
        ask = say(worker, "@worker", "before the key")
        wait_for(lambda: lurker.output().count("the hub refused our post") >= 2, 15, "retries")
        assert replies_to(worker, ask["id"]) == []
        assert cursor_seq(worker, "worker") < ask["seq"]
        shutil.move(aside, key_file)
        reply = wait_reply(worker, ask["id"])
        assert reply["verified"] is True and reply["to"] == "@operator", reply
        assert "sig" in reply  # signed with its own key
        wait_for(lambda: cursor_seq(worker, "worker") >= ask["seq"], 10, "the cursor to pass it")


class TestRefusedBeyondTheBound:
    def test_reported_verified_kept_and_answered_after_a_restart(self, worker: Society) -> None:
        """A refusal that lasts past the bound is reported to the operator with the operator's
        proof (verified), shown by `bullpen trust check`, never drops the ask, and a lurker
        restarted once the key is back answers it."""
        public = keys.public_text(keys.generate_private_key(worker.root / "elsewhere.key"))
        make_privileged(worker.root, "worker", public)  # the key is not where the lurker looks
        worker.start_hub()
        lurker = start_lurker(worker, "worker", 1)
        ask = say(worker, "@worker", "zq-kept-ask")

        def report() -> dict[str, Any] | None:
            found = [m for m in worker.lines() if (m.get("data") or {}).get("refused")]
            return found[0] if found else None

        line = wait_for(report, 20, "the refusal report")
        assert line["from"] == "operator" and line["to"] == "@operator"
        assert line["type"] == "system" and line["verified"] is True
        refused = line["data"]["refused"]
        assert refused["nick"] == "worker" and refused["answering"] == ask["id"]
        assert refused["attempts"] == 3
        assert "private key file" in refused["reason"]  # why it cannot prove itself
        assert (
            "zq-kept-ask" not in line["body"]
        )  # nothing of the ask becomes operator-verified words
        assert replies_to(worker, ask["id"]) == []
        assert cursor_seq(worker, "worker") < ask["seq"]
        # the record is written before the report is posted, and names the report's seq once
        # it is stored: the line can be read before the seq is in the file
        record = worker.root / "state" / "worker" / "refused.json"

        def recorded_report() -> dict[str, Any] | None:
            if not record.exists():  # replaced atomically: whole or absent
                return None
            entry: dict[str, Any] = json.loads(record.read_text())["stuck"][ask["id"]]
            return entry.get("report")

        report_entry = wait_for(recorded_report, 20, "the report's seq in the refusal's record")
        assert report_entry == {"seq": line["seq"], "verified": True}

        check = run_cli(worker.root, "trust", "check", "--static")
        assert check.returncode == 1
        row = next(r for r in check.stdout.splitlines() if r.startswith("worker "))
        assert "refused" in row and ask["id"] in row and f"seq {line['seq']}" in row

        lurker.stop()
        assert cursor_seq(worker, "worker") < ask["seq"]  # stopping does not pass it either
        shutil.move(worker.root / "elsewhere.key", worker.home.trust.key_file("worker"))
        start_lurker(worker, "worker", 2)
        reply = wait_reply(worker, ask["id"])
        assert reply["verified"] is True and reply["body"] == "echo: zq-kept-ask"
        wait_for(lambda: not record.exists(), 10, "the record to clear")
        assert len(replies_to(worker, ask["id"])) == 1

    def test_the_record_is_written_before_the_report_is_posted(self, worker: Society) -> None:
        """The refusal's record is on disk while the report to the operator is still being
        posted: `bullpen trust check` shows it meanwhile ("not yet" reported), and a lurker
        stopped in between leaves it. The hub here accepts connections and never answers,
        so the report cannot end before the client's own timeout."""
        silent = socket.create_server(("127.0.0.1", worker.strict_port))  # a hung hub
        home = Home(worker.root)
        state = worker.root / "state" / "worker"
        state.mkdir(parents=True, exist_ok=True)
        record = state / "refused.json"
        refusals = Refusals(home, "worker", False, home.client(None), structlog.get_logger(), state)
        ask = Message.model_validate(
            {
                "seq": 7,
                "id": "01ASK",
                "ts": "2026-12-05T00:00:00.000Z",
                "from": "operator",
                "to": "@worker",
                "type": "ask",
                "body": "zq-hung-report",
            }
        )
        refusal = Refusal(LurkerDefaults(), attempts=3)

        async def report_until_recorded() -> tuple[bool, dict[str, Any]]:
            reporting = asyncio.create_task(
                refusals.report(refusal, OutPost("@operator", "echo"), ask, "the proof is wrong")
            )
            await asyncio.sleep(0)  # the report runs up to its first wait: the silent hub
            assert record.exists(), "no refusal record once the report was under way"
            still_reporting = not reporting.done()
            seen = json.loads(record.read_text())
            reporting.cancel()  # the lurker stopped mid-report
            await asyncio.gather(reporting, return_exceptions=True)
            return still_reporting, seen

        try:
            still_reporting, seen = asyncio.run(report_until_recorded())
        finally:
            silent.close()
        assert still_reporting, "the record was written only once the report had ended"
        entry = seen["stuck"]["01ASK"]
        assert entry["reason"] == "the proof is wrong" and entry["attempts"] == 3
        assert "report" not in entry
        (said,) = problems([state])
        assert "01ASK" in said and "NOT reported in the room: not yet" in said


class TestPromoteCommand:
    def test_promote_then_demote_under_up(self, society: Society) -> None:
        """`bullpen trust promote worker --key` under `bullpen up`: key, table, hub, then the
        live check passes (reply to @operator, verified); `demote` reverses it and its live
        check sees the reply unverified. No ask posted meanwhile is lost."""
        worker = society
        only_nicks(worker.root)
        add_nick(worker.root, "worker", privileged=False, handler="agents.examples:echo")
        add_nick(worker.root, "echo2", handler="agents.examples:echo")  # a bystander
        fast_refusals(worker.root)
        up = start_up(worker, ready=True)
        before = say(worker, "@worker", "unprivileged")
        assert wait_reply(worker, before["id"])["verified"] is False

        done = run_cli(worker.root, "trust", "promote", "worker", "--key", timeout=120)
        assert done.returncode == 0, done.stderr
        for n in (1, 2, 3, 4):
            assert f"promote worker: {n}/4" in done.stderr
        assert "verified = true" in done.stderr and "promote worker: done" in done.stderr
        assert worker.home.trust.proof_of("worker").method == "key"  # type: ignore[union-attr]
        ask = say(worker, "@worker", "privileged")
        reply = wait_reply(worker, ask["id"])
        assert reply["verified"] is True and "sig" in reply

        done = run_cli(worker.root, "trust", "demote", "worker", timeout=120)
        assert done.returncode == 0, done.stderr
        assert "verified = false" in done.stderr
        assert not worker.home.trust.is_privileged("worker")
        assert worker.home.trust.is_privileged("operator")
        asks = [m for m in worker.lines() if m.get("to") == "@worker" and m["type"] == "ask"]
        assert all(replies_to(worker, m["id"]) for m in asks)  # every ask answered
        failed = [m for m in from_nick(worker, "worker") if "FAILED" in m["body"]]
        assert failed == []
        # Each restart was asked of `up`, so it was immediate, not a crash with a backoff.
        assert up.output().count("restarted, as asked") == 2, up.output()
        assert "restarting in" not in up.output()

    def test_promote_with_a_hub_started_by_hand(self, worker: Society) -> None:
        """A hub run by hand (`bullpen hub`) is not restarted: SIGHUP makes it read trust.toml
        again, its /health shows the new file's fingerprint, and the live check passes."""
        hub = worker.start_hub()
        start_lurker(worker, "worker", 1)
        done = run_cli(worker.root, "trust", "promote", "worker", timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"pid {hub.pid}, started by hand) read trust.toml again" in done.stderr
        assert "verified = true" in done.stderr
        assert hub.alive()  # the same hub, which now holds the new table
        health = HTTP.get(f"{worker.strict_url}/health", timeout=5).json()
        assert health["trust"] == digest(worker.root / "trust.toml")
        assert '"read trust.toml again"' in hub.output()

    def test_refusals_say_what_is_wrong(self, society: Society) -> None:
        """No nick, demoting the operator, no hub to restart: clear errors, and the steps done."""
        before = (society.root / "trust.toml").read_text()
        done = run_cli(society.root, "trust", "promote")
        assert done.returncode == 2 and "needs the nick" in done.stderr
        done = run_cli(society.root, "trust", "demote", "operator")
        assert done.returncode == 2 and "is the operator" in done.stderr
        assert (society.root / "trust.toml").read_text() == before
        society_file = (society.root / "society.toml").read_text()
        done = run_cli(society.root, "trust", "promote", "nosuchnick")
        assert done.returncode == 2 and "nosuchnick is not a nick of this society" in done.stderr
        done = run_cli(society.root, "trust", "promote", "ech0")
        assert done.returncode == 2 and "did you mean echo" in done.stderr
        # Refused before anything was touched: no table edit, no hub restart.
        assert (society.root / "trust.toml").read_text() == before
        assert (society.root / "society.toml").read_text() == society_file
        add_nick(society.root, "newbie", privileged=False, handler="agents.examples:echo")
        done = run_cli(society.root, "trust", "promote", "newbie")
        assert done.returncode == 1 and "no hub is running" in done.stderr
        assert "promote newbie: 2/4 table" in done.stderr  # the steps before it are done
        assert society.home.trust.proof_of("newbie") is not None


class TestPieces:
    def test_who_runs_the_hub(self) -> None:
        """systemd (a .service cgroup), `bullpen up` (its parent), or a hub started by hand."""
        unit = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/bullpen-hub.service\n"
        assert classify(unit, ["/usr/lib/systemd/systemd", "--user"]).unit == "bullpen-hub.service"
        assert classify("0::/user.slice/user@1000.service/init.scope\n", []).kind == "alone"
        up = ["/venv/bin/python", "-m", "agents.cli", "--home", "/h", "up"]
        assert classify("0::/\n", up).kind == "up"
        assert classify("0::/\n", ["/venv/bin/bullpen", "up", "--no-hub"]).kind == "up"
        assert classify("0::/\n", ["/venv/bin/bullpen", "--home", "up", "hub"]).kind == "alone"
        assert classify("0::/\n", ["bash"]).kind == "alone"
        in_unit = "0::/user.slice/user@1000.service/app.slice/my-society.service\n"
        assert classify(in_unit, up).kind == "up"  # `up` run as a unit: restart the hub alone

    def test_table_edits_keep_the_file_and_refuse_bad_results(self, tmp_path: Path) -> None:
        path = tmp_path / "trust.toml"
        text = '# mine\ntrusted = ["operator"]\n\n[privileged]\n# who\noperator = "secret"\n'
        path.write_text(text)
        added = with_privileged(text, "worker", "secret")
        assert added.startswith("# mine\n") and 'operator = "secret"\nworker = "secret"' in added
        assert without_privileged(added, "worker") == text
        assert with_privileged("trusted = []\n", "w", "secret").endswith(
            '[privileged]\nw = "secret"\n'
        )
        replace_table(path, added, "worker", "secret")
        assert path.read_text() == added
        with pytest.raises(ConfigError, match="edit the file by hand"):
            replace_table(path, text, "worker", "secret")  # would not make it privileged
        assert path.read_text() == added
        assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind

    def test_refused_backoff_starts_at_once_doubles_and_is_capped(self) -> None:
        refusal = Refusal(
            LurkerDefaults(refused_retries=4, refused_backoff_s=1, refused_backoff_max_s=3)
        )
        waits = []
        for _ in range(5):
            waits.append(refusal.refused())
            if refusal.report_due():
                refusal.reported = True
                waits.append("report")
        assert waits == [0.0, 1, 2, 3, "report", 3]
