"""`bullpen up` and systemd units: running the society as a user would."""

from __future__ import annotations

import dataclasses
import getpass
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from agents.cli import units
from agents.home import Home
from room.errors import ConfigError
from tests.support import Society, bullpen_argv, run_cli, start_up, wait_for
from tests.test_lurker import say, wait_reply


def processes_of(home: Path) -> list[int]:
    """Every live process whose command line names this home."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if str(home).encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


class TestUp:
    def test_starts_everything_and_stops_it_all(self, society: Society) -> None:
        """up starts the hub and every lurker, and Ctrl-C stops them all with nothing left behind."""
        up = start_up(society)
        ask = say(society, "@echo", "via up")
        assert wait_reply(society, ask["id"])["body"] == "echo: via up"
        assert len(processes_of(society.root)) >= 4  # up, hub, foreman, echo
        up.signal(signal.SIGINT)
        assert up.proc.wait(30) == 130  # Ctrl-C: 130, as every command interrupted
        wait_for(lambda: processes_of(society.root) == [], 10, "every child to exit")
        assert "stopped" in up.output()

    def test_restarts_a_crashed_lurker(self, society: Society) -> None:
        """A lurker killed under up is restarted, and answers again."""
        up = start_up(society)
        pid = int(
            next(
                line.split()[3] for line in up.output().splitlines() if line.startswith("up: echo")
            )
        )
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: re.search(
                r"echo was killed by SIGKILL; restarting.*\n.*up: echo +pid \d+ +restarted \(1\)",
                up.output(),
            ),
            30,
            "up to say echo was killed by SIGKILL, and restart it",
        )
        ask = say(society, "@echo", "after the crash")
        assert wait_reply(society, ask["id"], 30)["body"] == "echo: after the crash"
        up.stop()
        wait_for(lambda: processes_of(society.root) == [], 10, "every child to exit")

    def test_exits_non_zero_when_the_hub_cannot_start(self, society: Society) -> None:
        """With the hub's port taken, up exits non-zero and shows the hub's reason."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", society.strict_port))
            taken.listen()
            done = subprocess.run(
                bullpen_argv(society.root, "up"), capture_output=True, text=True, timeout=60
            )
        assert done.returncode == 1
        assert "did not start" in done.stderr and "cannot listen" in done.stderr
        assert processes_of(society.root) == []

    def test_sigkill_of_up_leaves_no_orphans(self, society: Society) -> None:
        """Even if up itself is killed, its children get SIGTERM from the kernel and exit."""
        up = start_up(society)
        os.kill(up.pid, signal.SIGKILL)
        up.proc.wait(10)
        wait_for(lambda: processes_of(society.root) == [], 20, "orphaned children to exit")


SERVICES = ("bullpen-hub.service", "bullpen-lurker@.service", "bullpen-backpass.service")
ODD_HOME = "sp ace%h%z$HOME"  # a space, a valid and an invalid specifier, a variable


def exec_start(unit: str) -> str:
    return next(line for line in unit.splitlines() if line.startswith("ExecStart="))


def setting(unit: str, key: str) -> str:
    return next(line for line in unit.splitlines() if line.startswith(f"{key}="))


def verify_output(units_dir: Path, tmp_path: Path) -> str:
    """All `systemd-analyze --user verify` prints for these units, the lurker as an instance."""
    instances = tmp_path / "instances"
    instances.mkdir()
    for unit in units_dir.iterdir():
        if unit.is_dir():  # a build nick's drop-in: verified with an instance of its own
            shutil.copytree(unit, instances / unit.name)
            shutil.copy(units_dir / "bullpen-lurker@.service", instances / unit.name[:-2])
            continue
        name = unit.name.replace("lurker@.", "lurker@echo.")
        shutil.copy(unit, instances / name)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    verify = subprocess.run(
        [
            "systemd-analyze",
            "--user",
            "verify",
            *sorted(str(p) for p in instances.iterdir() if p.is_file()),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        timeout=60,
    )
    assert verify.returncode == 0, verify.stderr
    return verify.stdout + verify.stderr


def home_elsewhere(society: Society, root: Path, section: str = "", **paths: str) -> Home:
    """A Home at `root`, never created, holding the fixture's configuration (with `paths` set
    in [section]): rendering reads no file of the home, so units for a home outside /tmp can
    be rendered without writing outside /tmp."""
    real = society.home
    config = real.society
    if section:
        changed = {**getattr(config, section), **paths}  # a pipeline's section is a table
        config = config.model_copy(update={section: changed})
    home = Home(root)
    home.society = config  # cached properties: an instance attribute is what they return
    home.trust = dataclasses.replace(
        real.trust,
        path=root / "trust.toml",
        secret_file=root / "secrets" / "post-secret",
        relaxed_token_file=root / "secrets" / "relaxed-token",
        read_token_file=root / "secrets" / "read-token",
        hub_key_file=root / "secrets" / "hub.key",
        key_dir=root / "secrets" / "keys",
    )
    return home


class TestUnits:
    @pytest.mark.parametrize("name", ["home", ODD_HOME])
    def test_rendered_units_verify_cleanly(self, tmp_path: Path, name: str) -> None:
        """Rendered units, the lurker as bullpen-lurker@echo.service, pass `systemd-analyze
        --user verify` with no output at all, also for a home with a space, % and $."""
        if shutil.which("systemd-analyze") is None:
            pytest.skip(
                "systemd-analyze is not installed here (.ci/run installs it)"
            )  # real precondition
        root = Society(tmp_path / name).root
        target = tmp_path / "units"
        done = run_cli(root, "units", "install", "--dir", str(target), "--nicks", "echo")
        assert done.returncode == 0, done.stderr
        hub = (target / "bullpen-hub.service").read_text()
        doubled = str(root).replace("%", "%%")
        home_word = f'"{doubled}"' if " " in doubled else doubled
        assert exec_start(hub).endswith(f" --home {home_word} hub")
        assert verify_output(target, tmp_path) == ""

    def test_a_home_path_reaches_systemd_literally(self, tmp_path: Path) -> None:
        """A home with a space, % and $ is one quoted word with % doubled wherever systemd
        reads it, and $ stays as it is: ExecStart= starts with ':', so nothing is expanded."""
        root = Society(tmp_path / ODD_HOME).root
        target = tmp_path / "units"
        done = run_cli(root, "units", "install", "--dir", str(target))
        assert done.returncode == 0, done.stderr
        doubled = str(root).replace("%", "%%")
        hub = (target / "bullpen-hub.service").read_text()
        assert exec_start(hub).startswith("ExecStart=:")
        assert exec_start(hub).endswith(f' --home "{doubled}" hub')
        assert setting(hub, "ReadWritePaths") == f'ReadWritePaths="{doubled}" "{doubled}/room"'
        assert setting(hub, "Description") == f"Description=bullpen hub ({doubled})"
        lurker = (target / "bullpen-lurker@.service").read_text()
        assert exec_start(lurker).endswith(f' --home "{doubled}" lurk %i')
        assert setting(lurker, "Description") == f"Description=bullpen lurker %i ({doubled})"
        backpass = (target / "bullpen-backpass.service").read_text()
        assert exec_start(backpass).endswith(f' --home "{doubled}" backpass')
        assert units.systemd_word('/a"b\\c d') == '"/a\\"b\\\\c d"'
        assert units.systemd_word("/srv/bullpen-1.0/home") == "/srv/bullpen-1.0/home"

    def test_a_path_a_unit_cannot_hold_is_refused(self, tmp_path: Path) -> None:
        """A home whose path has a newline cannot be written in a unit: exit 78, nothing written."""
        root = Society(tmp_path / "new\nline").root
        target = tmp_path / "units"
        done = run_cli(root, "units", "install", "--dir", str(target))
        assert done.returncode == 78, done.stderr
        assert "control character" in done.stderr and "systemd" in done.stderr
        assert not target.exists() or not any(target.iterdir())

    def test_the_bullpen_command_is_quoted_word_by_word(
        self, society: Society, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bullpen path with a space is one quoted word; the fallback `python -m agents.cli`
        is three words, the interpreter quoted; a path systemd refuses is refused here."""
        monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
        python = tmp_path / "py env" / "bin" / "python3"  # no bullpen beside it
        assert units.bullpen_command(str(python)) == [str(python), "-m", "agents.cli"]
        home = society.home
        hub = units.render(
            home, "bullpen-hub.service", units.plan_units(home, units.bullpen_command(str(python)))
        )
        assert exec_start(hub).startswith(f'ExecStart=:"{python}" -m agents.cli --home ')
        venv = tmp_path / "my venv%" / "bin"
        venv.mkdir(parents=True)
        (venv / "bullpen").write_text("#!/bin/sh\n")
        assert units.bullpen_command(str(venv / "python")) == [str(venv / "bullpen")]
        hub = units.render(
            home, "bullpen-hub.service", units.plan_units(home, [str(venv / "bullpen")])
        )
        doubled = str(venv / "bullpen").replace("%", "%%")
        assert exec_start(hub).startswith(f'ExecStart=:"{doubled}" --home ')
        with pytest.raises(ConfigError, match="quote or backslash"):
            units.plan_units(home, ['/opt/it"s/bullpen'])

    def test_private_tmp_is_left_out_for_a_home_under_tmp(
        self, society: Society, tmp_path: Path
    ) -> None:
        """PrivateTmp=yes would hide a home under /tmp from the services: it is left out, and a
        warning on stderr says why."""
        target = tmp_path / "units"
        done = run_cli(society.root, "units", "install", "--dir", str(target))
        assert done.returncode == 0, done.stderr
        assert "warning" in done.stderr and "PrivateTmp" in done.stderr
        assert str(society.root) in done.stderr
        for name in SERVICES:
            lines = (target / name).read_text().splitlines()
            assert "PrivateTmp=yes" not in lines and "PrivateUsers=yes" in lines, name

    def test_private_tmp_is_kept_when_no_path_is_under_tmp(self, society: Society) -> None:
        """A home outside /tmp whose configured paths all stay outside gets PrivateTmp=yes."""
        home = home_elsewhere(society, Path("/srv/bullpen-never-made"))
        plan = units.plan_units(home, ["/usr/bin/bullpen"])
        assert plan.under_tmp == []
        for name in SERVICES:
            assert "PrivateTmp=yes" in units.render(home, name, plan).splitlines(), name

    @pytest.mark.parametrize(
        ("section", "key", "path"),
        [
            ("backpass", "public", "/var/tmp/memory-public"),
            ("backpass", "private", "/tmp/memory-private"),
            ("expedition", "kb", "/tmp/kb"),
        ],
    )
    def test_a_configured_path_under_tmp_turns_private_tmp_off(
        self, society: Society, section: str, key: str, path: str
    ) -> None:
        """A knowledge base or memory repository under /tmp or /var/tmp also leaves PrivateTmp out."""
        home = home_elsewhere(society, Path("/srv/bullpen-never-made"), section, **{key: path})
        plan = units.plan_units(home, ["/usr/bin/bullpen"])
        assert plan.under_tmp == [Path(path)]
        for name in SERVICES:
            text = units.render(home, name, plan)
            assert "PrivateTmp=yes" not in text.splitlines() and f"{path} is under" in text, name

    def test_the_printed_commands_enable_then_start(self, society: Society, tmp_path: Path) -> None:
        """The printed commands reload, enable and start every unit, then keep them running
        after logout (linger) and show the journal: one command a line, ready to paste."""
        config = tmp_path / "config"
        done = run_cli(
            society.root,
            "units",
            "install",
            "--nicks",
            "echo",
            env={"XDG_CONFIG_HOME": str(config)},
        )
        assert done.returncode == 0, done.stderr
        assert (config / "systemd" / "user" / "bullpen-hub.service").exists()
        units_ = "bullpen-hub.service bullpen-lurker@echo.service bullpen-backpass.timer"
        commands = [line for line in done.stdout.splitlines() if not line.startswith("#")]
        assert commands == [
            "systemctl --user daemon-reload",
            f"systemctl --user enable {units_}",
            f"systemctl --user start {units_}",
            f"loginctl enable-linger {shlex.quote(getpass.getuser())}",
            "journalctl --user -u 'bullpen-*' -f",
        ]

    def test_units_outside_the_search_path_are_linked_first(
        self, society: Society, tmp_path: Path
    ) -> None:
        """--dir outside systemd's user search path prints `systemctl --user link` for each
        unit before daemon-reload, and a comment says why; a folder on the path needs none."""
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        target = tmp_path / "my units"
        done = run_cli(society.root, "units", "install", "--dir", str(target), env=env)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        links = [line for line in lines if line.startswith("systemctl --user link ")]
        assert links == [
            f"systemctl --user link {shlex.quote(str(target / name))}" for name in units.TEMPLATES
        ]
        assert lines.index(links[-1]) < lines.index("systemctl --user daemon-reload")
        why = lines[lines.index(links[0]) - 1]
        assert why.startswith("#") and "search path" in why
        on_path = tmp_path / "config" / "systemd" / "user"
        done = run_cli(society.root, "units", "install", "--dir", str(on_path), env=env)
        assert done.returncode == 0, done.stderr
        assert "link" not in done.stdout

    def test_units_carry_the_restart_and_config_rules(
        self, society: Society, tmp_path: Path
    ) -> None:
        """Units restart on failure with a rate limit in [Unit], and never on a config error (78)."""
        run_cli(society.root, "units", "install", "--dir", str(tmp_path))
        for name in ("bullpen-hub.service", "bullpen-lurker@.service"):
            text = (tmp_path / name).read_text()
            unit, service = text.split("[Service]")
            assert "StartLimitIntervalSec=" in unit and "StartLimitBurst=" in unit
            assert "Restart=on-failure" in service and "RestartPreventExitStatus=78" in service
            assert "PrivateUsers=yes" in service
        lurker = (tmp_path / "bullpen-lurker@.service").read_text()
        assert f"StateDirectory={society.home.unit_state_name}\n" in lurker

    def test_unknown_nick_is_refused(self, society: Society, tmp_path: Path) -> None:
        """Asking for units of a nick that is not configured names the configured ones."""
        done = run_cli(society.root, "units", "install", "--dir", str(tmp_path), "--nicks", "ghost")
        assert done.returncode == 78 and "ghost" in done.stderr and "echo" in done.stderr


def test_ctrl_c_during_start_up_stops_what_started_and_exits_130(tmp_path: Path) -> None:
    """SIGINT while `up` is still starting lurkers: it says it is stopping, stops the hub and
    every lurker it started, never says "lurkers up", prints no traceback, and exits 130."""
    society = Society(tmp_path / "home")
    up = society.spawn("up", "up")
    wait_for(lambda: "running  log" in up.output() or not up.alive(), 60, "a first lurker")
    up.signal(signal.SIGINT)
    wait_for(lambda: not up.alive(), 60, "up to stop")
    out = up.output()
    assert up.proc.returncode == 130, out
    assert "lurkers up" not in out and "Traceback" not in out and "CancelledError" not in out
    assert "stopping during start-up" in out and "nothing is left running" in out
    pids = [int(p) for p in re.findall(r"pid (\d+)", out)]
    assert pids, out
    # The hub and every lurker started are gone (reaped by `up` before it exited).
    wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 10, "no child left")
