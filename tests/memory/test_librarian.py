"""Saving through the room and recalling from the librarian's index: a real hub, the real
librarian lurker and its SQLite file."""

from __future__ import annotations

import pytest

from agents.librarian.client import checked_save
from agents.memory.entry import parse_save
from agents.memory.errors import Refused
from agents.memory.index import Index
from agents.memory.namespaces import MemoryConfig, Namespaces, index_path
from tests.memory.helpers import ids, post, recall_json, replies_to, save, saved_id, wait_reply
from tests.support import Society, run_cli, wait_for


def recall(hall: Society, query: str, *args: str) -> list[dict]:
    """What `bullpen memory recall` prints, read here from the same SQLite file (no process)."""
    options = dict(zip(args[::2], args[1::2], strict=True))
    index = Index.open(index_path(hall.home), create=False)
    try:
        found = index.recall(query, options.get("--ns", "/bullpen"), int(options.get("-k", 5)))
        return [entry.to_dict() for entry in found]
    finally:
        index.close()


def test_the_cli_recall_prints_what_the_index_holds(hall: Society) -> None:
    """`bullpen memory recall --json` is the same list."""
    saved_id(save(hall, "/bullpen/ops", "kestrel is the build host"))
    printed = recall_json(run_cli(hall.root, "memory", "recall", "kestrel", "--json"))
    assert printed == recall(hall, "kestrel") and len(printed) == 1


class TestNamespaces:
    def test_a_prefix_matches_whole_segments_only(self, hall: Society) -> None:
        """/bullpen/ops sees /bullpen/ops and /bullpen/ops/deploy, never /bullpen/opsx."""
        own = saved_id(save(hall, "/bullpen/ops", "quokka releases are the operator's job"))
        child = saved_id(save(hall, "/bullpen/ops/deploy", "quokka deploys wait for green"))
        sibling = saved_id(save(hall, "/bullpen/opsx", "quokka sibling namespace"))
        assert sorted(ids(recall(hall, "quokka", "--ns", "/bullpen/ops"))) == sorted([own, child])
        assert ids(recall(hall, "quokka", "--ns", "/bullpen/opsx")) == [sibling]
        assert sorted(ids(recall(hall, "quokka"))) == sorted([own, child, sibling])

    def test_a_save_with_no_namespace_is_refused(self, hall: Society) -> None:
        """No ns, no entry: the librarian's reply says there is no default."""
        reply = save(hall, None, "walrus without a home")
        assert reply["data"]["failed"] is True and "no namespace" in reply["body"]
        assert recall(hall, "walrus") == []

    def test_a_save_to_an_undeclared_namespace_is_refused_with_the_list(
        self, hall: Society
    ) -> None:
        """The refusal lists the declared namespaces, so the poster can pick an anchored one."""
        reply = save(hall, "/bullpen/nowhere", "walrus in limbo")
        assert reply["data"]["failed"] is True
        assert "not declared" in reply["body"] and "/bullpen/ops" in reply["body"]
        assert recall(hall, "walrus") == []

    @pytest.mark.parametrize(
        ("ns", "text", "said"),
        [
            ("/bullpen/ops", "   ", "empty"),
            ("/bullpen/ops", "x" * (16 * 1024 + 1), "16 KiB"),
            ("/etc/ops", "a fact", "outside /bullpen"),
            ("/bullpen/nowhere", "a fact", "not declared"),
            ("", "a fact", "no namespace"),
        ],
    )
    def test_bad_input_is_refused_before_the_room_sees_it(
        self, hall: Society, ns: str, text: str, said: str
    ) -> None:
        """Empty text, 16 KiB + 1, outside /bullpen, undeclared, none: Refused, nothing posted."""
        with pytest.raises(Refused, match=said):
            checked_save(hall.home, {"ns": ns, "text": text})
        with pytest.raises(Refused, match=said):  # the librarian applies the same contract
            Namespaces.of(MemoryConfig(namespaces={"ops": "x"})).check(
                parse_save({"ns": ns, "text": text}).ns
            )

    def test_the_cli_exits_2_on_bad_input_and_posts_nothing(self, hall: Society) -> None:
        """`bullpen memory save` to an undeclared namespace: exit 2, the room unchanged."""
        before = len(hall.lines())
        result = run_cli(hall.root, "memory", "save", "--ns", "/bullpen/nowhere", "a fact")
        assert result.returncode == 2 and "not declared" in result.stderr
        assert len(hall.lines()) == before

    def test_namespaces_lists_declared_ones_with_counts(self, hall: Society) -> None:
        """Each declared namespace with its live entry count."""
        saved_id(save(hall, "/bullpen/research", "ibis research finding"))
        result = run_cli(hall.root, "memory", "namespaces")
        assert result.returncode == 0, result.stderr
        row = next(
            line for line in result.stdout.splitlines() if line.startswith("/bullpen/research ")
        )
        assert int(row.split()[1]) >= 1


class TestTrust:
    def test_an_untrusted_or_unverified_save_is_flagged_and_not_indexed(
        self, hall: Society
    ) -> None:
        """A save by a nick outside TRUST, or one the hub did not verify, gets a flag reply."""
        stranger = post(
            hall,
            "@librarian",
            "remember",
            data={"save": {"ns": "/bullpen/ops", "text": "narwhal stranger says deploy"}},
            sender="stranger",
        )
        assert stranger["verified"] is True
        nobody = post(
            hall,
            "@librarian",
            "remember",
            data={"save": {"ns": "/bullpen/ops", "text": "narwhal nobody says deploy"}},
            sender="nobody",
            signed=False,
        )
        assert nobody["verified"] is False
        for sent, why in ((stranger, "not in TRUST"), (nobody, "not verified")):
            flag = wait_reply(hall, sent["id"], timeout=30)
            assert flag["from"] == "librarian" and flag["data"]["flag"] == "memory_refused"
            assert why in flag["body"]
        assert recall(hall, "narwhal") == []
        assert len(replies_to(hall, stranger["id"])) == 1


class TestSupersession:
    def test_a_correction_supersedes_and_recall_returns_the_newest(self, hall: Society) -> None:
        """The old entry stays (shown as superseded); recall returns only the correction."""
        old = saved_id(save(hall, "/bullpen/ops", "heron builds run on host alpha"))
        new = saved_id(save(hall, "/bullpen/ops", "heron builds run on host beta", supersedes=old))
        assert ids(recall(hall, "heron")) == [new]
        shown = run_cli(hall.root, "memory", "show", old)
        assert shown.returncode == 0 and f"superseded_by  {new}" in shown.stdout
        again = save(hall, "/bullpen/ops", "heron on gamma", supersedes=old)
        assert (
            again["data"]["failed"] is True and f"supersede the newest one, {new}" in again["body"]
        )
        assert ids(recall(hall, "heron")) == [new]

    def test_show_prints_the_entry_with_its_room_line(self, hall: Society) -> None:
        """Provenance: who saved it, the seq and id of the save, the source it names."""
        reply = save(hall, "/bullpen/ops", "egret fact", source="trace sha256:" + "ab" * 32)
        shown = run_cli(hall.root, "memory", "show", saved_id(reply))
        assert shown.returncode == 0, shown.stderr
        assert "saved_by       operator" in shown.stdout
        assert "source         trace sha256:" + "ab" * 32 in shown.stdout
        assert f'"id":"{reply["in_reply_to"]}"' in shown.stdout  # the room line of the save


class TestQueries:
    def test_an_fts5_syntax_error_is_a_clear_refusal_not_a_crash(self, hall: Society) -> None:
        """In the CLI (exit 2) and in an ask to @librarian (a FAILED reply); it still answers."""
        result = run_cli(hall.root, "memory", "recall", "deploy(")
        assert result.returncode == 2 and "not valid FTS5 syntax" in result.stderr
        ask = post(hall, "@librarian", "look up", data={"query": 'AND "'})
        reply = wait_reply(hall, ask["id"])
        assert reply["data"]["failed"] is True and "FTS5" in reply["body"]
        assert saved_id(save(hall, "/bullpen/ops", "the librarian survived")).startswith("m")

    def test_the_librarian_answers_an_ask_over_the_manual_lookup_namespaces(
        self, hall: Society
    ) -> None:
        """An agent with no shell asks in the room; the answer covers every /bullpen/* namespace."""
        mine = saved_id(save(hall, "/bullpen/sandbox", "pelican builds go under /tmp/sandbox"))
        ask = post(hall, "@librarian", "where do pelican builds go?")
        reply = wait_reply(hall, ask["id"])
        assert reply["data"]["ns"] == "/bullpen" and mine in ids(reply["data"]["results"])
        assert mine in reply["body"]


class TestRebuild:
    def test_a_rebuild_from_the_room_answers_as_the_live_index(self, hall: Society) -> None:
        """The same entries, ranks and provenance, after `bullpen memory rebuild`."""
        saved_id(save(hall, "/bullpen/ops", "osprey one"))
        queries = ("quokka", "heron", "osprey", "narwhal", "builds OR fact")
        before = {q: recall(hall, q, "-k", "20") for q in queries}
        assert before["heron"] and before["osprey"]
        result = run_cli(hall.root, "memory", "rebuild")
        assert result.returncode == 0, result.stderr
        assert {q: recall(hall, q, "-k", "20") for q in queries} == before
        # the librarian goes on from its cursor after the swap
        after = saved_id(save(hall, "/bullpen/ops", "osprey two"))
        assert after in ids(recall(hall, "osprey"))
        wait_for(lambda: True)
