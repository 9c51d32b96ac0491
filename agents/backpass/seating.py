"""Which seat answers a backpass role in this run, and whether the gateway has room for it.

The `bulk` (one call per trace) and `synthesis` (one per run) roles normally
answer from their `[seats.bulk]` / `[seats.synthesis]` tables (or a nick's own
`seat`). One run may choose otherwise: `bullpen backpass --bulk SEAT
--synthesis SEAT`, or `BULLPEN_BULK_SEAT` / `BULLPEN_SYNTHESIS_SEAT` in the
operator's environment (an option wins). The command checks the names
against the home's seat tables before it posts anything; the choice travels
in the run's ask and is named in the funnel.

Before the synthesis call, a seat that goes through the gateway (`via =
"gateway"`) is asked about first: `GET /v1/budget?model=M` with the nick's
caller token. A 429 means the budget is spent: the synthesis is skipped, the
funnel says why, and the run exits non-zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from agents.seats.registry import build_seats, parse_seat_table
from agents.seats.tables import OpenAISeatConfig
from room.errors import ConfigError, SecretFileError, UsageError
from room.httpverify import verify_tls
from trust.secretfiles import read_secret_text

if TYPE_CHECKING:
    from agents.backpass.config import RunParams, SeatRole
    from agents.home import Home
    from agents.runtime.step import StepContext
    from agents.seats.request import AnswerT, Judgment, JudgmentRequest

__all__ = ["budget_refusal", "choose_seats", "judge"]

ENV = {"bulk": "BULLPEN_BULK_SEAT", "synthesis": "BULLPEN_SYNTHESIS_SEAT"}
BUDGET_TIMEOUT_S = 10.0


def choose_seats(
    home: Home, options: Mapping[str, str | None], env: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """({role: seat}, {role: "seat (from --bulk)"}) for this run; UsageError for an unknown seat."""
    known = build_seats(home.society.seats).names()
    seats: dict[str, str] = {}
    choice: dict[str, str] = {}
    for role, variable in ENV.items():
        option, from_env = options.get(role), env.get(variable, "").strip()
        name, origin = (option, f"--{role}") if option is not None else (from_env, variable)
        if not name:
            if option is not None:
                raise UsageError(f"--{role} is empty; name a seat: {', '.join(known)}")
            continue
        if name not in known:
            raise UsageError(
                f"{origin}: there is no seat named {name!r}; the known seats are "
                f"{', '.join(known)} (add a [seats.{name}] table to society.toml, see "
                "`bullpen docs seats`). Nothing was posted"
            )
        seats[role] = name
        choice[role] = f"{name} ({origin})"
    return seats, choice


async def judge(
    ctx: StepContext,
    params: RunParams,
    role: SeatRole,
    request: JudgmentRequest,
    schema: type[AnswerT],
) -> Judgment[AnswerT]:
    """ctx.judge for `role`, asking the run's chosen seat when it chose one."""
    seat = params.seats.get(role)
    if seat:  # the run's choice; else the judge's own (no keyword: any Judge takes that)
        return await ctx.judge(role, request, schema, seat=seat)
    return await ctx.judge(role, request, schema)


def _seat_name(home: Home, params: RunParams, nick: str, role: SeatRole) -> str:
    chosen = params.seats.get(role)
    nick_config = home.society.nicks.get(nick)
    return str(chosen or getattr(nick_config, "seat", None) or role)


async def budget_refusal(home: Home, params: RunParams, nick: str, role: SeatRole) -> str | None:
    """Why the gateway would refuse `role`'s call now (its 429 message), or None.

    None too when the seat does not go through the gateway, or the gateway
    cannot be asked: then the call itself goes ahead and reports what it meets.
    """
    name = _seat_name(home, params, nick, role)
    raw = home.society.seats.get(name)
    if raw is None or not home.has_gateway:
        return None
    try:
        table = parse_seat_table(name, raw)
    except ConfigError:
        return None
    if not isinstance(table, OpenAISeatConfig) or table.via != "gateway":
        return None
    try:
        token = read_secret_text(home.gateway_token_file(nick), "gateway token file").decode()
    except SecretFileError:
        return None
    try:
        url = home.gateway_url()
        async with httpx.AsyncClient(timeout=BUDGET_TIMEOUT_S, verify=verify_tls(url)) as client:
            answer = await client.get(
                f"{url}/budget",
                params={"model": table.model},
                headers={"authorization": f"Bearer {token.strip()}"},
            )
    except httpx.HTTPError:
        return None
    if answer.status_code != 429:
        return None
    try:
        error = answer.json().get("error") or {}
        message = str(error.get("message") or error) if isinstance(error, dict) else str(error)
    except ValueError:
        message = answer.text[:300]
    return f"the gateway's budget for seat {name} (model {table.model}) is spent: {message}"
