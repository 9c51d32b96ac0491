"""`bullpen init`: lay down a working home from the defaults in config/.

The home is built in a temporary folder beside the target and renamed into
place at the end, so a failure leaves nothing half-written and an existing
home is never touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from agents import formats
from agents.build.config import BuildConfig
from agents.config import parse_address
from agents.home import Home
from agents.librarian.seed import lay_down as lay_down_seed
from agents.memory.namespaces import SEED_NAMESPACES, lessons_ns
from agents.packaged import defaults
from agents.runtime.cursor import Cursor
from room.errors import ConfigError, UsageError
from room.message import check_nick
from room.tail import Position
from trust import keys
from trust.secretfiles import (
    copy_private_tree,
    create_secret_file,
    ensure_private_dir,
    new_secret,
)


@dataclass
class InitOptions:
    operator: str = "operator"
    strict: str = "127.0.0.1:8080"
    relaxed: str = "127.0.0.1:8081"
    demo: bool = False
    extra_nicks: list[str] = field(default_factory=list)
    # The campaign-sandbox rules as the home's first memory entries (agents/librarian/seed.py).
    # `bullpen init` seeds them; a library caller (a test's home) opts in.
    seed_memory: bool = False


def _template(name: str) -> str:
    return (defaults() / name).read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    """Literal substitution of @NAME@ markers: nothing in a value is special."""
    out, pos = [], 0
    while True:
        start = text.find("@", pos)
        end = text.find("@", start + 1) if start >= 0 else -1
        if start < 0 or end < 0:
            out.append(text[pos:])
            return "".join(out)
        name = text[start + 1 : end]
        if name in values:
            out.append(text[pos:start])
            out.append(values[name])
            pos = end + 1
        else:
            out.append(text[pos : start + 1])
            pos = start + 1


def memory_section(nicks: list[str]) -> str:
    """`[memory.namespaces]`: the seed's namespaces, and each nick's own lessons."""
    lines = [
        "",
        "# --- shared memory (bullpen docs memory) -----------------------------------",
        "# Every save names one of these namespaces; a save to any other is refused.",
        "# Add a line here (what belongs there) before anyone saves to a new one.",
        "[memory.namespaces]",
    ]
    lines += [f'"{ns}" = "{meaning}"' for ns, meaning in SEED_NAMESPACES.items()]
    lines += [f'"{lessons_ns(n)}" = "lessons handed to @{n} on every wake"' for n in nicks]
    return "\n".join(lines) + "\n"


def _copy_tree(name: str, dest: Path) -> None:
    copy_private_tree(defaults() / name, dest, ignore=("__pycache__", "__init__.py"))


def _check_target(root: Path) -> None:
    if root.exists():
        if not root.is_dir():
            raise ConfigError(
                f"{root} exists and is not a folder; choose another place for the home"
            )
        if any(root.iterdir()):
            raise ConfigError(
                f"{root} already exists and is not empty; bullpen init never overwrites a home. "
                "Choose a new folder, or remove this one if you really mean to start over"
            )


def init_home(root: Path, options: InitOptions) -> Path:
    """Create a complete home at `root`; raise ConfigError without leaving anything behind."""
    try:
        check_nick(options.operator, "--operator")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    addresses = []
    for flag, value in (("--strict", options.strict), ("--relaxed", options.relaxed)):
        try:
            addresses.append(parse_address(value, flag))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    (strict_host, strict_port), (relaxed_host, relaxed_port) = addresses
    wildcard = {"0.0.0.0", "::", "[::]"}
    if strict_port == relaxed_port and (
        strict_host == relaxed_host or {strict_host, relaxed_host} & wildcard
    ):
        raise ConfigError(
            f"--strict and --relaxed are both {options.strict}; the two listeners need "
            "two different ports, e.g. --strict 127.0.0.1:8080 --relaxed 127.0.0.1:8081"
        )
    root = root.expanduser().absolute()
    _check_target(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.init-", dir=root.parent))
    try:
        _lay_down(staging, options)
        if root.exists():
            root.rmdir()  # empty, checked above
        os.rename(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root


def _lay_down(home: Path, options: InitOptions) -> None:
    home.chmod(0o700)  # the home is its user's alone: room, memory, logs and runs included
    # The demo corpus speaks of its operator as Avery; a real home starts from the nick.
    names = ["Avery"] if options.demo else [options.operator.capitalize()]
    society_text = _fill(
        _template("society.toml"),
        {
            "OPERATOR": options.operator,
            "STRICT": options.strict,
            "RELAXED": options.relaxed,
            "OPERATOR_NAMES": ", ".join(f'"{name}"' for name in names),
        },
    )
    nicks = list(tomllib.loads(society_text).get("nicks", {}))
    nicks += [n for n in options.extra_nicks if n not in nicks]
    society_text += memory_section(nicks)
    (home / "society.toml").write_text(society_text, encoding="utf-8")

    secrets = home / "secrets"
    ensure_private_dir(secrets)
    ensure_private_dir(secrets / "keys")
    create_secret_file(secrets / "post-secret", new_secret() + "\n")
    create_secret_file(secrets / "relaxed-token", new_secret() + "\n")
    create_secret_file(secrets / "read-token", new_secret() + "\n")
    hub_key = keys.generate_private_key(secrets / "hub.key")

    members = [options.operator, *nicks]
    # `gateway` posts the gateway's daily summary (agents/gateway/summary.py): privileged,
    # so the hub stamps it verified, but not trusted, so no lurker acts on it.
    privileged = [*members, *(["gateway"] if "gateway" not in members else [])]
    trust_text = _fill(
        _template("trust.toml"),
        {
            "HUB_PUBLIC_KEY": keys.public_text(hub_key),
            "TRUSTED": ", ".join(f'"{nick}"' for nick in members),
            "PRIVILEGED": "\n".join(f'{nick} = "secret"' for nick in privileged),
        },
    )
    (home / "trust.toml").write_text(trust_text, encoding="utf-8")

    (home / "room").mkdir(mode=0o700)
    formats.lay_down(home)  # home.toml: this version and each file family's format
    for nick in nicks:
        # A lurker of a new home starts at the room's beginning, so nothing posted
        # before its first start is missed; a nick added later starts at the end.
        Cursor(home / "state" / nick / "cursor").save(Position(0, 0))
    prompts = defaults() / "prompts"
    if prompts.is_dir():
        _copy_tree("prompts", home / "prompts")
    (home / "briefs").mkdir(mode=0o700)
    if options.seed_memory:
        build = tomllib.loads(society_text).get("build", {})
        defaults_ = BuildConfig()
        lay_down_seed(home, build.get("root", defaults_.root), build.get("alias", defaults_.alias))
    if options.demo:
        from agents.backpass.demo import lay_down_demo

        _copy_tree("demo/kb", home / "kb")
        lay_down_demo(home)


def cmd_init(args: argparse.Namespace) -> int:
    options = InitOptions(
        operator=args.operator,
        strict=args.strict,
        relaxed=args.relaxed,
        demo=args.demo,
        seed_memory=True,
    )
    if args.dir is None:  # `bullpen --home DIR init`, or BULLPEN_HOME, or the default
        target = Home.at(args.home).root
    elif args.home is not None and Path(args.home).expanduser().absolute() != (
        Path(args.dir).expanduser().absolute()
    ):
        raise UsageError(
            f"init was given two places: DIR {args.dir} and --home {args.home}; give one"
        )
    else:
        target = Path(args.dir)
    root = init_home(target, options)
    print(f"bullpen home created at {root}", file=sys.stderr)
    print(f"next: bullpen --home {root} up      (or: export BULLPEN_HOME={root})", file=sys.stderr)
    return 0
