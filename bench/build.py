"""Benchmark the grind: its own cost per iteration beside the bare runner, in the same run.

    python bench/build.py            # a 20-test spec: 10 iterations per fence
    python bench/build.py --quick    # the first fence only: a smoke check

A fake code seat (tests/fakes/fake_coder.py, mode bench) fixes two tests per
iteration with zero think time. Per iteration the grind times its parts: the
seat (not the grind's cost), the fenced spec run, git (the rule checks and the
commit) and the post of the iteration to a real hub. The baseline is `pytest`
on the same tree, unfenced, with the same environment, run right after each
iteration (so a busy machine slows both alike). Goal:
the grind adds at most 20% over the bare runner per iteration, and under
100 ms per iteration with the fence on.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agents.build import grind as grinding  # noqa: E402
from agents.build.builddir import clone, prepare  # noqa: E402
from agents.build.config import BuildConfig  # noqa: E402
from agents.build.fence import BWRAP, RLIMITS, bwrap_works  # noqa: E402
from agents.build.routing import by_name  # noqa: E402
from agents.build.runs import Workspace, run_spec  # noqa: E402
from bench.table import print_table  # noqa: E402
from tests.build.helpers import coder_seat, set_build  # noqa: E402
from tests.support import Society  # noqa: E402

TESTS = 20
SPEC = "import calc\n\n" + "".join(
    f"\ndef test_f{i}():\n    assert calc.f{i}() == {i}\n\n" for i in range(TESTS)
)
PYTHON = by_name("python")


def timed(parts: dict[str, list[float]], name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    if asyncio.iscoroutinefunction(func):

        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await func(*args, **kwargs)
            finally:
                parts[name].append(time.perf_counter() - started)

        return wrapped_async

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            parts[name].append(time.perf_counter() - started)

    return wrapped


def bare_runs(tree: Path, count: int) -> list[float]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tree), "LANG": "C.UTF-8",
        "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }  # fmt: skip
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--tb=short",
        "tests/test_calc.py",
    ]
    found = []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run(argv, cwd=tree, env=env, capture_output=True, check=False)
        found.append(time.perf_counter() - started)
    return found


async def one_grind(society: Society, config: BuildConfig, fence: str, slug: str) -> dict[str, Any]:
    home = society.home
    folder = Path(config.root) / slug
    (folder / "tests").mkdir(parents=True)
    (folder / "tests/test_calc.py").write_text(SPEC)
    done = prepare(config, folder, PYTHON, "tests/test_calc.py", ["calc.py"])
    started = time.perf_counter()
    target = clone(config, folder)
    clone_s = time.perf_counter() - started
    cache = target.with_name(target.name + ".cache")
    cache.mkdir()
    space = Workspace(target, cache, fence, (home.root.resolve(),))
    parts: dict[str, list[float]] = {"seat": [], "run": [], "git": [], "post": [], "rule": []}
    originals = (grinding.take_turn, grinding.run_spec, grinding._commit, grinding._broke_rule)
    grinding.take_turn = timed(parts, "seat", grinding.take_turn)
    grinding.run_spec = timed(parts, "run", grinding.run_spec)
    grinding._commit = timed(parts, "git", grinding._commit)
    grinding._broke_rule = timed(parts, "rule", grinding._broke_rule)
    stamps: list[float] = []  # (the end of each iteration, when the next one starts)
    bare: list[float] = []
    try:
        async with home.client("py") as client:

            async def announce(data: dict[str, Any], output: str) -> None:
                posted = time.perf_counter()
                await client.say("@foreman", f"iteration {data['iteration']}", type="reply",
                                 data=data, thread=f"bench-{slug}")  # fmt: skip
                ended = time.perf_counter()
                parts["post"].append(ended - posted)
                bare.append(bare_runs(target, 1)[0])  # the baseline, on this tree, right now
                stamps.append((ended, time.perf_counter()))

            first = await run_spec(config, PYTHON, space, "tests/test_calc.py", SPEC)
            stamps.append((time.perf_counter(), time.perf_counter()))
            job = grinding.GrindJob(
                home=home, nick="py", config=config, language=PYTHON, build_dir=folder,
                baseline=done.baseline, space=space, spec_relative="tests/test_calc.py",
                tiers=["bench"], ticket={"problem": "p", "traps": "t", "constraints": "c"},
            )  # fmt: skip
            result = await grinding.grind(job, first, SPEC, announce)
    finally:
        grinding.take_turn, grinding.run_spec, grinding._commit, grinding._broke_rule = originals
        shutil.rmtree(cache, ignore_errors=True)
    assert result.green and result.passing == TESTS, (result, fence)
    iterations = [b[0] - a[1] for a, b in itertools.pairwise(stamps)]
    return {"iterations": iterations, "parts": parts, "clone_s": clone_s, "bare": bare}


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first fence only")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bullpen-bench-build-", dir="/tmp"))
    society = Society(base / "home")
    config = BuildConfig(root=str(base / "builds"), alias=str(base / "sandbox"), stall_after=50,
                         max_iterations=50)  # fmt: skip
    (base / "builds").mkdir()
    set_build(society.root, root=config.root, alias=config.alias)
    coder_seat(society.root, "bench", "bench")
    society.start_hub()
    rows = [["measure", "value"]]
    try:
        fences = [BWRAP, RLIMITS] if bwrap_works() else [RLIMITS]
        if args.quick:
            fences = fences[:1]
        for fence in fences:
            got = asyncio.run(one_grind(society, config, fence, f"calc-{fence}"))
            bare = got["bare"]
            parts = got["parts"]
            steps = len(got["iterations"])
            own = [i - s for i, s in zip(got["iterations"], parts["seat"], strict=True)]
            bare_p50, own_p50 = statistics.median(bare), statistics.median(own)
            run_p50 = statistics.median(parts["run"])
            work = statistics.median([o - r for o, r in zip(own, parts["run"], strict=True)])
            rows += [
                [f"[{fence}] iterations to green (2 tests each)", str(steps)],
                [f"[{fence}] iteration p50, the seat's time taken out", ms(own_p50)],
                [f"[{fence}]   of it: fenced spec run p50", ms(statistics.median(parts["run"]))],
                [f"[{fence}]   of it: git (rule checks + commit) p50",
                 ms(statistics.median(parts["git"]) + statistics.median(parts["rule"]))],
                [f"[{fence}]   of it: post to the hub p50", ms(statistics.median(parts["post"]))],
                [f"[{fence}] clone (once per grind)", ms(got["clone_s"])],
                [f"[{fence}] baseline: bare pytest on the same tree p50 (after each iteration)", ms(bare_p50)],
                [f"[{fence}] the grind's own work per iteration (git, post, rest)", ms(work)],
                [f"[{fence}] the fence's cost: fenced run - bare run, p50s", ms(run_p50 - bare_p50)],
                [f"[{fence}] grind overhead per iteration (goal < 100 ms)",
                 ms(own_p50 - bare_p50)],
                [f"[{fence}] ratio iteration / bare runner (goal <= 1.20)", f"{own_p50 / bare_p50:.2f}"],
            ]  # fmt: skip
    finally:
        society.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    print(f"bench/build.py: a {TESTS}-test spec, load average {os.getloadavg()[0]:.2f}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
