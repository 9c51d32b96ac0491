"""`bullpen trust promote NICK` and `demote NICK`: the seed's order, carried out and checked.

Promote, each step checked before the next:
  1. proof  the nick can prove itself from this home: the shared secret, or with
            `--key` its own key (made as `bullpen keys new` makes it when missing),
            loaded here just as its lurker loads it;
  2. table  `NICK = "secret" | "ed25519:..."` under [privileged] in trust.toml,
            loaded before it replaces the file;
  3. hub    restarted by whoever runs it, or sent SIGHUP when started by hand
            (agents/cli/hubrestart.py), and waited on;
  4. live   a ping ask from the operator: the reply must go to @operator, verified.
The nick's lurker is not restarted: the hub's first refusal of its post makes
it read trust.toml and its proof again (agents/runtime/refused.py), so the
ask is answered, not lost. Demote is steps 2 to 4, and its live check wants
the reply no longer verified.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import sys

from agents.cli import trustcheck as check
from agents.cli.trustcheck import Row, live_check
from agents.home import Home
from room.errors import UsageError
from room.message import check_nick

STEPS = 4


def _step(verb: str, nick: str, n: int, text: str) -> None:
    print(f"{verb} {nick}: {n}/{STEPS} {text}", file=sys.stderr, flush=True)


def _proof(home: Home, nick: str, use_key: bool) -> str:
    """Step 1: what goes under [privileged] for `nick`, once its proof loads here."""
    if not use_key:
        home.secret()  # a missing or loose secret file stops here, saying how to fix it
        return "secret"
    from trust import keys  # cryptography: loaded only when a key is asked for

    path = home.trust.key_file(nick)
    key = keys.load_private_key(path) if path.exists() else keys.generate_private_key(path)
    return keys.public_text(key)


async def _live(home: Home, nick: str, promoted: bool, timeout: float) -> bool:
    """Step 4: ping `nick`; True when its reply is as it must be now."""
    verb = "promote" if promoted else "demote"
    if nick not in home.society.nicks:
        _step(verb, nick, 4, f"live check skipped: {nick} has no [nicks.{nick}] lurker to ask")
        return True
    row = Row(nick, privileged=promoted, trusted=home.trust.is_trusted(nick), reply_waking=False)
    cause = await live_check(home, [row], timeout)
    wanted = "pong ✓" if promoted else "unverified"
    operator = home.society.operator
    if row.live == wanted:
        verified = "true" if promoted else "false"
        _step(verb, nick, 4, f"live check: its reply went to @{operator}, verified = {verified}")
        return True
    why = cause or "; ".join(row.problems) or row.live
    _step(verb, nick, 4, f"live check FAILED ({row.live}): {why}")
    return False


async def _promote(args: argparse.Namespace, nick: str, promote: bool) -> int:
    from agents.cli.hubrestart import restart_hub  # not paid for by `bullpen trust check`
    from trust.tableedit import replace_table, with_privileged, without_privileged

    verb = "promote" if promote else "demote"
    home = Home.at(args.home)
    trust = home.trust
    operator = home.society.operator
    current = trust.proof_of(nick)
    had = None if current is None else (current.public_text or current.method)
    if promote:
        how: str | None = _proof(home, nick, args.key)
        kind = "its own key" if args.key else "the shared secret"
        _step(verb, nick, 1, f"proof: {nick} proves itself with {kind}, loaded from this home")
    else:
        if nick == operator:
            raise UsageError(
                f"{nick} is the operator: demoted, none of its asks would be verified and no "
                "lurker would act on them. Choose another operator in society.toml first"
            )
        how = None
        _step(verb, nick, 1, "proof: nothing to do (its key, if any, stays where it is)")
    if had == how:
        _step(verb, nick, 2, f"table: already {'privileged' if how else 'not privileged'}")
        _step(verb, nick, 3, "hub: not restarted, nothing changed")
    else:
        text = trust.path.read_text(encoding="utf-8")
        text = without_privileged(text, nick)
        if how is not None:
            text = with_privileged(text, nick, how)
        replace_table(trust.path, text, nick, how)
        line = f'{nick} = "{how}"' if how else f"{nick} removed"
        _step(verb, nick, 2, f"table: {line} under [privileged] in {trust.path}")
        _step(verb, nick, 3, "hub: restarting it so it reads the table")
        _step(verb, nick, 3, f"hub: {await restart_hub(home, args.timeout * 4)}")
    fresh = Home(home.root)
    if promote and not fresh.trust.is_trusted(nick):
        print(
            f'note: {nick} is not in trusted: lurkers still ignore its posts. Add "{nick}" to '
            f"trusted in {trust.path} and restart the lurkers that should act on it",
            file=sys.stderr,
        )
    ok = await _live(fresh, nick, promote, args.timeout)
    print(f"{verb} {nick}: {'done' if ok else 'FAILED'}", file=sys.stderr)
    return 0 if ok else 1


def _known_nick(home: Home, nick: str) -> None:
    """A nick the society has: a lurker's, the operator, or one trust.toml already names.

    A typo promoted would be a privileged nick nobody runs, and a hub restart for nothing."""
    trust = home.trust
    known = {*home.society.nicks, home.society.operator, *trust.trusted, *trust.privileged}
    if nick in known:
        return
    near = difflib.get_close_matches(nick, sorted(known), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise UsageError(
        f"{nick} is not a nick of this society: no [nicks.{nick}] in {home.society_file}, not "
        f"the operator, and not in {trust.path}. {hint}To add an agent, give it a [nicks.{nick}] "
        f"table (or list it under trusted in {trust.path}) first"
    )


def cmd_trust(args: argparse.Namespace) -> int:
    """`bullpen trust check`, or `promote|demote NICK`."""
    if args.action == "check":
        return check.cmd_trust(args)
    if args.action == "verifier-key":
        from agents.cli.verify import cmd_verifier_key

        return cmd_verifier_key(args)
    if not args.nick:
        raise UsageError(
            f"bullpen trust {args.action} needs the nick: bullpen trust {args.action} NICK"
        )
    try:
        check_nick(args.nick, "NICK")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    home = Home.at(args.home)
    home.require()
    _known_nick(home, args.nick)
    return asyncio.run(_promote(args, args.nick, args.action == "promote"))
