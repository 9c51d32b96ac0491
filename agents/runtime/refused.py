"""A post the hub refuses (401/403): kept, retried, and after a bound reported.

A refusal says the nick's proof is wrong for the hub's table as it is now,
most often in the middle of promoting or demoting the nick. Nothing was
written, so the lurker may post again: it reads trust.toml and its key or
secret again, and retries with backoff. The message it was answering stays
pending, so its cursor never passes it, and a restart answers it again.

After `[lurker] refused_retries` tries the lurker tells the operator, in the
room, with the operator's proof (its own is what fails): a `system` post to
@operator, verified, whose data names the nick, the message and the hub's
reason. Only a process of this home holding the operator's proof can write
it. It carries none of the ask's or the answer's text, which may come from
anyone, so that text never becomes verified words. It also writes
`refused.json` in its state folder, which `bullpen trust check` shows, before
it posts the report, then adds the report's seq; when the report cannot be
posted, the file and the lurker's log say why.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.config import LurkerDefaults
from agents.home import Home
from agents.runtime.outcome import OutPost
from room import logs
from room.client import RoomClient
from room.errors import BullpenError, PostRejected, SecretFileError, Unauthorized
from room.message import Message

STATE_FILE = "refused.json"


def is_refusal(exc: PostRejected) -> bool:
    """The hub refused who we are (our proof), not what we said: 401 or 403."""
    return isinstance(exc, Unauthorized) or exc.status == 403


@dataclass
class Refusal:
    """One post the hub keeps refusing: how often, since when, and the backoff."""

    settings: LurkerDefaults
    attempts: int = 0
    since: float = field(default_factory=time.time)
    reported: bool = False
    _delay: float = 0.0

    def refused(self) -> float:
        """Count one refusal; the seconds to wait before the next try (none after the first)."""
        self.attempts += 1
        if self.attempts == 1:
            return 0.0  # the proof was just read again: a promotion is over at once
        self._delay = min(
            self.settings.refused_backoff_max_s,
            self._delay * 2 if self._delay else self.settings.refused_backoff_s,
        )
        return self._delay

    def report_due(self) -> bool:
        return not self.reported and self.attempts >= self.settings.refused_retries


def report_body(nick: str, answering: str | None, attempts: int, reason: str) -> str:
    what = f"its answer to {answering}" if answering else "a post"
    return (
        f"[{nick} REFUSED — the hub refused {what} {attempts} times: {reason}. Nothing is "
        f"dropped: {nick} keeps the message before its cursor and retries, so it is answered "
        f"once {nick} can prove itself (`bullpen docs operating`, 'Promoting a nick to privileged')]"
    )


def report_data(nick: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {"refused": {"nick": nick, **{k: v for k, v in entry.items() if k != "report"}}}


def lurker_client(home: Home, nick: str, relaxed: bool, log: Any) -> RoomClient:
    """The lurker's client. A privileged nick whose key or secret is not here yet still
    starts: its posts are refused and reported, and its asks kept, until the proof is.
    A proof file that is there but unsafe (short, loose, a link) stops it (exit 78)."""
    try:
        return home.client(nick, relaxed=relaxed)
    except SecretFileError as exc:
        where = exc.details.get("path")
        if relaxed or not home.trust.is_privileged(nick) or where is None:
            raise
        if os.path.lexists(str(where)):
            raise
        log.error(
            "cannot prove itself yet: its posts are refused until it can (asks are kept)",
            error=exc.message,
        )
    client = home.client(None)
    client.nick = nick
    return client


class RefusedFile:
    """`refused.json` in a lurker's state folder: the posts it is stuck on, by message id."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError:
            return {"?": {"reason": f"{self.path} is damaged; delete it", "attempts": 0}}
        stuck = raw.get("stuck") if isinstance(raw, dict) else None
        return {str(k): v for k, v in stuck.items()} if isinstance(stuck, dict) else {}

    def put(self, key: str, entry: dict[str, Any]) -> None:
        stuck = self.load()
        stuck[key] = entry
        self._write(stuck)

    def drop(self, key: str) -> None:
        stuck = self.load()
        if stuck.pop(key, None) is not None:
            self._write(stuck)

    def _write(self, stuck: dict[str, dict[str, Any]]) -> None:
        if not stuck:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"stuck": stuck}, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


class Refusals:
    """One lurker's refused posts: taking up a new proof, reporting, clearing the record."""

    def __init__(
        self, home: Home, nick: str, relaxed: bool, client: RoomClient, log: Any, state: Path
    ) -> None:
        self.home, self.nick, self.relaxed = home, nick, relaxed
        self.client, self.log = client, log
        self.file = RefusedFile(state / STATE_FILE)
        self._stuck = set(self.file.load())  # from an earlier run too: a success clears it

    @staticmethod
    def key(post: OutPost, cause: Message | None) -> str:
        return cause.id if cause is not None else f"{post.type} to {post.to}"

    def cleared(self, post: OutPost, cause: Message | None) -> None:
        """The post went in: forget that it was refused."""
        key = self.key(post, cause)
        if key in self._stuck:
            self._stuck.discard(key)
            self.file.drop(key)
            self.log.info("a refused post went in at last", answering=key)

    def reprove(self) -> str | None:
        """Read trust.toml and the nick's key, secret or token again; why not, if that fails."""
        try:
            fresh = Home(self.home.root)
            if self.relaxed:
                self.client.use_proof(None, fresh.relaxed_token())
            else:
                self.client.use_proof(fresh.signer_for(self.nick))
        except BullpenError as exc:
            return exc.message
        return None

    async def refused(
        self, exc: PostRejected, refusal: Refusal, post: OutPost, cause: Message | None
    ) -> float:
        """Count a refusal, take up the proof trust.toml names now, report once past the
        bound; the seconds to wait before trying again."""
        wait = refusal.refused()
        why = self.reprove()
        reason = exc.message
        if why is not None:
            reason += f" (and {self.nick} cannot prove itself here: {why})"
        reason = str(logs.scrub(reason))
        self.log.warning(
            "the hub refused our post; read trust.toml and our proof again",
            error=reason,
            attempt=refusal.attempts,
            retry_in_s=wait,
            answering=cause.id if cause else None,
        )
        if refusal.report_due():
            refusal.reported = True
            await self.report(refusal, post, cause, reason)
        return wait

    async def report(
        self, refusal: Refusal, post: OutPost, cause: Message | None, reason: str
    ) -> None:
        """Keep the record for trust check, tell the operator with the operator's proof, then
        add the report's seq to the record.

        The record comes first: `bullpen trust check` shows the refusal while the report is
        being posted (it says "not yet" until the seq is there), and a lurker stopped or
        killed in between leaves the record, not a report that nothing on disk mentions."""
        answering = cause.id if cause else None
        key = self.key(post, cause)
        entry: dict[str, Any] = {
            "answering": answering,
            "seq": cause.seq if cause else None,
            "thread": post.thread,
            "attempts": refusal.attempts,
            "since": refusal.since,
            "reason": reason,
        }
        self._stuck.add(key)
        self.file.put(key, entry)
        try:
            fresh = Home(self.home.root)
            operator = fresh.society.operator
            async with fresh.client(operator) as client:
                stored = await client.say(
                    f"@{operator}",
                    report_body(self.nick, answering, refusal.attempts, reason),
                    type="system",
                    thread=post.thread,
                    data=report_data(self.nick, entry),
                )
            entry["report"] = {"seq": stored["seq"], "verified": bool(stored.get("verified"))}
            self.log.error(
                "the hub keeps refusing our post; told the operator",
                error=reason,
                report_seq=stored["seq"],
                attempts=refusal.attempts,
            )
        except BullpenError as exc:
            entry["report"] = {"not_posted": exc.message}
            self.log.error(
                "the hub keeps refusing our post, and the report to the operator could not "
                "be posted either; see `bullpen trust check`",
                error=reason,
                report_error=exc.message,
                attempts=refusal.attempts,
            )
        self.file.put(key, entry)


def problems(state_dirs: list[Path]) -> list[str]:
    """What `bullpen trust check` says about a nick's refused posts, from its state folders."""
    found = []
    for folder in state_dirs:
        for key, entry in RefusedFile(folder / STATE_FILE).load().items():
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(entry.get("since", 0)))
            answering = entry.get("answering")
            what = f"its answer to {answering}" if answering else f"a post ({key})"
            report = entry.get("report") or {}
            if "seq" in report and report.get("verified"):
                where = f"reported to the operator in the room at seq {report['seq']} (verified)"
            elif "seq" in report:
                where = (
                    f"reported in the room at seq {report['seq']} but NOT verified: the "
                    "operator is not privileged"
                )
            else:
                where = f"NOT reported in the room: {report.get('not_posted', 'not yet')}"
            found.append(
                f"the hub refuses {what} ({entry.get('attempts')} tries since {since}): "
                f"{entry.get('reason')}; {where}. The message is kept and answered once the "
                f"nick can prove itself (`bullpen trust promote` or fix its key or secret); "
                f"{folder / STATE_FILE} clears itself then"
            )
    return found
