"""`[web]` in society.toml, its user unit, and the login link's rules, without a browser."""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

import pytest

from agents.cli.units import install
from agents.config import WebConfig
from agents.web.auth import Auth, login_query
from tests.support import Society, run_cli, start_up
from tests.test_lurker import say, wait_reply
from tests.test_up import verify_output
from tests.web.browser import add_web


def test_web_listen_defaults_to_loopback_8070_and_refuses_a_bad_address(tmp_path: Path) -> None:
    """An empty [web] listens on 127.0.0.1:8070; a listen that is no HOST:PORT is exit 78."""
    assert WebConfig().listen == "127.0.0.1:8070"
    assert WebConfig().base_url() == "http://127.0.0.1:8070"
    society = Society(tmp_path / "home")
    path = society.root / "society.toml"
    path.write_text(path.read_text() + '\n[web]\nlisten = "nowhere"\n')
    done = run_cli(society.root, "web", "url")
    assert done.returncode == 78
    assert "[web] listen 'nowhere' must look like HOST:PORT" in done.stderr


def test_the_web_unit_is_rendered_for_a_home_with_web_and_verifies(tmp_path: Path) -> None:
    """`bullpen units install` writes bullpen-web.service only when [web] is set; it passes
    `systemd-analyze --user verify` silently and is enabled by the printed commands."""
    society = Society(tmp_path / "home")
    written = install(society.home, tmp_path / "plain")
    assert written and "bullpen-web.service" not in {p.name for p in written}
    add_web(society)
    target = tmp_path / "units"
    done = run_cli(society.root, "units", "install", "--dir", str(target), "--nicks", "echo")
    assert done.returncode == 0, done.stderr
    unit = (target / "bullpen-web.service").read_text()
    assert " web serve" in unit and "RestartPreventExitStatus=78" in unit
    assert "bullpen-web.service" in done.stdout
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is not installed here (.ci/run installs it)")
    assert verify_output(target, tmp_path) == ""


class TestLinks:
    def test_a_link_is_good_once_and_only_before_it_expires(self, tmp_path: Path) -> None:
        """A redeemed link gives a session once; an expired or forged one never does; a
        session ended is refused, by this Auth and by one reading the same file later."""
        from urllib.parse import parse_qs

        from agents.web.sessions import SessionStore

        path = tmp_path / "sessions.sqlite"
        auth = Auth(b"k" * 32, SessionStore(path))
        query = {k: v[0] for k, v in parse_qs(login_query(auth.key, now=1000.0)).items()}
        assert auth.redeem(query["n"], query["e"], query["t"], now=2000.0) is None  # expired
        cookie = auth.redeem(query["n"], query["e"], query["t"], now=1001.0)
        assert cookie is not None and auth.session(cookie, now=1002.0) == cookie
        assert auth.redeem(query["n"], query["e"], query["t"], now=1001.0) is None  # used
        assert Auth(b"other" * 8, auth.store).session(cookie, now=1002.0) is None
        assert auth.csrf_ok(cookie, auth.csrf(cookie)) and not auth.csrf_ok(cookie, "")
        later = Auth(auth.key, SessionStore(path))  # a restarted view
        assert later.redeem(query["n"], query["e"], query["t"], now=1001.0) is None
        assert later.session(cookie, now=1003.0) == cookie
        auth.end(cookie)
        assert auth.session(cookie, now=1004.0) is None
        assert later.session(cookie, now=1004.0) is None


def test_the_society_page_sums_the_gateway_ledger_by_caller_and_backend(tmp_path: Path) -> None:
    """With [gateway] configured, its ledger is summed by caller and by backend; without it,
    there is no usage to show."""
    import json

    from agents.home import Home
    from agents.web.society import gateway_usage
    from tests.gateway.helpers import gateway_section

    society = Society(tmp_path / "home")
    assert gateway_usage(society.home) is None
    path = society.root / "society.toml"
    backend = {"base_url": "http://127.0.0.1:9", "prefixes": ["fake"]}
    path.write_text(path.read_text() + gateway_section(9, {"local": backend}))
    ledger = society.root / "gateway" / "ledger.jsonl"
    ledger.parent.mkdir()
    calls = [("termgen", "local", 200), ("termgen", "local", 502), ("scorer", "local", 200)]
    ledger.write_text(
        "".join(
            json.dumps({"caller": c, "backend": b, "status": s, "tokens_in": 10}) + "\n"
            for c, b, s in calls
        )
    )
    usage = gateway_usage(Home(society.root))
    assert usage is not None
    assert {k: (v.calls, v.failed) for k, v in usage["caller"].items()} == {
        "termgen": (2, 1),
        "scorer": (1, 0),
    }
    assert usage["backend"]["local"].tokens_in == 30


def test_the_society_page_shows_a_nicks_lessons_from_the_memory_index(tmp_path: Path) -> None:
    """The Society page's lessons are the texts of the nick's own entries in the index (not
    the records' reprs), and none for a nick with none or a home with no index yet."""
    from agents.memory.entry import parse_save
    from agents.memory.index import Index
    from agents.memory.namespaces import index_path
    from agents.web.society import lessons

    society = Society(tmp_path / "home")
    assert lessons(society.home, "echo") == []  # no index yet
    ns = "/bullpen/lessons-learned/echo"
    with Index.open(index_path(society.home)) as index, index.writing():
        save = parse_save({"ns": ns, "text": "echo answers in one line"})
        index.add(7, "id7", "operator", "t", save, ns)
    assert lessons(society.home, "echo") == ["echo answers in one line"]
    assert lessons(society.home, "foreman") == []


def test_web_url_without_web_names_the_default_and_with_nothing_listening_says_so(
    tmp_path: Path,
) -> None:
    """`bullpen web url` in a home with no [web] gives the link to where `bullpen web` serves
    then (the defaults), and says `bullpen up` starts no web view without the section. With
    [web] but no web view running, it prints the link and says that nothing listens there yet."""
    society = Society(tmp_path / "home")
    done = run_cli(society.root, "web", "url")
    assert done.returncode == 0 and done.stdout.startswith("http://127.0.0.1:8070/login?")
    assert "no [web] section" in done.stderr and "bullpen up" in done.stderr
    base = add_web(society)
    done = run_cli(society.root, "web", "url")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{base}/login?")
    assert f"nothing listens at {base} yet" in done.stderr


def test_up_with_the_web_port_taken_reports_it_once_and_runs_the_rest(tmp_path: Path) -> None:
    """A [web] port another program holds: `up` does not call the view running nor restart it
    forever; it says the view did not start (with its log's reason), and the lurkers run."""
    society = Society(tmp_path / "home")
    base = add_web(society)
    port = int(base.rsplit(":", 1)[1])
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        up = start_up(society, nicks=("echo",))
        out = up.output()
        assert "the web view did not start" in out and "cannot listen on" in out, out
        assert not re.search(r"^up: web +pid \d+ +running", out, re.M), out
        ask = say(society, "@echo", "still here")
        assert wait_reply(society, ask["id"])["body"] == "echo: still here"
        assert (
            "restarting in" not in up.output() and "web" not in up.output().split("lurkers up")[1]
        )


def test_a_session_file_that_is_a_link_stops_the_view_with_exit_78(tmp_path: Path) -> None:
    """state/web-sessions.sqlite planted as a link (to a file another process could then
    rewrite): `bullpen web` refuses to start, says which file and what to do, follows nothing."""
    society = Society(tmp_path / "home")
    add_web(society)
    target = tmp_path / "elsewhere.sqlite"
    target.write_bytes(b"")
    link = society.root / "state" / "web-sessions.sqlite"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    done = run_cli(society.root, "web", "serve", timeout=60)
    assert done.returncode == 78, (done.stdout, done.stderr)
    assert "web-sessions.sqlite" in done.stderr and "remove what is there" in done.stderr
    assert "Traceback" not in done.stderr and target.read_bytes() == b""
