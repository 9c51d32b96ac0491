"""`bullpen units install`: systemd user units for this installation and home.

The templates in systemd/ name no path of their own; rendering fills in the
absolute path of this `bullpen`, the home, and the folders the hub may
write. Lurker state lives in $STATE_DIRECTORY, which systemd creates.
"""

from __future__ import annotations

import argparse
import getpass
import shlex
import shutil
import sys
from pathlib import Path

from agents.home import Home
from agents.initialize import _fill
from agents.packaged import unit_templates
from room.errors import ConfigError

TEMPLATES = (
    "bullpen-hub.service",
    "bullpen-lurker@.service",
    "bullpen-backpass.service",
    "bullpen-backpass.timer",
)


def _template_dir() -> Path:
    return unit_templates()


def bullpen_executable() -> str:
    """The absolute command that runs this bullpen, for ExecStart."""
    beside = Path(sys.executable).with_name("bullpen")
    if beside.exists():
        return str(beside)
    found = shutil.which("bullpen")
    if found:
        return str(Path(found).resolve())
    return f"{sys.executable} -m agents.cli"


def _quote(path: Path | str) -> str:
    text = str(path)
    return f'"{text}"' if " " in text else text


def render(home: Home, template: str) -> str:
    source = _template_dir() / template
    writable = {home.root, home.room_path.parent}
    text = source.read_text(encoding="utf-8")
    return _fill(
        text,
        {
            "BULLPEN": bullpen_executable(),
            "HOME": _quote(home.root),
            "WRITABLE": " ".join(sorted(_quote(p) for p in writable)),
        },
    )


def install(home: Home, target: Path, nicks: list[str]) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TEMPLATES:
        if not (_template_dir() / name).exists():
            continue
        path = target / name
        path.write_text(render(home, name), encoding="utf-8")
        written.append(path)
    return written


def cmd_units(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    configured = list(home.society.nicks)
    nicks = args.nicks if args.nicks else configured
    unknown = [n for n in nicks if n not in configured]
    if unknown:
        raise ConfigError(
            f"no [nicks.{unknown[0]}] in {home.society_file}; configured nicks: {', '.join(configured)}"
        )
    target = (
        Path(args.dir).expanduser() if args.dir else Path("~/.config/systemd/user").expanduser()
    )
    for path in install(home, target, nicks):
        print(f"wrote {path}", file=sys.stderr)
    lurkers = " ".join(shlex.quote(f"bullpen-lurker@{n}.service") for n in nicks)
    print(
        "\n".join(
            [
                "# then, as this user:",
                "systemctl --user daemon-reload",
                "systemctl --user enable --now bullpen-hub.service",
                f"systemctl --user enable --now {lurkers}",
                "systemctl --user enable --now bullpen-backpass.timer   # the nightly backpass",
                f"loginctl enable-linger {getpass.getuser()}   # keep running after you log out",
                "journalctl --user -u 'bullpen-*' -f             # watch the logs",
            ]
        )
    )
    return 0
