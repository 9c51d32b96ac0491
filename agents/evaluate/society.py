"""A fresh temporary home for one seat assignment, with its society up (`bullpen up`).

Each assignment gets a home of its own, made by `bullpen init`'s code on free
ports, so a case never sees another's room or memory and the operator's home
is never touched. The seats under test are copied from the operator's
society.toml: `--seat NAME` puts NAME's table in every model role's place
(the other tables stay: its fallbacks, and a build's code seats, which are
tiers, not roles); no `--seat` copies the seat tables as they are. The
home's [build] root and alias are its own, beside it. `--lessons
off` starts the society with BULLPEN_LESSONS=off, which lurkers read to wake
without lessons (agents/runtime/lessons.py). The operator's memory index is
copied in (a consistent sqlite backup), so "on" wakes with the lessons the
operator's own society would be given, and the difference is measured.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agents.cli.init import InitOptions, init_home
from agents.evaluate.settings import set_keys, toml_value, write_steps
from agents.home import Home
from agents.runtime.lessons import LESSONS_SWITCH as LESSONS_ENV
from agents.runtime.netports import free_ports
from agents.seats.registry import ROLES, parse_seat_table
from room.errors import BullpenError, UsageError

UP_S = 180.0  # how long the society may take to say "lurkers up"


def seat_tables(operator: Home, seat: str | None) -> dict[str, dict[str, Any]]:
    """The [seats.X] tables the eval home gets: the operator's, or NAME's in every role."""
    tables = {
        name: parse_seat_table(name, raw).model_dump(exclude_none=True)
        for name, raw in operator.society.seats.items()
    }
    if seat is None:
        return tables
    if seat not in tables and seat not in ROLES:
        known = ", ".join(sorted({*tables, *ROLES}))
        raise UsageError(
            f"--seat {seat!r}: there is no [seats.{seat}] table in {operator.society_file}; "
            f"the known seats are {known}"
        )
    chosen = tables.get(seat, {"kind": "local"})
    # the other tables stay (a build's code seats are tiers, not roles); the roles are NAME's
    return {**tables, **{role: chosen for role in ROLES}}


def write_seats(society_file: Path, tables: dict[str, dict[str, Any]]) -> None:
    """Put each table in society.toml, replacing a table of the same name."""
    text = society_file.read_text(encoding="utf-8")
    for name, table in tables.items():
        body = "\n".join(f"{key} = {toml_value(value)}" for key, value in table.items())
        replacement = f"[seats.{name}]\n{body}\n\n"
        pattern = re.compile(rf"^\[seats\.{re.escape(name)}\]\n(?:(?!\[).*\n?)*", re.M)
        if pattern.search(text):
            text = pattern.sub(replacement.replace("\\", "\\\\"), text, count=1)
        else:
            text = text.rstrip("\n") + "\n\n" + replacement
    society_file.write_text(text, encoding="utf-8")


def write_build(
    society_file: Path, scratch: Path, hidden: Sequence[Path] = (), seat_fence: str = "guarded"
) -> None:
    """The eval home's [build]: a build root and alias of its own, beside the home, so a
    build case never shares /tmp/bullpen-build (or the alias) with another run; the
    operator's seat fence, so seats are measured as they would run; and `hidden`, the
    suite's acceptance tests, which every fence then hides from seats and tested code."""
    (scratch / "builds").mkdir()
    keys = {
        "root": str(scratch / "builds"),
        "alias": str(scratch / "sandbox"),
        "seat_fence": seat_fence,
        "hidden": [str(place) for place in hidden],
    }
    text = society_file.read_text(encoding="utf-8")
    society_file.write_text(set_keys(text, "build", keys), encoding="utf-8")


def copy_memory(operator: Home, target: Home) -> bool:
    """The operator's memory index, copied into the eval home (False: there is none)."""
    import sqlite3

    from agents.memory.namespaces import index_path

    source, copy = index_path(operator), index_path(target)
    if not source.is_file():
        return False
    copy.parent.mkdir(parents=True, exist_ok=True)
    with (
        contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
        contextlib.closing(sqlite3.connect(copy)) as dst,
    ):
        src.backup(dst)
    os.chmod(copy, 0o600)
    return True


def cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "agents.cli", "--home", str(home), *args]


class EvalSociety:
    """One temporary home and its `bullpen up`, stopped (by its pid) and removed at exit."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.up: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Home:
        return Home(self.root)

    def start(self, nicks: list[str]) -> None:
        log = self.root / "eval-up.log"
        with open(log, "ab") as out:
            self.up = subprocess.Popen(
                cli(self.root, "up", "--nicks", ",".join(nicks)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        deadline = time.monotonic() + UP_S
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if "lurkers up" in text:
                return
            if self.up.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-2000:]
        self.stop()
        raise BullpenError(f"the eval society did not start (bullpen up said):\n{tail}")

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """A `bullpen` command against this home, as the operator would type it."""
        return subprocess.run(
            cli(self.root, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            stdin=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        up, self.up = self.up, None
        if up is None or up.poll() is not None:
            return
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(up.pid, signal.SIGKILL)  # the group this eval started, by its id
            up.wait(10)


@contextlib.contextmanager
def _scratch(keep: bool) -> Iterator[str]:
    """A fresh temporary folder, removed afterwards unless kept."""
    folder = tempfile.mkdtemp(prefix="bullpen-eval-")
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def society(
    operator: Home,
    seat: str | None,
    lessons: bool,
    hidden: Sequence[Path] = (),
    keep: bool = False,
) -> Iterator[EvalSociety]:
    """A fresh home with the seats under test, whose fences hide `hidden`; its society is
    started by the runner. `keep`: the folder stays after the run (its society stopped),
    for `bullpen replay`."""
    from agents.build.config import BuildConfig

    seat_fence = BuildConfig.of(operator).seat_fence
    with _scratch(keep) as scratch:
        root = Path(scratch) / "home"
        strict, relaxed = free_ports(2)
        init_home(root, InitOptions(strict=f"127.0.0.1:{strict}", relaxed=f"127.0.0.1:{relaxed}"))
        write_seats(root / "society.toml", seat_tables(operator, seat))
        write_steps(root / "society.toml", operator, Home(root).society.nicks, seat)
        write_build(root / "society.toml", Path(scratch), hidden, seat_fence)
        copy_memory(operator, Home(root))
        env = {**os.environ, "BULLPEN_HOME": str(root), "PYTHONUNBUFFERED": "1"}
        env[LESSONS_ENV] = "on" if lessons else "off"
        running = EvalSociety(root, env)
        try:
            yield running
        finally:
            running.stop()
