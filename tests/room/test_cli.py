"""The `bullpen` command a person uses: init, say, read, tail, keys."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support import HTTP, Society, bullpen_argv, run_cli, set_hub, wait_for


class TestInit:
    def test_lays_down_a_working_home(self, tmp_path: Path) -> None:
        """init writes config, trust table, 0600 secrets and the room folder."""
        root = tmp_path / "home"
        done = run_cli(
            root,
            "init",
            str(root),
            "--operator",
            "ada",
            "--strict",
            "127.0.0.1:18080",
            "--relaxed",
            "127.0.0.1:18081",
        )
        assert done.returncode == 0, done.stderr
        assert (root / "society.toml").exists() and (root / "trust.toml").exists()
        assert (root / "room").is_dir()
        for name in ("post-secret", "relaxed-token", "hub.key"):
            mode = stat.S_IMODE((root / "secrets" / name).stat().st_mode)
            assert mode == 0o600, name
        assert stat.S_IMODE((root / "secrets").stat().st_mode) == 0o700
        society = (root / "society.toml").read_text()
        assert 'operator = "ada"' in society and "127.0.0.1:18080" in society
        trust = (root / "trust.toml").read_text()
        assert 'ada = "secret"' in trust and '"ada"' in trust

    def test_refuses_to_overwrite_a_home(self, tmp_path: Path) -> None:
        """A second init on the same folder fails and changes nothing."""
        root = tmp_path / "home"
        assert run_cli(root, "init", str(root)).returncode == 0
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        again = run_cli(root, "init", str(root))
        assert again.returncode != 0
        assert "never overwrites" in again.stderr
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before

    def test_bad_operator_leaves_nothing(self, tmp_path: Path) -> None:
        """A bad --operator is refused before anything is written."""
        root = tmp_path / "home"
        done = run_cli(root, "init", str(root), "--operator", "Not A Nick")
        assert done.returncode == 78 and "not a nick" in done.stderr
        assert not root.exists()
        assert list(tmp_path.iterdir()) == []

    def test_one_port_for_both_listeners_is_refused(self, tmp_path: Path) -> None:
        """The strict and relaxed listeners cannot share an address; nothing is written."""
        root = tmp_path / "home"
        done = run_cli(
            root, "init", str(root), "--strict", "127.0.0.1:9000", "--relaxed", "127.0.0.1:9000"
        )
        assert done.returncode != 0 and "two different ports" in done.stderr
        assert list(tmp_path.iterdir()) == []

    def test_init_without_a_folder_uses_the_home(self, tmp_path: Path) -> None:
        """`bullpen --home DIR init` lays the home down at DIR; two different places are refused."""
        root = tmp_path / "home"
        assert run_cli(root, "init").returncode == 0
        assert (root / "society.toml").exists()
        clash = run_cli(root, "init", str(tmp_path / "elsewhere"))
        assert clash.returncode == 2 and "give one" in clash.stderr
        assert not (tmp_path / "elsewhere").exists()

    def test_commands_without_a_home_say_how_to_make_one(self, tmp_path: Path) -> None:
        """Any command pointed at a folder with no home explains `bullpen init`."""
        done = run_cli(tmp_path / "nowhere", "say", "@echo", "hi")
        assert done.returncode == 78 and "bullpen init" in done.stderr


class TestSayRead:
    def test_say_prints_the_stored_line(self, society: Society) -> None:
        """say posts as the operator with proof and prints the verified line."""
        society.start_hub()
        done = run_cli(
            society.root,
            "say",
            "echo",
            "hello there",
            "--type",
            "ask",
            "--thread",
            "t1",
            "--data",
            '{"k": 1}',
        )
        assert done.returncode == 0, done.stderr
        line = json.loads(done.stdout)
        assert line["verified"] is True and line["to"] == "@echo" and line["data"] == {"k": 1}

    def test_say_as_another_privileged_nick_and_relaxed(self, society: Society) -> None:
        """--as posts with that nick's proof; --relaxed goes through the token listener."""
        society.start_hub()
        assert json.loads(run_cli(society.root, "say", "@operator", "hi", "--as", "echo").stdout)[
            "verified"
        ]
        relaxed = run_cli(society.root, "say", "@operator", "hi", "--as", "echo", "--relaxed")
        assert relaxed.returncode == 0 and json.loads(relaxed.stdout)["verified"] is True

    def test_say_to_a_nick_no_lurker_serves_warns_with_near_names(self, society: Society) -> None:
        """`say @ecoh` stores the post (exit 0) and warns that no [nicks.ecoh] exists, naming @echo."""
        society.start_hub()
        done = run_cli(society.root, "say", "@ecoh", "hello")
        assert done.returncode == 0 and json.loads(done.stdout)["to"] == "@ecoh"
        assert "warning: no [nicks.ecoh]" in done.stderr and "did you mean @echo?" in done.stderr
        quiet = run_cli(society.root, "say", "@echo", "hello")
        assert quiet.returncode == 0 and "warning" not in quiet.stderr

    def test_say_as_an_unprivileged_nick_warns_the_post_is_unverified(
        self, society: Society
    ) -> None:
        """--as a nick that is not privileged: stored unverified, and stderr says so."""
        society.start_hub()
        done = run_cli(society.root, "say", "@echo", "hello", "--as", "visitor")
        assert done.returncode == 0 and json.loads(done.stdout)["verified"] is False
        assert "warning: visitor is not privileged" in done.stderr
        assert "verified: false" in done.stderr

    def test_rejection_prints_the_hubs_error_and_exits_1(self, society: Society) -> None:
        """A refused post prints the hub's reason and exits 1."""
        society.start_hub()
        done = run_cli(society.root, "say", "@echo", "x" * 70000)
        assert done.returncode == 1 and "64 KiB" in done.stderr
        bad = run_cli(society.root, "say", "@echo", "x", "--data", "[1]")
        assert bad.returncode != 0 and "JSON object" in bad.stderr

    @pytest.mark.parametrize(
        "args",
        [
            ["Echo", "hi"],
            ["@", "hi"],
            ["echo", "hi", "--thread", "run 1"],
            ["echo", "hi", "--reply-to", ""],
            ["echo", "hi", "--as", "Alice"],
            ["echo", "hi", "--data", "{bad"],
            ["echo", "hi", "--data", "NaN"],
        ],
    )
    def test_a_post_refused_before_sending_is_a_clear_error(
        self, society: Society, args: list[str]
    ) -> None:
        """Bad addresses, threads, nicks and data: one line saying why, exit 1, nothing written."""
        society.start_hub()
        done = run_cli(society.root, "say", *args)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("bullpen: ") and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
        assert society.lines() == []

    @pytest.mark.long
    def test_read_through_the_hub_pages_past_its_limit(self, society: Society) -> None:
        """`read --hub` prints the whole room, not only the hub's first 1,000-line answer."""
        # 1,005 unverified posts at full speed: past the default stranger limits (test_flood.py)
        set_hub(society.root, unverified_nick_posts_per_s=0, unverified_total_posts_per_s=0)
        society.start_hub()
        with httpx.Client(base_url=society.strict_url, timeout=10) as client:
            for n in range(1005):
                body = {"from": "stranger", "to": "@echo", "type": "chat", "body": f"m{n}"}
                assert client.post("/say", json=body).status_code == 200
        whole = run_cli(society.root, "read", "--hub")
        assert [json.loads(x)["seq"] for x in whole.stdout.splitlines()] == list(range(1, 1006))
        some = run_cli(society.root, "read", "--hub", "--limit", "1002", "--after", "2")
        assert [json.loads(x)["seq"] for x in some.stdout.splitlines()] == list(range(3, 1005))
        piped = subprocess.run(  # a reader that leaves early: no BrokenPipe traceback
            " ".join(map(shlex.quote, bullpen_argv(society.root, "read"))) + " | head -n 1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert len(piped.stdout.splitlines()) == 1 and "Traceback" not in piped.stderr

    @pytest.mark.parametrize("args", [["--limit", "0"], ["--limit", "-3"], ["--after", "-1"]])
    def test_read_refuses_a_limit_it_cannot_honour(self, society: Society, args: list[str]) -> None:
        """`--limit 0` or a negative seq is a usage error on both paths, not a silent guess."""
        society.start_hub()
        for extra in ([], ["--hub"]):
            done = run_cli(society.root, "read", *args, *extra)
            assert done.returncode == 2 and args[0] in done.stderr, done.stderr

    @pytest.mark.long
    def test_read_prints_jsonl_with_filters(self, society: Society) -> None:
        """read prints matching lines as JSONL, from the file or through the hub."""
        society.start_hub()
        for n in range(4):
            run_cli(society.root, "say", "@echo", f"m{n}", "--thread", "a" if n % 2 else "b")
        for extra in ([], ["--hub"]):
            done = run_cli(society.root, "read", "--thread", "a", *extra)
            assert [json.loads(line)["body"] for line in done.stdout.splitlines()] == ["m1", "m3"]
        last = run_cli(society.root, "read", "--last", "2")
        assert [json.loads(line)["seq"] for line in last.stdout.splitlines()] == [3, 4]
        after = run_cli(society.root, "read", "--after", "3", "--hub")
        assert [json.loads(line)["seq"] for line in after.stdout.splitlines()] == [4]

    def test_tail_follows_new_lines(self, society: Society) -> None:
        """tail --json prints lines as they are appended, and readable lines without it."""
        society.start_hub()
        run_cli(society.root, "say", "@echo", "first")
        out = society.root / "tail.out"
        with out.open("w") as sink:
            tail = subprocess.Popen(
                bullpen_argv(society.root, "tail", "--json"),
                stdout=sink,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                wait_for(lambda: "first" in out.read_text(), 15, "tail to show the first line")
                run_cli(society.root, "say", "@echo", "second")
                wait_for(lambda: "second" in out.read_text(), 15, "tail to show a new line")
            finally:
                os.killpg(tail.pid, 15)
                tail.wait(10)
        bodies = [json.loads(line)["body"] for line in out.read_text().splitlines()]
        assert bodies == ["first", "second"]
        # --json prints each line exactly as the room holds it
        assert out.read_bytes() == society.room.read_bytes()

    def test_tail_shows_control_characters_as_escapes(self, society: Society) -> None:
        """A post cannot recolour, move or clear the terminal of someone tailing the room."""
        society.start_hub()
        run_cli(society.root, "say", "@echo", "\x1b[31mRED\x1b[2J\r over\u2028x")
        out = society.root / "tail.out"
        with out.open("w") as sink:
            tail = subprocess.Popen(
                bullpen_argv(society.root, "tail"),
                stdout=sink,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                wait_for(lambda: "RED" in out.read_text(), 15, "tail to show the line")
            finally:
                os.killpg(tail.pid, 15)
                tail.wait(10)
        shown = out.read_text()
        assert "\x1b" not in shown and "\r" not in shown and "\u2028" not in shown
        assert "\\x1b[31mRED\\x1b[2J\\x0d over\\u2028x" in shown

    def test_tail_shows_bidi_controls_as_escapes(self, society: Society) -> None:
        """A post cannot reorder what a tailing reader sees with bidirectional controls."""
        bidi = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
        body = "pay " + "".join(f"{chr(c)}{c:x}" for c in bidi)
        society.start_hub()
        run_cli(society.root, "say", "@echo", body)
        out = society.root / "tail-bidi.out"
        with out.open("w") as sink:
            tail = subprocess.Popen(
                bullpen_argv(society.root, "tail"),
                stdout=sink,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                wait_for(lambda: "pay " in out.read_text(), 15, "tail to show the line")
            finally:
                os.killpg(tail.pid, 15)
                tail.wait(10)
        shown = out.read_text(encoding="utf-8")
        assert not any(chr(c) in shown for c in bidi), [
            hex(ord(ch)) for ch in shown if ord(ch) > 127
        ]
        assert "pay " + "".join(f"\\u{c:04x}{c:x}" for c in bidi) in shown


class TestKeys:
    def test_keys_new_writes_a_private_key_and_prints_the_trust_line(
        self, society: Society
    ) -> None:
        """keys new makes a 0600 key and prints the line to add under [privileged]."""
        done = run_cli(society.root, "keys", "new", "scribe")
        assert done.returncode == 0
        assert done.stdout.startswith('scribe = "ed25519:')
        key = society.root / "secrets" / "keys" / "scribe.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        again = run_cli(society.root, "keys", "new", "scribe")
        assert again.returncode != 0 and "already exists" in again.stderr
        show = run_cli(society.root, "keys", "show", "scribe")
        assert show.stdout == done.stdout


def test_repeated_drop_options_add_up() -> None:
    """`confirm T --drop a --drop b c` drops all three rows, not only the last option's."""
    from agents.cli import build_parser

    args = build_parser().parse_args(
        ["expedition", "confirm", "exp-1", "--drop", "row_1", "--drop", "row_2", "row_4"]
    )
    assert args.drop == ["row_1", "row_2", "row_4"]
    assert build_parser().parse_args(["expedition", "confirm", "exp-1"]).drop == []


@pytest.mark.parametrize(
    "args",
    [
        ["keys", "new", "BadNick"],
        ["mcp", "--as", "echo", "--transport", "http", "--port", "99999"],
        ["trust", "check", "--timeout", "-1"],
        ["expedition", "--title", "t", "--keyword", "k", "--wait-timeout", "nan"],
        ["backpass", "--wait-timeout", "0"],
        ["units", "install", "--nicks"],
        ["--log-level", "verbose", "read"],
        ["read", "--after", "abc"],
        ["tail", "--last", "-3"],
    ],
)
def test_an_argument_a_command_cannot_use_is_exit_2(society: Society, args: list[str]) -> None:
    """Refused before any work: exit 2, the option named, no traceback, nothing posted."""
    done = run_cli(society.root, *args, timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not society.room.exists() or society.lines() == []


def test_tail_after_the_end_of_the_room_says_so(society: Society) -> None:
    """`tail --after N` past the room's end is a usage error, not a 'room truncated' alarm."""
    society.start_hub()
    run_cli(society.root, "say", "@echo", "one")
    for extra in ([], ["--hub"]):
        done = run_cli(society.root, "tail", "--after", "99", *extra, timeout=30)
        assert done.returncode == 2 and "ends at seq 1" in done.stderr, done.stderr
        assert "truncated" not in done.stderr


def test_tail_through_the_hub_starts_with_the_last_lines(society: Society) -> None:
    """Through the hub, as from the file, tail first shows the last --last lines, not the
    whole room."""
    society.start_hub()
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for n in range(15):
            body = {"from": "stranger", "to": "@echo", "type": "chat", "body": f"m{n}"}
            assert client.post("/say", json=body).status_code == 200
    out = society.root / "tail.out"
    with out.open("w") as sink:
        tail = subprocess.Popen(
            bullpen_argv(society.root, "tail", "--hub", "--json", "--last", "4"),
            stdout=sink,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for(lambda: len(out.read_text().splitlines()) >= 4, 15, "tail's first lines")
            run_cli(society.root, "say", "@echo", "fresh")
            wait_for(lambda: "fresh" in out.read_text(), 15, "tail to follow")
        finally:
            os.killpg(tail.pid, 15)
            tail.wait(10)
    seqs = [json.loads(line)["seq"] for line in out.read_text().splitlines()]
    assert seqs == [12, 13, 14, 15, 16]


def test_a_missing_mcp_token_file_names_the_option(society: Society, tmp_path: Path) -> None:
    """`mcp --token-file` that does not exist is the option's fault, not the home's."""
    done = run_cli(
        society.root,
        "mcp",
        "--as",
        "echo",
        "--transport",
        "http",
        "--token-file",
        str(tmp_path / "nope"),
    )
    assert done.returncode == 2 and "--token-file" in done.stderr, done.stderr
    assert "bullpen init" not in done.stderr


def test_relaxed_empty_runs_no_relaxed_listener(society: Society) -> None:
    """`[hub] relaxed = ""` turns the relaxed listener off: the hub serves only strict."""
    toml = society.root / "society.toml"
    toml.write_text(
        toml.read_text().replace(f'relaxed = "127.0.0.1:{society.relaxed_port}"', 'relaxed = ""')
    )
    assert society.home.society.hub.relaxed is None
    society.start_hub()
    assert HTTP.get(f"{society.strict_url}/health", timeout=5).status_code == 200
    with pytest.raises(httpx.ConnectError):
        HTTP.get(f"{society.relaxed_url}/health", timeout=5)
