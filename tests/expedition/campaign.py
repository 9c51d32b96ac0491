"""An expedition campaign: five themes over one knowledge base, each with a known deep cut.

Each theme has a keyword, a title, the natural phrases a model gives for
it (tests/fakes/phrase_model.py answers them), two rows that name the
keyword, and one deep cut: a row that embodies the theme in its own
inflections ("swims in the cold-water pond", "the bather's rituals") and
never names the keyword or repeats a phrase character for character.
`run_campaign` digs every theme through the real pipeline and steps (the
in-memory room of tests/expedition/sim.py) and counts the themes whose
Dig Report lists the deep cut among its deep cuts.

    python -m tests.expedition.campaign         # the share for the built-in seat and the fake
    python -m tests.expedition.campaign --real  # SmolLM2-135M through a gateway: minutes a theme

With `--real` the three judged roles (termgen, score, scotoma) are one
`openai` seat, `real`, on llama.cpp's llama-server through a home's own
gateway (tests/realmodel/helpers.py: real_seat), so every call is a ledger
line; build the server first: eval "$(bash .ci/build-llama-server)".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.runtime.step import AnswerT, Judgment, JudgmentRequest
from agents.seats import build_seats, make_judge
from agents.seats.tables import GatewayAccess
from room.message import Message
from tests.expedition.sim import Sim, local_judge, write_home
from tests.expedition.texts import document, paragraph

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "phrase_model.py"
JUDGED = ("termgen", "score", "scotoma")  # the roles a model answers in an expedition
CALLER = "expedition"  # the caller token the real seat's calls carry through the gateway


@dataclass(frozen=True)
class Theme:
    keyword: str
    title: str
    phrases: tuple[str, ...]
    deep_file: str
    deep_summary: str
    direct: tuple[str, str]
    redirect: str  # what an operator who knows the corpus would redirect to


THEMES = (
    Theme(
        "endurance",
        "Staying In",
        (
            "swimming in cold water",
            "the rituals of winter bathing",
            "numb hands",
            "icy mornings",
            "shivering afterwards",
            "the shock of the plunge",
            "grit",
            "keeping going when it hurts",
            "stamina",
            "the long haul",
            "staying the course",
            "breathing through it",
        ),
        "cold-water.md",
        "Swims in the cold-water pond before work each winter; the bather's rituals: slow "
        "breaths, hands numbed, shivers on the walk home.",
        (
            "Endurance on the barn roof: a whole season of weekends to rebuild it.",
            "A week of night lambing and what endurance costs the body.",
        ),
        "cold water",
    ),
    Theme(
        "patience",
        "Waiting Well",
        (
            "feeding a starter",
            "letting dough rise",
            "bread that was baked too soon",
            "flat loaves",
            "fermenting slowly",
            "the long proof",
            "sour dough",
            "waiting for the oven",
            "slow rises",
            "leaving it overnight",
            "biding time",
            "holding back",
        ),
        "bread-starter.md",
        "Feeds the sourdough starter twice a day for a fortnight before it rises; loaves baked "
        "too early came out flat and sour.",
        (
            "Patience with a warped door: planing it a shaving at a time over a month.",
            "Why patience matters when glue is setting in a cold shed.",
        ),
        "sourdough starter",
    ),
    Theme(
        "grief",
        "After the Funeral",
        (
            "an empty chair",
            "setting the table for someone gone",
            "keeping their things",
            "the untouched pipe",
            "mourning quietly",
            "missing a voice",
            "a house gone silent",
            "sorting a dead man's clothes",
            "anniversaries",
            "the last conversation",
            "carrying on",
            "tears in the workshop",
        ),
        "empty-chair.md",
        "Kept setting a place at the table for months; the chair by the stove stayed empty "
        "and the pipe rack untouched.",
        (
            "Grief and the tools a father left behind in the shed.",
            "A year of grief told through the allotment he kept.",
        ),
        "the empty chair",
    ),
    Theme(
        "thrift",
        "Nothing Wasted",
        (
            "saving offcuts",
            "using up scraps",
            "mending instead of buying",
            "the scrap bin",
            "making do",
            "second-hand tools",
            "reusing old timber",
            "small pieces put to use",
            "darning socks",
            "frugal habits",
            "stretching a budget",
            "leftover wood",
        ),
        "offcut-box.md",
        "Saves every offcut in a box under the bench; the small pieces became drawer pulls, "
        "wedges and a child's stool.",
        (
            "Thrift at the auction: a box of planes for the price of one.",
            "A thrift shop find: the chest of drawers rebuilt from its own parts.",
        ),
        "offcuts",
    ),
    Theme(
        "courage",
        "Going On Stage",
        (
            "shaking hands",
            "playing in public",
            "stage fright",
            "forgetting the words",
            "stepping up",
            "nerves before a performance",
            "keeping playing after a mistake",
            "a trembling voice",
            "facing a crowd",
            "taking the plunge",
            "speaking up",
            "a first attempt",
        ),
        "first-gig.md",
        "Played fiddle at the pub for the first time, hands shaking; forgot the second tune "
        "and kept playing anyway.",
        (
            "Courage to quit a salaried job and open the workshop.",
            "The courage it took to ask the old joiner for lessons.",
        ),
        "playing the fiddle",
    ),
)

FILLER = (
    "Watering the tomato beds from the rain butt in a dry July.",
    "Sharpening chisels on a new set of water stones.",
    "Building a lean-to for the log store out of pallet wood.",
    "Rewiring the lathe after the motor burned out.",
    "The village hall's new floor and the trouble with the levelling compound.",
    "A list of the hand planes in the workshop and what each is for.",
    "Pruning the old orchard: which branches to take in the first winter.",
    "A wet weekend fixing the gutters on the workshop roof.",
)


def write_kb(kb: Path) -> Path:
    """The campaign's knowledge base under `kb`: its index and every file."""
    rows: list[tuple[str, str]] = []
    for n, theme in enumerate(THEMES):
        rows.append((theme.deep_file, theme.deep_summary))
        rows += [(f"{theme.keyword}-{i}.md", summary) for i, summary in enumerate(theme.direct)]
        rows.append((f"filler-{n}.md", FILLER[n]))
    rows += [(f"filler-{n}.md", text) for n, text in enumerate(FILLER) if n >= len(THEMES)]
    lines = [
        "| file | summary | keypoints | tags | category | monomyth |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {file} | {summary} | - | t | Workshop | 01 - Ordinary World |" for file, summary in rows
    ]
    kb.mkdir(parents=True, exist_ok=True)
    (kb / "corpus_index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    body = "\n\n".join(paragraph(90) for _ in range(3))
    for file, summary in rows:
        text = document(body, summary=summary.replace('"', "'"))
        (kb / file).write_text(text, encoding="utf-8")
    return kb


def write_phrases(path: Path) -> Path:
    """The fake model's phrase table (FAKE_PHRASES_FILE)."""
    path.write_text(json.dumps({t.keyword: list(t.phrases) for t in THEMES}), encoding="utf-8")
    return path


def program_judge(phrases: Path) -> Any:
    """A judge that asks the fake model program, a real process per judgment, with the prompt."""

    async def judge(
        role: str, request: JudgmentRequest, schema: type[AnswerT]
    ) -> Judgment[AnswerT]:
        done = subprocess.run(
            [sys.executable, str(FAKE)],
            input=request.prompt,
            capture_output=True,
            text=True,
            timeout=60,
            env={"FAKE_PHRASES_FILE": str(phrases), "PATH": "/usr/bin:/bin"},
            check=True,
        )
        answer = schema.model_validate(json.loads(done.stdout))
        return Judgment(answer=answer, seat="phrase-model", kind="cmd", role=role)

    return judge


def dig_sim(
    home_root: Path,
    kb: Path,
    theme: Theme,
    judge: Any,
    redirect: bool = False,
    settings: dict[str, Any] | None = None,
) -> tuple[Sim, Message]:
    """One theme dug through the pipeline: the Sim (every line and request) and its last report;
    `settings` are [expedition] keys set over the home's defaults."""
    home = write_home(home_root, kb)
    if settings:
        path = home_root / "society.toml"
        keys = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
        path.write_text(path.read_text().replace("[expedition]\n", "[expedition]\n" + keys, 1))
    sim = Sim(home, judge=judge)
    sim.start(title=theme.title, keyword=theme.keyword)
    (report,) = sim.settle()
    if redirect and (report.data or {}).get("key") == "dig-report":
        sim.reply_to_report(report, f"redirect {theme.redirect}")
        (report,) = sim.settle()
    return sim, report


def dig(
    home_root: Path, kb: Path, theme: Theme, judge: Any, redirect: bool = False
) -> tuple[list[str], str]:
    """(the files one theme's last Dig Report lists as deep cuts, its first line or failure);
    with `redirect`, the first report is answered with the theme's redirect and the second read."""
    _, report = dig_sim(home_root, kb, theme, judge, redirect)
    return report_cuts(report)


def report_cuts(report: Message) -> tuple[list[str], str]:
    """(the deep cuts a report lists, 'dig report'), or ([], its first line) when the run ended
    before a Dig Report: its `[STEP_n FAILED — reason]`."""
    data = report.data or {}
    if not str(data.get("key")).startswith("dig-report"):  # ended before a report
        return [], report.body.splitlines()[0]
    return [str(cut["file"]) for cut in data["deep_cuts"]], "dig report"


def seat_judge(home_root: Path, seat: str, caller: str = CALLER) -> Any:
    """A judge that sends every judged role to `seat`, a table of the home at `home_root`
    (through its gateway with `caller`'s token when it has one): the judge a lurker holds."""
    from agents.home import Home

    home = Home(home_root)
    access = None
    if home.has_gateway:
        access = GatewayAccess(home.gateway_url(), home.gateway_token_file(caller))
    registry = build_seats(home.society.seats, access)  # one registry: a seat remembers
    return make_judge(registry, dict.fromkeys(JUDGED, seat), home.screen)


SEATS = ("local", "local+redirect", "phrases")


def run_campaign(
    root: Path, seat: str, judge: Any = None, themes: tuple[Theme, ...] = THEMES
) -> dict[str, tuple[bool, str]]:
    """keyword -> (whether its deep cut was found, how the run ended), with `seat`: 'local'
    (the built-in seat), 'local+redirect' (the same, redirected once to the theme's image),
    'phrases' (the natural-phrase fake model), or any other name with its `judge` (seat_judge)."""
    kb = write_kb(root / "kb")
    if judge is None:
        phrases = seat == "phrases"
        judge = program_judge(write_phrases(root / "phrases.json")) if phrases else local_judge
    found = {}
    for theme in themes:
        home = root / f"home-{seat}-{theme.keyword}"
        cuts, outcome = dig(home, kb, theme, judge, redirect=seat == "local+redirect")
        found[theme.keyword] = (theme.deep_file in cuts, outcome)
    return found


def print_share(seat: str, found: dict[str, tuple[bool, str]]) -> None:
    hits = sum(ok for ok, _ in found.values())
    print(f"{seat}: {hits}/{len(found)} deep cuts found", flush=True)
    for keyword, (ok, outcome) in found.items():
        print(f"  {keyword}: {'found' if ok else 'missed'} ({outcome})", flush=True)


def run_real(tmp: Path) -> int:
    """The campaign with the real seat: llama-server and a gateway, started and stopped here."""
    import time

    from tests.gateway.helpers import GatewayHome
    from tests.realmodel.helpers import real_seat
    from tests.realmodel.server import PartMissing, model_file, server_binary
    from tests.support import Society

    try:
        server_binary(), model_file()
    except PartMissing as exc:
        print(f"campaign: the real seat cannot run: {exc}", file=sys.stderr)
        return 2
    society = Society(tmp / "gateway-home")
    real = real_seat(GatewayHome(society), "real", (CALLER,))
    started = time.perf_counter()
    try:
        found = run_campaign(tmp / "real", "real", seat_judge(society.root, "real"))
        print_share("real", found)
        cost = real.cost()
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"real seat: {cost['calls']} calls, {cost['tokens_in']} tokens in, "
              f"{cost['tokens_out']} out; wall {time.perf_counter() - started:.0f} s; load {load}")  # fmt: skip
    finally:
        real.stop()
        society.stop_all()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", action="store_true", help="SmolLM2 through a gateway alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.real:
            return run_real(Path(tmp))
        for seat in SEATS:
            print_share(seat, run_campaign(Path(tmp) / seat, seat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
