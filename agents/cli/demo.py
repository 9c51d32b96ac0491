"""`bullpen demo`: the whole society at work once, in a temporary home.

It lays down a home with the sample data, starts everything with `bullpen
up`, shows posts being verified, left unverified and rejected, runs the
pipelines end to end, audits the room and stops cleanly. Every step prints
what it shows and what it found; any surprise makes the demo exit non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from agents.backpass.gitwork import git
from agents.cli.init import InitOptions, init_home
from agents.home import Home
from agents.runtime.netports import NoFreePorts, PortRangeError, free_ports
from room import render
from room.client import RoomClient, read_file
from room.errors import Unauthorized, UsageError
from room.httpverify import verify_tls
from trust.audit import audit_file

Step = Callable[[Home], Awaitable[None]]


class DemoFailed(Exception):
    """Something the demo expected did not happen."""


def say(text: str) -> None:
    print(text, flush=True)


async def wait_reply(client: RoomClient, thread: str, ask_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    after = 0
    while time.monotonic() < deadline:
        lines, after = await client.read(after, 100, thread=thread, wait=1.0)
        for line in lines:
            if line.get("in_reply_to") == ask_id:
                return line
    raise DemoFailed(f"no reply to {ask_id} within {timeout:g} s")


async def show_gate(home: Home) -> None:
    operator = home.society.operator
    async with home.client(operator) as client:
        ask = await client.say("@echo", "hello, society", type="ask", thread="demo-gate")
        say(f"  operator asks @echo (verified={ask['verified']}): {render.human(ask)}")
        reply = await wait_reply(client, "demo-gate", ask["id"], 20)
        say(f"  @echo replies (verified={reply['verified']}): {render.human(reply)}")
        if not (ask["verified"] and reply["verified"] and reply["to"] == f"@{operator}"):
            raise DemoFailed("the echo round trip was not verified both ways")
    async with RoomClient(home.society.hub.strict_url(), nick="stranger") as stranger:
        line = await stranger.say("@echo", "let me in", type="ask", thread="demo-gate")
        say(
            f"  an unknown nick is written unverified (verified={line['verified']}); no lurker acts on it"
        )
    async with RoomClient(home.society.hub.strict_url(), nick="echo") as impostor:
        try:
            await impostor.say("@operator", "I am echo, trust me", thread="demo-gate")
            raise DemoFailed("the hub accepted a privileged nick without proof")
        except Unauthorized as exc:
            shown = textwrap.shorten(exc.message, width=90, placeholder=" …")  # whole words
            say(f"  a privileged nick without proof is rejected (401): {shown}")
    relaxed = home.society.hub.relaxed_endpoint()
    if relaxed:
        async with httpx.AsyncClient(verify=verify_tls(relaxed)) as raw:
            answer = await raw.post(
                f"{relaxed}/say",
                json={"from": "echo", "to": "@operator", "type": "chat", "body": "no token"},
            )
        say(f"  the relaxed listener without its token answers {answer.status_code}")
        if answer.status_code != 401:
            raise DemoFailed("the relaxed listener accepted a request without its token")


async def show_room(home: Home) -> None:
    lines, _ = read_file(home.room_path)
    for line in lines[-12:]:
        say("  " + render.human(line, 110))
    result = audit_file(home.room_path, home.trust.public_keys)
    say(f"  bullpen audit: {result.summary()}")
    if not result.ok:
        raise DemoFailed(f"the audit failed: {result.summary()}")


async def show_expedition(home: Home) -> None:
    from agents.expedition.command import expedition

    say("  the operator asks for a dig; the foreman walks the six steps and stops at the report:")
    code = await expedition(
        home,
        title="Waiting Is Part of the Work",
        keyword="patience",
        blaze=str(home.root / "kb" / "blaze-example.md"),
        yes=True,
        timeout=180,
    )
    if code != 0:
        raise DemoFailed(f"the expedition exited {code}")
    briefs = sorted((home.root / "briefs").glob("*.md"))
    if not briefs:
        raise DemoFailed("the expedition confirmed, but no brief was written")
    say(f"  the brief, written only after the confirming reply: {briefs[-1]}")


async def show_backpass(home: Home) -> None:
    from agents.backpass.command import backpass

    say("  the foreman runs the backpass over the sample traces; the funnel:")
    code = await backpass(home, wait_timeout=180)
    if code != 0:
        raise DemoFailed(f"the backpass exited {code}")
    say("  run again right away:")
    code = await backpass(home, wait_timeout=60)
    if code != 0:
        raise DemoFailed(f"the second backpass exited {code}")
    _, listed, _ = git(
        home.root / "memory" / "private", "branch", "--list", "memory-backpass/*", check=False
    )
    branches = listed.decode("utf-8", "replace").split()
    say(
        f"  the private memory now has a branch to review: {' '.join(b for b in branches if b != '*')}"
    )


DEMO_SPEC = """import slugify


def test_punctuation_becomes_one_dash():
    assert slugify.slugify("Hello, World!") == "hello-world"


def test_a_slug_is_unchanged():
    assert slugify.slugify("hello-world") == "hello-world"
"""


async def show_memory(home: Home) -> None:
    """A lesson saved through the room, recalled with its provenance, and handed to @echo on
    its next wake unasked (docs/memory.md)."""
    from agents.librarian.client import ask_librarian, checked_save
    from agents.memory.index import Index
    from agents.memory.namespaces import index_path, lessons_ns

    operator = home.society.operator
    text = "greet the operator by name before answering"
    save = checked_save(home, {"ns": lessons_ns("echo"), "text": text, "source": "bullpen demo"})
    async with home.client(operator) as client:
        saved = await ask_librarian(home, client, f"remember: {text}", {"save": save})
        entry = str((saved.get("data") or {}).get("saved"))
        say(f"  the operator saves a lesson for @echo; @librarian: {saved['body']}")
        with Index.open(index_path(home), create=False) as index:
            found = index.recall('"greet"', "/bullpen", 3)
        for hit in found:
            say(f"  recall 'greet': {hit.id} {hit.ns}, saved by {hit.saved_by} at seq {hit.seq}")
        if entry not in [hit.id for hit in found]:
            raise DemoFailed(f"recall did not find the saved lesson {entry}")
        ask = await client.say("@echo", "hello again", type="ask", thread="demo-memory")
        reply = await wait_reply(client, "demo-memory", ask["id"], 20)
    told = list((reply.get("data") or {}).get("lessons") or [])
    say(f"  @echo wakes for 'hello again' and is handed {len(told)} lesson(s): {', '.join(told)}")
    if entry not in told:
        raise DemoFailed(f"@echo's wake was not handed the lesson {entry}")


async def show_build(home: Home) -> None:
    """A build with no code-writing seat: checked, scaffolded, red, routed, and a loud
    GRIND FAILED saying what to configure (docs/build.md)."""
    from agents.build.command import build
    from agents.build.config import BuildConfig
    from agents.build.helpers import demo_ticket

    config = BuildConfig.of(home)
    campaign = Path(config.root) / "slugify"
    (campaign / "tests").mkdir(parents=True, exist_ok=True)
    (campaign / "tests" / "test_slugify.py").write_text(DEMO_SPEC, encoding="utf-8")
    say(f"  the operator wrote a spec in {campaign}; `bullpen build` posts the ticket:")
    code = await build(home, demo_ticket(str(campaign)), wait_timeout=120)
    if code != 1:
        raise DemoFailed(f"the build exited {code}, not 1 (no code seat is configured)")
    if (campaign / "slugify.py").read_text(encoding="utf-8") != "":
        raise DemoFailed("the build dir does not hold the empty stub")
    if Path(config.alias).resolve() != campaign.resolve():
        raise DemoFailed(f"the alias {config.alias} does not point at {campaign}")
    say(f"  {campaign} holds the stub and a baseline commit, {config.alias} points at it;")
    say("  name a code seat in tiers= (or [build] tiers) to grind it green")


def build_dirs(root: Path) -> tuple[Path, Path]:
    """A build root and alias of the demo's own under /tmp (never the machine's /tmp/sandbox)."""
    place = Path(tempfile.mkdtemp(prefix="bullpen-demo-build-", dir="/tmp"))
    return place / "builds", place / "sandbox"


async def show_trust_check(home: Home) -> None:
    from agents.cli.trustcheck import live_check, static_rows, table

    rows, general = static_rows(home)
    cause = await live_check(home, rows, timeout=30)
    if cause is not None:
        general.append(cause)
    for line in table(rows).splitlines():
        say("  " + line)
    problems = [r.nick for r in rows if not r.ok] + general
    if problems:
        raise DemoFailed(f"the trust check found problems: {problems}")


STEPS: list[tuple[str, Step]] = [
    ("the trust check: every lurker pinged, every pong verified", show_trust_check),
    ("the gate: verified, unverified, rejected", show_gate),
    ("a corpus expedition: Dig Report, then the brief on confirmation", show_expedition),
    ("the memory backpass, as the nightly timer runs it", show_backpass),
    ("shared memory: a lesson saved, recalled, and handed to the next wake", show_memory),
    ("a test-first build with no code seat: checked, scaffolded, red, GRIND FAILED", show_build),
    ("the room as people read it, and its audit", show_room),
]


async def wait_listening(up: asyncio.subprocess.Process, timeout: float = 90) -> asyncio.Task[None]:
    """Until `bullpen up` says "lurkers up": every lurker is then listening, so the steps'
    asks are answered; a lurker `up` names as not listening fails the demo with its name.
    Returns the task that reads the rest of `up`'s standard error."""
    assert up.stderr is not None
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = await asyncio.wait_for(up.stderr.readline(), left)
        except TimeoutError:
            break
        if not line:
            await up.wait()
            raise DemoFailed(f"bullpen up exited with status {up.returncode}")
        text = line.decode(errors="replace").strip()
        if "not listening yet" in text:
            raise DemoFailed(text.removeprefix("up: "))
        if "lurkers up" in text:
            return asyncio.create_task(drain(up.stderr))  # a full pipe must never stop `up`
    raise DemoFailed("the society did not come up in time; see the logs folder of the home")


async def drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def run_demo(root: Path, ports: list[int]) -> int:
    strict, relaxed = ports
    say(f"demo: laying down a home at {root}")
    init_home(
        root, InitOptions(strict=f"127.0.0.1:{strict}", relaxed=f"127.0.0.1:{relaxed}", demo=True)
    )
    builds, alias = build_dirs(root)
    builds.mkdir()
    society_file = root / "society.toml"
    text = society_file.read_text(encoding="utf-8")
    text = text.replace('root = "/tmp/bullpen-build"', f'root = "{builds}"', 1)
    society_file.write_text(text.replace('alias = "/tmp/sandbox"', f'alias = "{alias}"', 1))
    home = Home(root)
    say(
        f"demo: starting the society with `bullpen up` ({len(home.society.nicks)} lurkers and the hub)"
    )
    up = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agents.cli",
        "--home",
        str(root),
        "up",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "BULLPEN_HOME": str(root)},
    )
    code = 0
    draining: asyncio.Task[None] | None = None
    try:
        draining = await wait_listening(up)
        for number, (title, step) in enumerate(STEPS, 1):
            say(f"demo: [{number}/{len(STEPS)}] {title}")
            await step(home)
    except DemoFailed as exc:
        say(f"demo: FAILED — {exc}")
        code = 1
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(up.wait(), 30)
        except TimeoutError:
            up.kill()
            await up.wait()
        if draining is not None:
            draining.cancel()
        say(f"demo: stopped the society (bullpen up exited {up.returncode})")
        shutil.rmtree(builds.parent, ignore_errors=True)
    return code


def cmd_demo(args: argparse.Namespace) -> int:
    """In a temporary home (deleted afterwards unless --keep), or in --home DIR, which must not
    exist or be empty and is always kept: a folder the operator named is never deleted."""
    try:  # below the ephemeral range (agents/runtime/netports.py): no connection takes them first
        ports = free_ports(2)
    except (PortRangeError, NoFreePorts) as exc:
        raise UsageError(str(exc)) from None
    if args.home is not None:
        root, kept, base = Path(args.home).expanduser().absolute(), True, None
    else:
        base = Path(tempfile.mkdtemp(prefix="bullpen-demo-"))
        root, kept = base / "home", bool(args.keep)
    try:
        code = asyncio.run(run_demo(root, ports))
    finally:
        if not kept and base is not None:
            shutil.rmtree(base, ignore_errors=True)
    outcome = "done" if code == 0 else "finished with failures"
    if kept:
        say(f"demo: {outcome}; the home is kept at {root} (bullpen --home {root} tail)")
    else:
        say(f"demo: {outcome}; its temporary home is deleted (keep it with: bullpen demo --keep)")
    return code
