"""One fenced run of the spec, counted: tests passing of total, and whether it is green.

The runner comes from the language's row (agents/build/routing.py), or
from `[build] runners` when the operator names another command. The count
is the runner's own when it gives one; when it cannot (a compile error, an
import that fails at collection) the total is the number of tests the spec
defines and none pass. Green means the runner exited 0 and every test of a
non-empty spec passed.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from agents.build.config import BuildConfig
from agents.build.fence import FenceLimits, clean_env, run_fenced
from agents.build.routing import Language
from agents.git.apart import Apart
from room.errors import StepFailed

__all__ = ["SpecRun", "Workspace", "run_spec", "syntax_problem"]


@dataclass(frozen=True)
class Workspace:
    """Where runs happen: the folder under test, the cache beside it, the fence to use, and
    what the fence hides (`hidden`, and always the grinder's git directory beside the folder:
    the fenced side sees a work tree, never the repository bullpen's git reads)."""

    folder: Path
    cache: Path
    fence: str
    hidden: tuple[Path, ...] = ()

    @property
    def repo(self) -> Apart:
        """The folder as a work tree, its git directory kept apart (agents/git/apart.py)."""
        return Apart.beside(self.folder)

    @property
    def unseen(self) -> tuple[Path, ...]:
        """Every place a fenced run of this workspace must not see."""
        return (*self.hidden, self.repo.gitdir)


@dataclass(frozen=True)
class SpecRun:
    passing: int
    total: int
    green: bool
    output: str
    fence: str
    elapsed_s: float
    timed_out: bool


def _limits(
    config: BuildConfig, timeout: float | None = None, language: Language | None = None
) -> FenceLimits:
    lifted = language.memory_mb if language is not None else None
    return FenceLimits(
        timeout_s=timeout or config.run_timeout_s,
        memory_mb=config.memory_mb,  # kept by the run's memory cgroup, whatever the rlimit
        address_space_mb=max(config.memory_mb, lifted) if lifted else None,
        cpu_s=config.cpu_s,
        file_size_mb=config.file_size_mb,
        processes=config.processes,
        disk_mb=config.disk_mb,
    )


def _argv(template: tuple[str, ...] | list[str], spec: str) -> list[str]:
    return [part.replace("{python}", sys.executable).replace("{spec}", spec) for part in template]


def _env(
    config: BuildConfig, space: Workspace, argv: list[str], language: Language
) -> dict[str, str]:
    tmp = space.cache / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = clean_env(
        space.cache,
        {
            "TMPDIR": str(tmp),
            "PYTHONPATH": str(space.folder),
            "NODE_PATH": config.node_path,
            "GOCACHE": str(space.cache / "go-build"),
            "GOPATH": str(space.cache / "go"),
            "GOPROXY": "off",
            "GOFLAGS": "-mod=mod",
            "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0",
            "NO_COLOR": "1",
            **dict(language.env),
        },
    )
    found = shutil.which(argv[0])
    if found and os.path.dirname(found) not in env["PATH"].split(":"):
        env["PATH"] = f"{os.path.dirname(found)}:{env['PATH']}"
    return env


def _place(language: Language, space: Workspace, spec_relative: str) -> tuple[Path, str]:
    if language.run_in_spec_dir:
        return space.folder / os.path.dirname(spec_relative), os.path.basename(spec_relative)
    return space.folder, spec_relative


async def syntax_problem(
    config: BuildConfig, language: Language, space: Workspace, spec_relative: str
) -> str | None:
    """Why the runner could not collect the spec (it does not parse), or None."""
    cwd, spec = _place(language, space, spec_relative)
    argv = _argv(language.syntax_check, spec)
    done = await run_fenced(
        argv,
        cwd=cwd,
        writable=[space.folder, space.cache],
        env=_env(config, space, argv, language),
        limits=_limits(config, 30.0, language),
        fence=space.fence,
        hidden=space.unseen,
    )
    if done.returncode == 0:
        return None
    tail = " | ".join(done.output.strip().splitlines()[-4:])[-600:]
    return f"the spec {spec_relative} does not parse as {language.name}: {tail}"


async def run_spec(
    config: BuildConfig,
    language: Language,
    space: Workspace,
    spec_relative: str,
    spec_text: str,
) -> SpecRun:
    """Run the spec behind the fence and count what the runner says; StepFailed when the run
    broke a bound it was killed for (more bytes than [build] disk_mb): a red flag, not a
    count."""
    cwd, spec = _place(language, space, spec_relative)
    template = config.runners.get(language.name) or list(language.runner)
    argv = _argv(template, spec)
    done = await run_fenced(
        argv,
        cwd=cwd,
        writable=[space.folder, space.cache],
        env=_env(config, space, argv, language),
        limits=_limits(config, language=language),
        fence=space.fence,
        hidden=space.unseen,
    )
    if done.overran:
        raise StepFailed(
            f"the code under test broke a bound of its fence: {done.overran}; the clone "
            f"{space.folder} holds what it wrote (remove it when read)"
        )
    counts = language.counts(done.output)
    static = language.tests_in(spec_text)
    if done.returncode == 0 and counts.total is not None:
        total = counts.total
    else:
        total = max(counts.total or 0, static)
    passing = min(counts.passing, total)
    green = done.returncode == 0 and total > 0 and passing == total
    return SpecRun(passing, total, green, done.output, done.fence, done.elapsed_s, done.timed_out)
