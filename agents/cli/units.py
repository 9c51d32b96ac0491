"""`bullpen units install`: systemd user units for this installation and home.

The templates in systemd/ name no path of their own; rendering fills in the
absolute path of this `bullpen`, the home, and the folders the hub may
write. Lurker state lives in $STATE_DIRECTORY, which systemd creates.

A path goes into a unit the way systemd reads it back (systemd.syntax(7)):
one word, in double quotes with `\\` and `"` backslash-escaped when it holds
anything but plain characters, and `%` doubled so no specifier is expanded.
ExecStart= lines start with `:`, which turns $VARIABLE expansion off for the
whole line: `$$` would be no answer, since systemd never unescapes it in the
program path. A path a unit cannot hold (a control character, or a quote or
backslash in the program path, which systemd refuses) is a ConfigError.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from agents.backpass.config import PATH_KEYS as BACKPASS_PATHS
from agents.backpass.config import BackpassConfig
from agents.cli.init import _fill
from agents.expedition.config import ExpeditionConfig
from agents.gateway.config import GatewayConfig
from agents.home import Home
from agents.packaged import unit_templates
from room.errors import ConfigError

TEMPLATES = (
    "bullpen-hub.service",
    "bullpen-lurker@.service",
    "bullpen-backpass.service",
    "bullpen-backpass.timer",
)

GATEWAY_UNIT = "bullpen-gateway.service"  # only for a home with a [gateway] section
WEB_UNIT = "bullpen-web.service"  # only for a home with a [web] section
WITNESS_UNIT = "bullpen-witness.service"  # only with `bullpen units install --witness`
GATEWAY_UNITS = (GATEWAY_UNIT, "bullpen-gateway-summary.service", "bullpen-gateway-summary.timer")

# Where PrivateTmp=yes gives a service an empty folder of its own.
TMP_ROOTS = (Path("/tmp"), Path("/var/tmp"))

_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def _template_dir() -> Path:
    return unit_templates()


def bullpen_command(python: str | None = None) -> list[str]:
    """The words that run this bullpen, for ExecStart: its script, else `python -m agents.cli`.

    The script beside the interpreter that runs now (a virtualenv's or pipx's `bin/bullpen`),
    else the one on PATH, named as found and never resolved through its links: a package
    manager's link (~/.local/bin, /usr/local/bin) stays put across an upgrade, while where it
    leads may be a versioned folder the upgrade removes (tests/test_units_interpreter.py)."""
    python = python or sys.executable
    beside = Path(python).with_name("bullpen")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("bullpen")
    if found:
        return [os.path.abspath(found)]
    return [python, "-m", "agents.cli"]


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _one_line(text: str, what: str) -> str:
    if not text.isprintable():
        raise ConfigError(
            f"{what} {_printable(text)} has a control character (a newline or a tab), "
            "which a systemd unit file cannot hold; move it to a path without one and run "
            "`bullpen units install` again"
        )
    return text


def systemd_word(text: str, what: str = "the path") -> str:
    """`text` as one word of ExecStart= or ReadWritePaths=: `%` doubled, quoted if need be."""
    escaped = _one_line(text, what).replace("%", "%%")
    if _PLAIN.fullmatch(text):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_text(text: str, what: str = "the path") -> str:
    """`text` inside free text such as Description=: only specifiers are expanded there."""
    return _one_line(text, what).replace("%", "%%")


def _program_word(program: str) -> str:
    if any(c in program for c in "\"'\\"):
        raise ConfigError(
            f"the bullpen program {program} has a quote or backslash in its path, which "
            "systemd refuses in ExecStart=; install bullpen (its virtualenv) under a path "
            "without one and run `bullpen units install` again"
        )
    return systemd_word(program, "the bullpen program")


def touched_paths(home: Home) -> list[Path]:
    """Every configured path the services read or write: the home, the room, the trust
    files, and the [expedition] and [backpass] folders (knowledge base, memory repositories)."""
    config, trust = home.society, home.trust
    found = [home.root, home.room_path]
    found += [trust.secret_file, trust.relaxed_token_file, trust.read_token_file]
    found += [trust.hub_key_file, trust.key_dir]
    if config.room.credentials:
        found.append(home.path(config.room.credentials))
    expedition, backpass = ExpeditionConfig.of(home), BackpassConfig.from_home(home)
    found += [home.path(expedition.kb), home.path(expedition.briefs)]
    found += [home.path(str(getattr(backpass, key))) for key in BACKPASS_PATHS]
    if home.has_gateway:
        found.append(GatewayConfig.of(home).ledger_path(home).parent)
    unique: list[Path] = []
    for path in found:
        path = path.resolve()
        if path not in unique:
            unique.append(path)
    return unique


def tmp_root_of(path: Path) -> Path | None:
    """/tmp or /var/tmp when `path` lies under it (PrivateTmp=yes would hide it), else None."""
    for root in TMP_ROOTS:
        if any(path.is_relative_to(form) for form in {root, root.resolve()}):
            return root
    return None


def _hidden_by_private_tmp(paths: list[Path]) -> str:
    return ", ".join(f"{_printable(str(p))} is under {tmp_root_of(p)}" for p in paths)


@dataclass(frozen=True)
class UnitPlan:
    """What every template is filled with, and the paths that keep PrivateTmp= out (the
    outermost ones: the home, not every folder in it)."""

    values: dict[str, str]
    under_tmp: list[Path]

    def private_tmp_reason(self) -> str:
        return _hidden_by_private_tmp(self.under_tmp)


def plan_units(home: Home, command: list[str] | None = None) -> UnitPlan:
    """Fill-ins for this home and this bullpen; a ConfigError if a unit cannot hold them."""
    words = command if command is not None else bullpen_command()
    hidden = [p for p in touched_paths(home) if tmp_root_of(p) is not None]
    under_tmp = [p for p in hidden if not any(p != q and p.is_relative_to(q) for q in hidden)]
    writable_set = {home.root, home.room_path.parent}
    if home.has_gateway:  # the ledger may be configured outside the home
        writable_set.add(GatewayConfig.of(home).ledger_path(home).parent)
    writable = sorted(writable_set, key=str)
    values = {
        "BULLPEN": " ".join([_program_word(words[0]), *(systemd_word(w) for w in words[1:])]),
        "HOME": systemd_word(str(home.root), "the home"),
        "HOME_TEXT": systemd_text(str(home.root), "the home"),
        "WRITABLE": " ".join(systemd_word(str(p), "the writable folder") for p in writable),
        "STATE": home.unit_state_name,
        "PRIVATETMP": (
            f"# PrivateTmp=yes left out: {_hidden_by_private_tmp(under_tmp)}, "
            "and a private /tmp would hide it from this service."
            if under_tmp
            else "PrivateTmp=yes"
        ),
    }
    return UnitPlan(values, under_tmp)


def render(home: Home, template: str, plan: UnitPlan | None = None) -> str:
    source = _template_dir() / template
    return _fill(source.read_text(encoding="utf-8"), (plan or plan_units(home)).values)


BUILD_HANDLERS = ("agents.build.steps:",)  # the build's step nicks share the build root
GRINDER = "agents.build.steps:grind_spec"


def build_dropins(home: Home) -> dict[str, str]:
    """`bullpen-lurker@NICK.service.d/build.conf` for each build nick: one shared /tmp (the
    build root and the alias live there), and for a grinder its standing tier ladder."""
    from agents.build.config import TIERS_ENV, BuildConfig

    config = BuildConfig.of(home)
    found = {}
    for nick, table in home.society.nicks.items():
        if not (table.handler or "").startswith(BUILD_HANDLERS):
            continue
        lines = [
            "# Rendered by `bullpen units install` from [build] (`bullpen docs build`).",
            "[Service]",
            f"# {config.root} and {config.alias} must be the same folders for every build nick:",
            "# a private /tmp would give each its own.",
            "PrivateTmp=no",
        ]
        if table.handler == GRINDER:
            tiers = ",".join(config.tiers)
            lines += [
                "# The standing tier ladder, floor first: policy lives here; a ticket's tiers=",
                "# is for one grind. Empty: [build] tiers (a grind fails loud with no code seat).",
                f"Environment={systemd_word(f'{TIERS_ENV}={tiers}', 'the tier ladder')}",
            ]
        found[f"bullpen-lurker@{nick}.service.d/build.conf"] = "\n".join(lines) + "\n"
    return found


def install(
    home: Home, target: Path, plan: UnitPlan | None = None, *, witness: bool = False
) -> list[Path]:
    plan = plan or plan_units(home)
    wanted = [*TEMPLATES, *(GATEWAY_UNITS if home.has_gateway else ())]
    wanted += [WEB_UNIT] if home.society.web is not None else []
    wanted += [WITNESS_UNIT] if witness else []
    rendered = {
        name: render(home, name, plan) for name in wanted if (_template_dir() / name).exists()
    }
    dropins = build_dropins(home)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered.items():
        path = target / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for name, text in dropins.items():  # beside the units, not linked: systemd reads them there
        path = target / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return written


def user_search_path() -> list[Path]:
    """The folders systemd's user manager loads units from (systemd.unit(5), "User Unit
    Search Path"), leaving out the ones systemd itself writes (.control, transient, generators)."""
    env, home = os.environ, Path.home()
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    data_home = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    config_dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    data_dirs = (env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    runtime = env.get("XDG_RUNTIME_DIR")
    return [
        config_home / "systemd" / "user",
        *(Path(d) / "systemd" / "user" for d in config_dirs if d),
        Path("/etc/systemd/user"),
        *([Path(runtime) / "systemd" / "user"] if runtime else []),
        Path("/run/systemd/user"),
        data_home / "systemd" / "user",
        *(Path(d) / "systemd" / "user" for d in data_dirs if d),
        Path("/usr/local/lib/systemd/user"),
        Path("/usr/lib/systemd/user"),
    ]


def on_search_path(folder: Path) -> bool:
    return folder.resolve() in {p.resolve() for p in user_search_path()}


def commands(target: Path, written: list[Path], nicks: list[str], user: str) -> list[str]:
    """What to run next, one command a line, comments on lines of their own."""
    names = {path.name for path in written}
    lines = ["# then, as this user:"]
    if not on_search_path(target):
        lines.append(
            f"# {_printable(str(target))} is not on systemd's user unit search path "
            "(systemd.unit(5)), so link each unit into it first:"
        )
        lines += [f"systemctl --user link {shlex.quote(str(path))}" for path in written]
    units = [n for n in ("bullpen-hub.service", GATEWAY_UNIT) if n in names]
    units += [n for n in (WEB_UNIT,) if n in names]
    if "bullpen-lurker@.service" in names:
        units += [f"bullpen-lurker@{nick}.service" for nick in nicks]
    timers = ("bullpen-backpass.timer", "bullpen-gateway-summary.timer")
    units += [n for n in timers if n in names]  # the nightly backpass, the gateway's summary
    listed = " ".join(shlex.quote(unit) for unit in units)
    return [
        *lines,
        "systemctl --user daemon-reload",
        f"systemctl --user enable {listed}",
        f"systemctl --user start {listed}",
        "# keep them running after you log out:",
        f"loginctl enable-linger {shlex.quote(user)}",
        "# watch the logs:",
        "journalctl --user -u 'bullpen-*' -f",
        *(
            [
                "# a witness cosigning the hub's checkpoints (`bullpen docs audit`), if wanted here:",
                f"systemctl --user enable --now {WITNESS_UNIT}",
            ]
            if WITNESS_UNIT in names
            else []
        ),
    ]


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
    target = Path(args.dir).expanduser().absolute() if args.dir else user_search_path()[0]
    plan = plan_units(home)
    written = install(home, target, plan, witness=getattr(args, "witness", False))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    if plan.under_tmp:
        print(
            f"warning: PrivateTmp=yes is left out of the units: {plan.private_tmp_reason()}, "
            "and a private /tmp would hide it from the services. Keep the home and its "
            "folders out of /tmp and /var/tmp to have it.",
            file=sys.stderr,
        )
    for warning in timer_warnings(written, nicks, configured):
        print(warning, file=sys.stderr)
    print("\n".join(commands(target, written, nicks, getpass.getuser())))
    return 0


def timer_warnings(written: list[Path], nicks: list[str], configured: list[str]) -> list[str]:
    """A timer the commands enable whose run needs a lurker --nicks leaves out."""
    from agents.backpass.pipeline import NICKS as BACKPASS_NICKS

    names = {path.name for path in written}
    if "bullpen-backpass.timer" not in names:
        return []
    needed = ["foreman", *BACKPASS_NICKS.values()]
    missing = [n for n in needed if n in configured and n not in nicks]
    if not missing:
        return []
    return [
        f"warning: bullpen-backpass.timer is enabled below, but its nightly run needs the "
        f"lurkers {', '.join(missing)}, which --nicks leaves out: it would wait for them and "
        f"fail. Add them: --nicks {' '.join(dict.fromkeys([*nicks, *missing]))} (or leave "
        "--nicks out for every lurker)"
    ]
