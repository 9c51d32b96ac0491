"""What share of fix-existing-code campaigns goes green, per code seat.

    python bench/fixexisting.py            # five campaigns per seat
    python bench/fixexisting.py --quick    # two: a smoke check that the bench still runs

Five campaigns, each a git repository of real code (a small inventory module
of about 3 KB) with one bug planted in one function and an operator's spec
for it; the grind (agents/build/grind.py) climbs a ladder of one seat, behind
the real fence, with real pytest. The seats:

  shown     tests/fakes/fake_code_model.py, model "fix": copies the buggy
            function's numbered lines from the prompt into an edit of those lines
  sloppy    the same model whose first answer's old text is re-indented (not what
            the lines say), so it must read why from its next prompt
  unshown   "fix" with [build] prompt_tokens at its floor (500): the module is
            left out of the prompt, the model can only guess a whole file,
            which the grind refuses (a file not shown is never overwritten)
  local     the built-in seat, which writes no code
  real      SmolLM2-135M-Instruct on llama.cpp's llama-server, an `openai` seat
            through the home's gateway (tests/realmodel/helpers.py: real_seat),
            capped at 400 tokens, so each turn is the focused one (the failing
            test's function answered as a code block: agents/build/focus.py), six
            candidates tried in the fence, the first greedy and the later sampled;
            only with `--seat real` (build it: eval "$(bash .ci/build-llama-server)")

    python bench/fixexisting.py --seat real    # the real model alone: minutes a campaign

No hub is needed: the iterations are not posted. Each red campaign says why
(the grind's problems: an edit refused and why, a seat that gave no answer).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agents.build import grind as grinding  # noqa: E402
from agents.build.builddir import clone  # noqa: E402
from agents.build.config import BuildConfig  # noqa: E402
from agents.build.fence import choose  # noqa: E402
from agents.build.routing import by_name  # noqa: E402
from agents.build.runs import Workspace, run_spec  # noqa: E402
from bench.table import print_table  # noqa: E402
from tests.build.helpers import set_build  # noqa: E402
from tests.gateway.helpers import GatewayHome  # noqa: E402
from tests.realmodel.helpers import RealSeat, real_seat  # noqa: E402
from tests.realmodel.server import PartMissing, model_file, server_binary  # noqa: E402
from tests.support import Proc, Society, set_seat, wait_for  # noqa: E402

FAKE = REPO / "tests" / "fakes" / "fake_code_model.py"
PYTHON = by_name("python")
FAKE_SEATS = ("shown", "sloppy", "unshown")
SEATS = (*FAKE_SEATS, "local", "real")
NICK = "py"  # the grinder nick whose caller token the real seat's calls carry
# SmolLM2's server holds 4096 tokens (tests/realmodel/server.py): the prompt's budget for the
# repository (about 4 characters a token) and the answer's bound leave room for the rest.
REAL_PROMPT_TOKENS = 2000
REAL_ANSWER_TOKENS = 400  # an edit of one function fits; at ~7 tokens/s a call is a minute
# Each a candidate: the first greedy, the later ones sampled, each told how the last did
# (a focused turn's answer is a function of a few lines: seconds a call).
REAL_ITERATIONS = 6
FILLER = "".join(
    f'\n\ndef helper_{i}(items):\n    """Helper {i}: a step of the stock report."""\n'
    f"    return [item for item in items if item.get('kind') == 'k{i}']\n"
    for i in range(20)
)
GOOD = {
    "restock": ("def restock(level, minimum, batch):\n    if level < minimum:\n"
                "        return level + batch\n    return level\n"),
    "value": "def value(items):\n    return sum(i['price'] * i['count'] for i in items)\n",
    "average": ("def average(prices):\n    if not prices:\n        return 0\n"
                "    return sum(prices) / len(prices)\n"),
    "label": "def label(name, count):\n    return f'{name.strip().title()} x{count}'\n",
    "clamp": "def clamp(count, low, high):\n    return max(low, min(count, high))\n",
}  # fmt: skip
BUGS = {  # function: (the wrong text planted, the right text)
    "restock": ("level <= minimum - 1 and level < 0", "level < minimum"),
    "value": ("i['price'] + i['count']", "i['price'] * i['count']"),
    "average": ("/ (len(prices) + 1)", "/ len(prices)"),
    "label": ("name.title()", "name.strip().title()"),
    "clamp": ("max(low, min(count, low))", "max(low, min(count, high))"),
}
SPECS = {
    "restock": "assert inventory.restock(2, 5, 10) == 12\n    assert inventory.restock(7, 5, 10) == 7",
    "value": "assert inventory.value([{'price': 2, 'count': 3}]) == 6",
    "average": "assert inventory.average([2, 4]) == 3\n    assert inventory.average([]) == 0",
    "label": "assert inventory.label('  bolt ', 3) == 'Bolt x3'",
    "clamp": "assert inventory.clamp(9, 0, 5) == 5\n    assert inventory.clamp(-1, 0, 5) == 0",
}


def module(buggy: str) -> str:
    parts = []
    for name, text in GOOD.items():
        if name == buggy:
            wrong, right = BUGS[name]
            line = next(x for x in text.splitlines() if right in x)
            text = text.replace(line, line.replace(right, wrong))
        parts.append(text)
    return '"""Stock levels and prices."""\n\n\n' + "\n\n".join(parts) + FILLER


def campaign(root: Path, buggy: str, seat: str) -> Path:
    folder = root / f"{buggy}-{seat}"
    (folder / "tests").mkdir(parents=True)
    (folder / "inventory.py").write_text(module(buggy))
    tests = "".join(f"\n\ndef test_{name}():\n    {SPECS[name]}\n" for name in GOOD)
    (folder / "tests/test_inventory.py").write_text("import inventory\n" + tests)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "baseline"]):
        subprocess.run(["git", "-c", "user.name=op", "-c", "user.email=op@example.org", *args],
                       cwd=folder, check=True, capture_output=True)  # fmt: skip
    return folder


def build_config(builds: Path, sandbox: Path, seat: str) -> BuildConfig:
    """The [build] settings of one campaign: the unshown seat's prompt at its floor, the real
    seat's sized to its server's context."""
    tokens = {"unshown": 500, "real": REAL_PROMPT_TOKENS}.get(seat, 12000)
    iterations = REAL_ITERATIONS if seat == "real" else 3
    stall = REAL_ITERATIONS if seat == "real" else 2  # every candidate is tried
    return BuildConfig(root=str(builds), alias=str(sandbox), stall_after=stall,
                       max_iterations=iterations, prompt_tokens=tokens)  # fmt: skip


async def one(society: Society, config: BuildConfig, folder: Path, tier: str) -> dict[str, Any]:
    """Grind one campaign's clone with `tier`: green or not, the iterations, the grind's
    seconds, its problems (why it is red), the seats its judgments name, the clone."""
    home = society.home
    spec = "tests/test_inventory.py"
    baseline = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    target = clone(config, folder)
    cache = target.with_name(target.name + ".cache")
    cache.mkdir()
    space = Workspace(target, cache, choose("auto"), (home.root.resolve(),))
    text = (target / spec).read_text()
    turns: list[dict[str, Any]] = []

    async def announce(data: dict[str, Any], output: str) -> None:
        turns.append(data)

    started = time.perf_counter()
    try:
        first = await run_spec(config, PYTHON, space, spec, text)
        job = grinding.GrindJob(
            home=home, nick=NICK, config=config, language=PYTHON, build_dir=folder,
            baseline=baseline, space=space, spec_relative=spec, tiers=[tier],
            ticket={"problem": "a stock figure is wrong", "traps": "none known",
                    "constraints": "none", "targets": []},
        )  # fmt: skip
        result = await grinding.grind(job, first, text, announce)
        return {"green": result.green, "iterations": sum(result.iterations.values()),
                "s": time.perf_counter() - started, "problems": result.problems,
                "passing": f"{result.passing}/{result.total}", "turns": turns,
                "seats": sorted({t["judgment"]["seat"] for t in turns if t.get("judgment")}),
                "clone": target}  # fmt: skip
    except Exception as exc:  # a ladder of only local seats fails loud: red
        return {"green": False, "iterations": 0, "s": time.perf_counter() - started,
                "problems": [str(exc)], "passing": "", "turns": turns, "seats": [],
                "clone": target}  # fmt: skip
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def start_real(society: Society) -> RealSeat:
    """The real seat: llama-server and the home's gateway, both started here."""
    return real_seat(GatewayHome(society), "real", (NICK,), max_tokens=REAL_ANSWER_TOKENS)


def why_red(outcome: dict[str, Any]) -> str:
    """A red campaign's reason in one line: the grind's last problem, else the spec's count."""
    problems = outcome["problems"]
    said = problems[-1] if problems else f"spec still red ({outcome['passing']} passing)"
    return " ".join(said.split())[:300]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two campaigns, not five")
    parser.add_argument("--seat", action="append", choices=SEATS,
                        help="a seat to run (repeatable); default: every seat but real")  # fmt: skip
    args = parser.parse_args()
    seats = tuple(args.seat or [s for s in SEATS if s != "real"])
    if "real" in seats:
        try:
            server_binary(), model_file()
        except PartMissing as exc:
            print(f"fixexisting: the real seat cannot run: {exc}", file=sys.stderr)
            return 2
    bugs = list(BUGS.items())[: 2 if args.quick else None]
    base = Path(tempfile.mkdtemp(prefix="bullpen-bench-fix-", dir="/tmp"))
    society = Society(base / "home")
    builds = base / "builds"
    builds.mkdir()
    set_build(society.root, root=str(builds), alias=str(base / "sandbox"))
    outcomes: dict[str, list[dict[str, Any]]] = {s: [] for s in seats}
    real: RealSeat | None = None
    started = time.perf_counter()
    try:
        real = start_real(society) if "real" in seats else None
        for buggy, (wrong, right) in bugs:
            model = None
            if set(FAKE_SEATS) & set(seats):
                fake = Proc([sys.executable, str(FAKE), "--func", buggy, "--wrong", wrong,
                             "--right", right, "--guess-path", "inventory.py"],
                            base / f"model-{buggy}.out")  # fmt: skip
                model = fake

                def port_line(m: Proc = fake) -> str | None:
                    return m.output().split("\n", 1)[0].strip() or None

                port = wait_for(port_line, 30, "the model")
                for seat, name in (("shown", "fix"), ("sloppy", "sloppy"), ("unshown", "fix")):
                    set_seat(society.root, seat, f'kind = "openai"\nbase_url = '
                             f'"http://127.0.0.1:{port}/v1"\nmodel = "{name}"\ntimeout_s = 30')  # fmt: skip
            for seat in seats:
                config = build_config(builds, base / "sandbox", seat)
                folder = campaign(builds, buggy, seat)
                outcome = asyncio.run(one(society, config, folder, seat))
                outcomes[seat].append(outcome)
                if not outcome["green"]:
                    print(f"{seat} {buggy}: red: {why_red(outcome)}", flush=True)
            if model is not None:
                model.stop()
        rows = [["seat", "green", "iterations (mean, green ones)", "grind s (mean)"]]
        for seat, found in outcomes.items():
            green = [o for o in found if o["green"]]
            iterations = sum(o["iterations"] for o in green) / len(green) if green else 0.0
            seconds = sum(o["s"] for o in found) / len(found)
            rows.append([seat, f"{len(green)}/{len(found)}", f"{iterations:.1f}", f"{seconds:.1f}"])
        print_table(rows)
        if real is not None:
            cost = real.cost()
            cut = sum(e["tokens_out"] >= REAL_ANSWER_TOKENS for e in real.gw.ledger())
            print(f"real seat: {cost['calls']} calls ({cut} cut off at max_tokens "
                  f"{REAL_ANSWER_TOKENS}), {cost['tokens_in']} tokens in, "
                  f"{cost['tokens_out']} out; wall {time.perf_counter() - started:.0f} s; "
                  f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    finally:
        if real is not None:
            real.stop()
        society.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
