"""The foreman's half, over hand-built threads: canned step replies, no step code runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.expedition.pipeline import Expedition
from agents.foreman.pipeline import Ask, Report
from room.message import Message
from tests.expedition.sim import Sim, write_home

CONTEXT = {
    "keyword_primary": "patience",
    "title": "Waiting",
    "pattern": "Files that embody 'patience'.",
    "kb": "/kb",
    "voice": "Carbon",
}
LIMITS = {"batch_size": 10, "max_candidates": 40, "top_for_scotoma": 8}


def candidates(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"row_{i}",
            "file": f"f{i}.md",
            "summary": f"summary {i}",
            "keypoints": "",
            "prescore": 1,
        }
        for i in range(1, n + 1)
    ]


class Thread:
    """A run's thread built by hand: the foreman's posts come from advance(), replies are canned."""

    def __init__(self, tmp_path: Path) -> None:
        self.sim = Sim(write_home(tmp_path / "home", tmp_path / "kb"))
        self.sim.start(title="Waiting", keyword="patience")
        self.pipeline = Expedition()

    def due(self) -> list[Ask | Report]:
        return self.pipeline.advance(self.sim.run())

    def post_due(self) -> list[Message]:
        return self.sim.foreman()

    def reply(
        self, key: str, data: dict[str, Any], *, failed: bool = False, body: str = "done"
    ) -> None:
        asked = self.sim.run().ask(key)
        assert asked is not None, f"{key} was never asked"
        nick = asked.to.removeprefix("@")
        if failed:
            data, body = (
                {"failed": True, "reason": data["reason"]},
                f"[{nick.upper()} FAILED — {data['reason']}]",
            )
        self.sim.post(nick, "foreman", "reply", body, data=data, in_reply_to=asked.id)

    def through_retrieve(self, n: int = 23) -> None:
        self.post_due()
        self.reply("context", {"context": CONTEXT, "limits": LIMITS, "flags": []})
        self.post_due()
        self.reply(
            "terms", {"terms": ["cure", "frost"], "flags": ["[TERM_FANOUT_WEAK]"], "seat": "local"}
        )
        self.post_due()
        self.reply("retrieve", {"candidates": candidates(n), "flags": []})

    def through_excerpts(self) -> Message:
        self.through_retrieve(12)
        self.post_due()
        self.reply(
            "score/1",
            {
                "scores": [
                    {"id": f"row_{i}", "embodies": 2 if i < 4 else 0, "why": "w"}
                    for i in range(1, 11)
                ]
            },
        )
        self.reply(
            "score/2",
            {"scores": [{"id": f"row_{i}", "embodies": 1, "why": "w"} for i in (11, 12)]},
        )
        self.post_due()
        self.reply(
            "scotoma",
            {
                "deep_cuts": [{"id": "row_2", "connection": "never names it"}],
                "direct_hits": ["row_1"],
                "pass4_empty": False,
            },
        )
        self.post_due()
        excerpts = [
            {
                "id": "row_1",
                "file": "f1.md",
                "kind": "direct",
                "role": "lived",
                "text": "I did it.",
                "voice_anchor": True,
                "first_person": 2,
            },
            {
                "id": "row_2",
                "file": "f2.md",
                "kind": "deep",
                "role": "lived",
                "text": "We did.",
                "voice_anchor": False,
                "first_person": 0,
            },
        ]
        self.reply("excerpts", {"excerpts": excerpts, "flags": ["[EXCERPT_TOO_SHORT:f3.md]"]})
        posted = self.post_due()
        assert len(posted) == 1
        return posted[0]


class TestSequence:
    def test_a_new_run_asks_for_its_context(self, tmp_path: Path) -> None:
        """The first thing due is step 0, carrying the run's parameters."""
        due = Thread(tmp_path).due()
        assert [(a.key, a.to) for a in due] == [("context", "context")]
        assert (
            isinstance(due[0], Ask)
            and due[0].data["title"] == "Waiting"
            and "pipeline" not in due[0].data
        )

    def test_an_unanswered_ask_means_wait(self, tmp_path: Path) -> None:
        """While a step has not replied, nothing new is due."""
        thread = Thread(tmp_path)
        thread.post_due()
        assert thread.due() == []

    def test_score_batches_go_out_together(self, tmp_path: Path) -> None:
        """Twenty-three candidates make three score asks due at once, ten rows at most each."""
        thread = Thread(tmp_path)
        thread.through_retrieve(23)
        due = thread.due()
        assert [a.key for a in due] == ["score/1", "score/2", "score/3"]
        assert all(isinstance(a, Ask) and a.to == "scorer" for a in due)
        assert [len(a.data["rows"]) for a in due] == [10, 10, 3]  # type: ignore[union-attr]
        assert due[2].data["rows"][0] == {"id": "row_21", "summary": "summary 21"}  # type: ignore[union-attr]

    def test_scotoma_waits_for_every_batch(self, tmp_path: Path) -> None:
        """With one batch still out, the scotoma is not asked."""
        thread = Thread(tmp_path)
        thread.through_retrieve(12)
        thread.post_due()
        thread.reply(
            "score/1",
            {"scores": [{"id": f"row_{i}", "embodies": 1, "why": "w"} for i in range(1, 11)]},
        )
        assert thread.due() == []

    def test_merged_top_rows_go_to_the_scotoma(self, tmp_path: Path) -> None:
        """The scotoma sees the best eight rows by embodies, batch results joined."""
        thread = Thread(tmp_path)
        thread.through_retrieve(12)
        thread.post_due()
        thread.reply(
            "score/1",
            {"scores": [{"id": f"row_{i}", "embodies": 0, "why": "w"} for i in range(1, 11)]},
        )
        thread.reply(
            "score/2",
            {
                "scores": [
                    {"id": "row_11", "embodies": 3, "why": "w"},
                    {"id": "row_12", "embodies": 1, "why": "w"},
                ]
            },
        )
        (scotoma,) = thread.due()
        assert isinstance(scotoma, Ask) and scotoma.to == "scotoma"
        assert [r["id"] for r in scotoma.data["rows"]][:3] == ["row_11", "row_12", "row_1"]
        assert len(scotoma.data["rows"]) == 8


class TestFailure:
    def test_a_failed_batch_ends_the_run(self, tmp_path: Path) -> None:
        """A failed score batch is reported as STEP_3 FAILED with its reason, and the run ends."""
        thread = Thread(tmp_path)
        thread.through_retrieve(23)
        thread.post_due()
        thread.reply("score/2", {"reason": "score: no valid answer from seat 'local'"}, failed=True)
        (report,) = thread.due()
        assert isinstance(report, Report) and report.final
        assert report.body.startswith("[STEP_3 FAILED — score: no valid answer from seat 'local']")
        assert "[TERM_FANOUT_WEAK]" in report.body

    def test_step_numbers_follow_the_step(self, tmp_path: Path) -> None:
        """A failed context step is STEP_0."""
        thread = Thread(tmp_path)
        thread.post_due()
        thread.reply(
            "context", {"reason": "the knowledge base /kb has no corpus_index.md"}, failed=True
        )
        (report,) = thread.due()
        assert isinstance(report, Report) and report.final
        assert report.body == "[STEP_0 FAILED — the knowledge base /kb has no corpus_index.md]"


class TestTwoTurnGate:
    def test_the_run_stops_at_the_dig_report(self, tmp_path: Path) -> None:
        """After the Dig Report nothing is due, and no brief is asked, until the operator answers."""
        thread = Thread(tmp_path)
        dig = thread.through_excerpts()
        assert dig.body.startswith("=== DIG REPORT ===") and dig.data["final"] is False
        assert "[TERM_FANOUT_WEAK] [EXCERPT_TOO_SHORT:f3.md]" in dig.body
        assert thread.due() == []
        assert thread.sim.asks_to("briefer") == []

    def test_chat_is_not_a_confirmation(self, tmp_path: Path) -> None:
        """An answer that is not confirm, drop or redirect gets a question back, not a brief."""
        thread = Thread(tmp_path)
        dig = thread.through_excerpts()
        thread.sim.reply_to_report(dig, "looks nice")
        (unclear,) = thread.due()
        assert isinstance(unclear, Report) and not unclear.final and "could not act" in unclear.body

    def test_an_unknown_drop_is_questioned(self, tmp_path: Path) -> None:
        """Dropping a row the report did not list is questioned rather than ignored."""
        thread = Thread(tmp_path)
        dig = thread.through_excerpts()
        thread.sim.reply_to_report(dig, "drop row_9")
        (unclear,) = thread.due()
        assert isinstance(unclear, Report) and "row_9" in unclear.body

    def test_confirm_with_drop_asks_the_briefer_without_the_dropped(self, tmp_path: Path) -> None:
        """'confirm, drop row_2' asks step 6 with row_2's excerpt and deep cut left out."""
        thread = Thread(tmp_path)
        dig = thread.through_excerpts()
        thread.sim.reply_to_report(dig, "confirm, drop row_2")
        (brief,) = thread.due()
        assert isinstance(brief, Ask) and (brief.key, brief.to) == ("brief", "briefer")
        assert [e["id"] for e in brief.data["excerpts"]] == ["row_1"]
        assert brief.data["deep_cuts"] == [] and brief.data["dropped"] == ["row_2"]

    def test_redirect_starts_a_new_round_from_the_terms(self, tmp_path: Path) -> None:
        """A redirect asks termgen again under a new key, with the operator's words in the context."""
        thread = Thread(tmp_path)
        dig = thread.through_excerpts()
        thread.sim.reply_to_report(dig, "redirect look at kilns and ovens")
        (terms,) = thread.due()
        assert isinstance(terms, Ask) and (terms.key, terms.to) == ("terms@1", "termgen")
        assert terms.data["context"]["redirect"] == "look at kilns and ovens"
        assert "look at kilns and ovens" in terms.data["context"]["pattern"]

    def test_brief_written_ends_the_run(self, tmp_path: Path) -> None:
        """The briefer's written brief becomes the final report naming its path."""
        thread = Thread(tmp_path)
        thread.sim.reply_to_report(thread.through_excerpts(), "confirm")
        thread.post_due()
        thread.reply(
            "brief",
            {
                "written": True,
                "path": "/b/x.md",
                "voice_anchor": "f1.md — ok",
                "banned_phrases": [],
            },
        )
        (result,) = thread.due()
        assert isinstance(result, Report) and result.final and result.data["outcome"] == "brief"
        assert result.body.startswith("brief written: /b/x.md")
        thread.post_due()
        assert thread.due() == []

    def test_missing_anchor_waits_for_a_file_then_briefs_again(self, tmp_path: Path) -> None:
        """voice_anchor MISSING is a report the run waits on; `anchor FILE` asks the briefer again."""
        thread = Thread(tmp_path)
        thread.sim.reply_to_report(thread.through_excerpts(), "confirm")
        thread.post_due()
        missing = {"written": False, "voice_anchor": "MISSING", "prompt": "voice_anchor: MISSING"}
        thread.reply("brief", missing)
        (result,) = thread.due()
        assert isinstance(result, Report) and not result.final
        assert result.key == "missing" and result.data["outcome"] == "missing"
        assert result.body.startswith("voice_anchor: MISSING")
        (report,) = thread.post_due()
        assert thread.due() == []  # waiting for the operator, as at a Dig Report
        thread.sim.reply_to_report(report, "anchor voice-logs/mine.md")
        (again,) = thread.due()
        assert isinstance(again, Ask) and again.key == "brief/1"
        assert again.data["anchor"] == "voice-logs/mine.md"
        thread.post_due()
        thread.reply("brief/1", {"written": True, "path": "/b/x.md", "voice_anchor": "v"})
        (final,) = thread.due()
        assert isinstance(final, Report) and final.final and final.data["outcome"] == "brief"


def test_in_flight_bound(tmp_path: Path) -> None:
    """The pipeline bounds asks in flight (the runtime enforces it)."""
    thread = Thread(tmp_path)
    assert Expedition().in_flight_limit(thread.sim.run()) == 8


def test_handler_table_names_the_real_functions() -> None:
    """Every nick's handler string imports to the function the steps run."""
    import importlib

    from agents.expedition import HANDLERS
    from agents.expedition.pipeline import DEFAULT_NICKS
    from tests.expedition.sim import HANDLERS as RUN

    assert set(HANDLERS) == set(DEFAULT_NICKS.values()) == set(RUN)
    for nick, target in HANDLERS.items():
        module, _, name = target.partition(":")
        assert getattr(importlib.import_module(module), name) is RUN[nick]
