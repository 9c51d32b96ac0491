"""`bullpen expedition` and `confirm` refuse bad arguments before anything reaches the room."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.cli import build_parser, main
from agents.expedition.cli import cmd_expedition
from agents.home import Home
from room.errors import UsageError
from tests.expedition.conftest import DEMO_KB
from tests.expedition.sim import FakeClient, message, write_home

TITLE = ("--title", "Waiting Is Part of the Work", "--keyword", "patience")
pytestmark = pytest.mark.timeout(30)  # a refusal that posts anyway would wait for a report

BINARY = b"\x89PNG\r\n\x1a\n\x00\xe3\x81\xff\xfe" * 8


class Room:
    """Stands in for the hub: counts the clients opened and keeps what was said."""

    def __init__(self, lines: list[Any] | None = None) -> None:
        self.client = FakeClient(lines or [])
        self.opened = 0

    def __call__(self, *args: object, **kwargs: object) -> FakeClient:
        self.opened += 1
        return self.client


@pytest.fixture
def home(tmp_path: Path) -> Home:
    """The sample knowledge base, and a folder `given` declared as a kb and blaze root too."""
    given = [DEMO_KB, tmp_path / "given"]
    return write_home(tmp_path / "home", DEMO_KB, roots={"kb": given, "blaze": given})


@pytest.fixture
def room(monkeypatch: pytest.MonkeyPatch) -> Room:
    fake = Room()
    monkeypatch.setattr(Home, "client", fake)
    return fake


def bullpen(home: Home, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the real CLI in this process; a deadline keeps a wrongly posted run from hanging."""
    deadline = () if "--wait-timeout" in argv else ("--wait-timeout", "2")
    try:
        code = main(["--home", str(home.root), *argv, *deadline])
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


class TestKnowledgeBaseIsCheckedFirst:
    @pytest.mark.parametrize(
        ("make", "said"),
        [
            (lambda tmp: tmp / "nonexistent", ["does not exist", "--kb"]),
            (
                lambda tmp: write(tmp / "a-file.md", "# not a folder\n"),
                ["is a file, not a folder", "--kb"],
            ),
            (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", ["no corpus_index.md", "--kb"]),
            (
                lambda tmp: write(tmp / "bad" / "corpus_index.md", "just prose\n").parent,
                ["the index", "corpus_index.md has no Markdown table"],
            ),
        ],
        ids=["missing", "a-file", "no-index", "broken-index"],
    )
    def test_a_bad_kb_is_refused_and_nothing_is_posted(
        self,
        home: Home,
        room: Room,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        make: Any,
        said: list[str],
    ) -> None:
        """--kb that is missing, a file, lacks its index or holds a broken one: exit 2, no post."""
        (tmp_path / "given").mkdir()
        kb = make(tmp_path / "given")
        code, out, err = bullpen(home, capsys, "expedition", *TITLE, "--kb", str(kb))
        assert code == 2 and out == ""
        assert str(kb) in err and all(part in err for part in said)
        assert room.opened == 0 and room.client.said == []

    def test_the_configured_kb_is_checked_when_no_kb_is_given(
        self, tmp_path: Path, room: Room, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --kb, the [expedition] kb of society.toml must hold an index, or nothing runs."""
        home = write_home(tmp_path / "home", tmp_path / "nowhere")
        code, out, err = bullpen(home, capsys, "expedition", *TITLE)
        assert code == 2 and out == ""
        assert "nowhere" in err and "[expedition] kb" in err
        assert room.opened == 0

    def test_a_wrong_expedition_section_is_refused_even_with_kb(
        self, tmp_path: Path, room: Room, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Step 0 reads [expedition] too, so a wrong one stops the run here (exit 78), unposted."""
        home = write_home(tmp_path / "home", DEMO_KB, operator_names=())
        code, out, err = bullpen(home, capsys, "expedition", *TITLE, "--kb", str(DEMO_KB))
        assert code == 78 and out == "" and "operator_names" in err
        assert room.opened == 0


class TestBlazeIsCheckedFirst:
    @pytest.mark.parametrize(
        ("content", "said"),
        [
            (None, "does not exist"),
            ("folder", "is a folder"),
            (BINARY, "must be a UTF-8 Markdown file"),
            ("---\nrole: lived\n---\nI waited.\n", "role: lived"),
            ("---\nrole: guidance\nclaims: {waiting: work}\n---\n", "claims"),
            ("---\nrole: guidance\nclaims: [unclosed\n---\n", "not valid YAML"),
        ],
        ids=["missing", "folder", "binary", "lived", "claims-not-a-list", "broken-yaml"],
    )
    def test_a_bad_blaze_is_refused_and_nothing_is_posted(
        self,
        home: Home,
        room: Room,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        content: str | bytes | None,
        said: str,
    ) -> None:
        """A blaze that is missing, a folder, binary, lived or malformed: exit 2, no post."""
        blaze = tmp_path / "given" / "blaze.md"
        blaze.parent.mkdir()
        if content == "folder":
            blaze.mkdir()
        elif content is not None:
            write(blaze, content)
        code, out, err = bullpen(home, capsys, "expedition", *TITLE, "--blaze", str(blaze))
        assert code == 2 and out == ""
        assert str(blaze) in err and said in err
        assert room.opened == 0 and room.client.said == []

    def test_the_demo_blaze_passes(
        self, home: Home, room: Room, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A good blaze and kb get through to the room: the run is posted with them."""
        code, _, err = bullpen(
            home,
            capsys,
            "expedition",
            *TITLE,
            "--kb",
            str(DEMO_KB),
            "--blaze",
            str(DEMO_KB / "blaze-example.md"),
            "--wait-timeout",
            "0.2",
        )
        (posted,) = room.client.said
        assert posted["data"]["blaze"] == str(DEMO_KB / "blaze-example.md")
        assert code == 3 and "No Dig Report arrived" in err


def parsed(home: Home, *argv: str, timeout: float) -> Any:
    args = build_parser().parse_args(["--home", str(home.root), *argv])
    args.wait_timeout = timeout  # as if a parser let it through: the command checks for itself
    return args


class TestTimeouts:
    @pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
    def test_a_non_positive_or_non_finite_timeout_posts_nothing(
        self, home: Home, room: Room, capsys: pytest.CaptureFixture[str], value: str
    ) -> None:
        """`--wait-timeout -1|0|nan|inf` exits 2 with a message, for the run and for confirm
        alike."""
        for argv in (("expedition", *TITLE), ("expedition", "confirm", "exp-1")):
            code, out, err = bullpen(home, capsys, *argv, "--wait-timeout", value)
            assert code == 2 and out == "" and "--wait-timeout" in err
        assert room.opened == 0

    @pytest.mark.parametrize("value", [-1.0, 0.0, float("nan"), float("inf")])
    def test_the_command_checks_the_timeout_itself(
        self, home: Home, room: Room, value: float
    ) -> None:
        """cmd_expedition refuses a bad timeout even when its parser did not."""
        for argv in (("expedition", *TITLE), ("expedition", "confirm", "exp-1")):
            with pytest.raises(UsageError, match=r"--wait-timeout .* seconds above 0"):
                cmd_expedition(parsed(home, *argv, timeout=value))
        assert room.opened == 0

    def test_the_old_name_still_waits_and_says_what_it_is_called_now(
        self, home: Home, room: Room, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Issue 35: `--timeout` (the name before `--wait-timeout`, which every command that
        waits for a run now uses) is still taken, with a warning naming the new name."""
        code, _, err = bullpen(
            home, capsys, "expedition", *TITLE, "--timeout", "0.2", "--wait-timeout", "0.2"
        )
        assert code == 3 and "No Dig Report arrived within 0.2 s" in err
        assert "--timeout is now --wait-timeout" in err
        args = build_parser().parse_args(["expedition", *TITLE, "--timeout", "7"])
        assert args.wait_timeout == 7.0


class TestConfirmArguments:
    @pytest.mark.parametrize("redirect", ["", "   "])
    def test_a_blank_redirect_is_refused(
        self, home: Home, room: Room, capsys: pytest.CaptureFixture[str], redirect: str
    ) -> None:
        """`confirm T --redirect ""` is not a confirm: it exits 2 and answers nothing."""
        code, out, err = bullpen(
            home, capsys, "expedition", "confirm", "exp-1", "--redirect", redirect
        )
        assert code == 2 and out == ""
        assert "--redirect" in err and "empty" in err
        assert room.opened == 0 and room.client.said == []

    def test_drop_and_redirect_together_are_refused(
        self, home: Home, room: Room, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A redirect digs again, so drops given with it would be lost: refuse the pair."""
        code, _, err = bullpen(
            home, capsys, "expedition", "confirm", "exp-1", "--drop", "row_2", "--redirect", "kilns"
        )
        assert code == 2 and "--drop" in err and "--redirect" in err
        assert room.opened == 0

    def test_an_unknown_thread_says_so_and_how_to_find_it(
        self, home: Home, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`confirm exp-nope`: no run has that thread; say so and where to find the right one."""
        fake = Room([message(1, "avery", "foreman", "ask", "expedition", thread="exp-1")])
        monkeypatch.setattr(Home, "client", fake)
        code, out, err = bullpen(home, capsys, "expedition", "confirm", "exp-nope")
        assert code == 2 and out == ""
        assert "no expedition with the thread exp-nope" in err
        assert "bullpen runs" in err and "no Dig Report yet" not in err
        assert fake.client.said == []
