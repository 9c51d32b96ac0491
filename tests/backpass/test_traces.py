"""Traces: discovery, the hash marker, the state file and what a model is shown."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agents.backpass.traces import (
    StateFileError,
    TraceChanged,
    check_state,
    format_state,
    parse_state,
    pending,
    read_snapshot,
    read_state,
    render,
    scan,
    sha256_bytes,
    update_state,
)


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


class TestScan:
    def test_recursive_sorted_and_hidden_ignored(self, tmp_path: Path) -> None:
        """Traces are found in subfolders, sorted by session; dotfiles and dot-folders are not."""
        _write(tmp_path / "b.md", "b")
        _write(tmp_path / "sub" / "a.jsonl", "{}")
        _write(tmp_path / ".hidden.md", "x")
        _write(tmp_path / ".git" / "config", "x")
        _write(tmp_path / "sub" / ".draft.md", "x")
        found, skipped = scan(tmp_path)
        assert [t.session for t in found] == ["b.md", "sub/a.jsonl"]
        assert skipped == []
        assert found[0].sha256 == sha256_bytes(b"b") and found[0].size == 1

    def test_binary_files_are_skipped(self, tmp_path: Path) -> None:
        """A file with a NUL byte near its start is not a transcript."""
        _write(tmp_path / "image.png", b"\x89PNG\x00\x00")
        _write(tmp_path / "t.md", "text")
        found, skipped = scan(tmp_path)
        assert [t.session for t in found] == ["t.md"] and skipped == ["image.png"]

    def test_missing_folder_says_what_to_do(self, tmp_path: Path) -> None:
        """A missing traces folder is an error naming the config key."""
        with pytest.raises(FileNotFoundError, match=r"\[backpass\] traces"):
            scan(tmp_path / "nope")


class TestHashMarker:
    def test_new_grown_and_changed_traces_are_pending(self, tmp_path: Path) -> None:
        """Only a trace whose (hash, path) pair is recorded is done."""
        done = _write(tmp_path / "done.md", "same")
        grown = _write(tmp_path / "grown.md", "start")
        _write(tmp_path / "new.md", "new")
        found, _ = scan(tmp_path)
        state = {t.path: t.sha256 for t in found if t.session in ("done.md", "grown.md")}
        grown.write_bytes(b"start and more")
        found, _ = scan(tmp_path)
        assert [t.session for t in pending(found, state)] == ["grown.md", "new.md"]
        assert str(done.resolve()) in state

    def test_same_content_at_another_path_is_pending(self, tmp_path: Path) -> None:
        """A copy of a done trace under another name is its own session, so it is pending."""
        _write(tmp_path / "a.md", "same")
        found, _ = scan(tmp_path)
        state = {found[0].path: found[0].sha256}
        _write(tmp_path / "b.md", "same")
        found, _ = scan(tmp_path)
        assert [t.session for t in pending(found, state)] == ["b.md"]


class TestStateFile:
    def test_round_trip_with_awkward_names(self) -> None:
        """Paths with spaces, backslashes and newlines survive format and parse."""
        entries = {
            "/t/a b.md": "a" * 64,
            "/t/back\\slash.md": "b" * 64,
            "/t/new\nline.md": "c" * 64,
        }
        assert parse_state(format_state(entries)) == entries

    def test_sha256sum_can_check_the_state_file(self, tmp_path: Path) -> None:
        """The state file is real `sha256sum` output: `sha256sum -c` verifies it."""
        if shutil.which("sha256sum") is None:
            pytest.skip("sha256sum is not installed")
        trace = _write(tmp_path / "t r.md", "hello & $1")
        state = tmp_path / "state"
        update_state(state, {str(trace): sha256_bytes(trace.read_bytes())})
        assert state.read_text() == f"{sha256_bytes(b'hello & $1')}  {trace}\n"
        done = subprocess.run(["sha256sum", "-c", str(state)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr

    def test_update_keeps_other_entries_and_replaces_old_hashes(self, tmp_path: Path) -> None:
        """An update adds and overwrites entries by path and keeps the rest."""
        state = tmp_path / "s" / "state"
        update_state(state, {"/a": "1" * 64, "/b": "2" * 64})
        update_state(state, {"/b": "3" * 64})
        assert read_state(state) == {"/a": "1" * 64, "/b": "3" * 64}

    def test_missing_state_is_empty_and_empty_update_writes_nothing(self, tmp_path: Path) -> None:
        """No state file means everything is pending, and nothing to record creates no file."""
        assert read_state(tmp_path / "none") == {}
        update_state(tmp_path / "none", {})
        assert not (tmp_path / "none").exists()

    def test_comments_and_blank_lines_are_allowed(self) -> None:
        """`#` comment lines and blank lines are not entries, as for `sha256sum -c`."""
        text = "# note\n\n   \n" + "f" * 64 + "  /ok\n" + "\\" + "e" * 64 + " */a\\nb\n"
        assert parse_state(text) == {"/ok": "f" * 64, "/a\nb": "e" * 64}

    @pytest.mark.parametrize(
        "bad",
        [
            "garbage line here",
            "not a hash  /x",
            "g" * 64 + "  /bad",  # not hex
            "a_" + "b" * 62 + "  /bad",  # int() would take it
            "f" * 63 + "  /short",
            "f" * 64 + " /one space",
            "f" * 64 + "  ",  # no path
            "[society]",
        ],
    )
    def test_a_line_that_is_not_state_is_refused(self, bad: str) -> None:
        """Any other line makes the text not a state file; the error names the line and its number."""
        text = "f" * 64 + "  /ok\n# fine\n" + bad + "\n" + "e" * 64 + "  /later\n"
        with pytest.raises(StateFileError, match=r"line 3 ") as caught:
            parse_state(text)
        assert bad[:30] in str(caught.value)


class TestCheckState:
    def test_a_file_that_is_not_a_state_file_is_refused_untouched(self, tmp_path: Path) -> None:
        """society.toml as the state file: refused, naming it and its first bad line; nothing written."""
        society = _write(tmp_path / "society.toml", '[society]\noperator = "op"\n')
        before = sorted(tmp_path.iterdir())
        with pytest.raises(StateFileError) as caught:
            check_state(society)
        message = str(caught.value)
        assert str(society) in message and "line 1" in message and "[society]" in message
        assert "point --state" in message and "Nothing was written" in message
        assert society.read_text() == '[society]\noperator = "op"\n'
        assert sorted(tmp_path.iterdir()) == before  # no .lock, no temp file

    def test_update_refuses_a_foreign_file_and_leaves_no_lock(self, tmp_path: Path) -> None:
        """update_state checks the file before it locks or writes anything beside it."""
        notes = _write(tmp_path / "notes.txt", "garbage line here\n")
        with pytest.raises(StateFileError, match="line 1"):
            update_state(notes, {"/a": "1" * 64})
        assert notes.read_text() == "garbage line here\n"
        assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]

    def test_a_folder_is_refused(self, tmp_path: Path) -> None:
        """A folder as the state file is refused with the fix, not an IsADirectoryError."""
        with pytest.raises(StateFileError, match=r"is a folder.*backpass\.sha256"):
            check_state(tmp_path)

    def test_a_missing_folder_is_refused(self) -> None:
        """A state file in a folder that does not exist is refused up front."""
        with pytest.raises(StateFileError, match=r"/proc/nope.*does not exist"):
            check_state(Path("/proc/nope/state"))

    def test_a_non_regular_file_is_refused(self, tmp_path: Path) -> None:
        """A device or a dangling link is not a state file: replacing it would be wrong."""
        with pytest.raises(StateFileError, match="not a regular file"):
            check_state(Path("/dev/null"))
        (tmp_path / "link").symlink_to(tmp_path / "gone")
        with pytest.raises(StateFileError, match="not a regular file"):
            check_state(tmp_path / "link")

    def test_a_first_run_and_an_empty_file_are_fine(self, tmp_path: Path) -> None:
        """No state file yet, or an empty one, is an empty state."""
        assert check_state(tmp_path / "state") == {}
        assert check_state(_write(tmp_path / "empty", "")) == {}

    def test_update_keeps_comments_and_the_mode(self, tmp_path: Path) -> None:
        """Rewriting the file keeps its comment lines (first) and its permissions."""
        state = _write(tmp_path / "state", "# kept\n" + "1" * 64 + "  /a\n")
        state.chmod(0o644)
        update_state(state, {"/b": "2" * 64})
        assert state.read_text() == "# kept\n" + "1" * 64 + "  /a\n" + "2" * 64 + "  /b\n"
        assert state.stat().st_mode & 0o777 == 0o644


class TestSnapshot:
    def test_grown_trace_still_yields_the_analysed_prefix(self, tmp_path: Path) -> None:
        """A trace that grew after analysis still checks against the bytes that were analysed."""
        path = _write(tmp_path / "t.md", "first part")
        digest = sha256_bytes(b"first part")
        path.write_bytes(b"first part, and then more")
        assert read_snapshot(path, 10, digest) == b"first part"

    def test_rewritten_trace_is_refused(self, tmp_path: Path) -> None:
        """A trace rewritten in place no longer matches and is reported as changed."""
        path = _write(tmp_path / "t.md", "first part")
        digest = sha256_bytes(b"first part")
        path.write_bytes(b"FIRST part")
        with pytest.raises(TraceChanged, match="stays pending"):
            read_snapshot(path, 10, digest)


class TestRender:
    def test_markdown_is_shown_as_is(self) -> None:
        """A non-JSON trace is its own text."""
        assert render("a.md", b"x & $1 \\1 {}") == "x & $1 \\1 {}"

    def test_jsonl_strings_are_decoded(self) -> None:
        """JSON escapes become the characters a person reads; bookkeeping keys are left out."""
        line = {"uuid": "u-1", "role": "user", "content": 'say "hi"\nthen \\1 & $1'}
        nested = {"message": {"content": [{"type": "text", "text": "{{trace}} {}"}]}}
        raw = "\n".join([json.dumps(line), json.dumps(nested), "not json & $1", ""]).encode()
        text = render("s.jsonl", raw)
        assert (
            text
            == 'role: user\ncontent: say "hi"\nthen \\1 & $1\n\ntext: {{trace}} {}\n\nnot json & $1\n'
        )
