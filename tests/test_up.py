"""`bullpen up`, systemd units and `bullpen trust check`: running the society as a user would."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support import Society, add_nick, bullpen_argv, run_cli, start_up, wait_for
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
        assert up.proc.wait(30) == 0
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
            lambda: (
                "echo       pid" in up.output().split("exited", 1)[-1]
                and "restarted" in up.output()
            ),
            30,
            "up to restart echo",
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


class TestUnits:
    def test_rendered_units_verify_cleanly(self, society: Society, tmp_path: Path) -> None:
        """Rendered units pass `systemd-analyze --user verify` with no output at all."""
        if shutil.which("systemd-analyze") is None:
            pytest.skip(
                "systemd-analyze is not installed here (.ci/run installs it)"
            )  # real precondition
        target = tmp_path / "units"
        done = run_cli(society.root, "units", "install", "--dir", str(target), "--nicks", "echo")
        assert done.returncode == 0, done.stderr
        assert "systemctl --user enable --now bullpen-lurker@echo.service" in done.stdout
        assert "loginctl enable-linger" in done.stdout
        hub = (target / "bullpen-hub.service").read_text()
        assert f"--home {society.root} hub" in hub and "@" not in hub.split("ExecStart=")[1].split(
            "\n"
        )[0].replace("lurker@", "")
        instances = tmp_path / "instances"
        instances.mkdir()
        shutil.copy(target / "bullpen-hub.service", instances / "bullpen-hub.service")
        shutil.copy(target / "bullpen-lurker@.service", instances / "bullpen-lurker@echo.service")
        for extra in ("bullpen-backpass.service", "bullpen-backpass.timer"):
            if (target / extra).exists():
                shutil.copy(target / extra, instances / extra)
        runtime = tmp_path / "xdg"
        runtime.mkdir(mode=0o700)
        files = sorted(str(p) for p in instances.iterdir())
        verify = subprocess.run(
            ["systemd-analyze", "--user", "verify", *files],
            capture_output=True,
            text=True,
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
            timeout=60,
        )
        assert verify.returncode == 0, verify.stderr
        assert verify.stdout + verify.stderr == "", verify.stdout + verify.stderr

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
        assert "StateDirectory=bullpen" in (tmp_path / "bullpen-lurker@.service").read_text()

    def test_unknown_nick_is_refused(self, society: Society, tmp_path: Path) -> None:
        """Asking for units of a nick that is not configured names the configured ones."""
        done = run_cli(society.root, "units", "install", "--dir", str(tmp_path), "--nicks", "ghost")
        assert done.returncode == 78 and "ghost" in done.stderr and "echo" in done.stderr


class TestTrustCheck:
    def test_passes_on_a_fresh_home_with_the_society_up(self, society: Society) -> None:
        """A home made by init, with up running, passes the static and live checks."""
        up = start_up(society)
        done = run_cli(society.root, "trust", "check")
        up.stop()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "pong ✓" in done.stdout and "trust check passed" in done.stderr
        for nick in ("operator", "foreman", "echo"):
            assert nick in done.stdout

    def test_trusted_but_not_privileged_fails_with_the_fix(self, society: Society) -> None:
        """A trusted nick that is not privileged is failure mode C, and the table says how to fix it."""
        add_nick(society.root, "helper", handler="agents.examples:echo", privileged=False)
        done = run_cli(society.root, "trust", "check", "--static")
        assert done.returncode == 1
        line = next(row for row in done.stdout.splitlines() if row.startswith("helper"))
        assert "trusted but not privileged: replies will be unverified and ignored" in line
        assert 'helper = "secret"' in line

    def test_foreman_without_reply_waking_fails_with_the_fix(self, society: Society) -> None:
        """An orchestrator that does not wake on replies is failure mode A."""
        path = society.root / "society.toml"
        path.write_text(path.read_text().replace("wake_replies = true", "wake_replies = false"))
        done = run_cli(society.root, "trust", "check", "--static")
        assert done.returncode == 1
        line = next(row for row in done.stdout.splitlines() if row.startswith("foreman"))
        assert "does not wake on replies" in line and "wake_replies = true" in line

    def test_loose_secret_fails(self, society: Society) -> None:
        """A group-readable secret is reported with the chmod that fixes it."""
        society.home.trust.secret_file.chmod(0o640)
        done = run_cli(society.root, "trust", "check", "--static")
        assert done.returncode == 1 and "chmod 600" in done.stdout

    def test_dead_lurker_fails_live(self, society: Society) -> None:
        """A configured lurker that is not running fails the live check with 'no reply'."""
        society.start_hub()
        society.start_lurker("foreman")
        done = run_cli(society.root, "trust", "check", "--timeout", "2")
        assert done.returncode == 1
        line = next(row for row in done.stdout.splitlines() if row.startswith("echo"))
        assert "no reply" in line
