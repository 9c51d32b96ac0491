"""What a step may use besides its message: model judgments, and the room read over the hub.

A lurker makes one of these for its nick and hands its methods to every step
in the StepContext. Reads go through the hub, never the file: a line a step
sees is one the hub has acknowledged, so a step acts on nothing a crash could
take back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from room.client import RoomClient
from room.errors import HubUnavailable
from room.message import Message
from room.openapi import MAX_READ_SENDERS

if TYPE_CHECKING:
    from agents.config import NickConfig
    from agents.home import Home
    from agents.seats.request import AnswerT, Judgment, JudgmentRequest

__all__ = ["StepServices"]


class StepServices:
    """The judge and the room reads of one nick, over its own client of the hub."""

    def __init__(
        self, home: Home, nick: str, config: NickConfig, client: RoomClient, trusted: frozenset[str]
    ) -> None:
        self.home = home
        self.nick = nick
        self.config = config
        self.client = client
        self.trusted = trusted
        self._seats: Any = None

    async def judge(
        self,
        role: str,
        request: JudgmentRequest,
        schema: type[AnswerT],
        *,
        seat: str | None = None,
    ) -> Judgment[AnswerT]:
        """The role's answer from its seat: `seat` (a run's choice), else this nick's own
        `seat`, else the role's table."""
        from agents.seats import build_seats, make_judge
        from agents.seats.tables import GatewayAccess

        if self._seats is None:
            # One registry per process: an openai seat remembers what its server supports.
            gateway = None
            if self.home.has_gateway:  # this nick's way through it: the URL and its token
                gateway = GatewayAccess(
                    self.home.gateway_url(), self.home.gateway_token_file(self.nick)
                )
            self._seats = build_seats(self.home.society.seats, gateway)
        seat = seat or self.config.seat  # the run's choice, else this nick's own seat
        judge = make_judge(self._seats, {role: seat} if seat else None, self.home.screen)
        return await judge(role, request, schema)

    async def read_thread(self, thread: str, through: int = 0) -> list[Message]:
        """A run's whole thread, read over the hub (never from a file).

        `through` is the seq that woke us: a lurker tailing the file can see a
        line a moment before the hub has synced and acknowledged it, so wait
        (briefly) until the hub's answer covers it.
        """
        messages, _ = await self._read_thread_after(thread, 0, through)
        return messages

    async def read_trusted(
        self, thread: str, after: int, through: int = 0
    ) -> tuple[list[Message], int]:
        """The thread's verified lines from trusted nicks after seq `after`, and the seq the
        answer covers up to (pass it as `after` next time). The hub filters: lines nobody
        trusts, however many, are never sent, so the reader's cost follows what can matter."""
        # A trust table longer than /read takes senders is filtered on `verified` alone
        # (Run drops the rest); ordinary tables name a handful of nicks.
        senders = self.trusted if len(self.trusted) <= MAX_READ_SENDERS else None
        return await self._read_thread_after(thread, after, through, senders=senders, verified=True)

    async def _read_thread_after(
        self, thread: str, after: int, through: int, **filters: Any
    ) -> tuple[list[Message], int]:
        messages: list[Message] = []
        wait = 0.0
        while True:
            lines, last = await self.client.read(after, 1000, thread=thread, wait=wait, **filters)
            messages += [Message.model_validate(line) for line in lines]
            after = max(after, last)
            if len(lines) == 1000:
                wait = 0.0  # more to page through
            elif after >= through:
                return messages, after
            elif wait:
                raise HubUnavailable(f"the hub has not acknowledged seq {through} after {wait:g} s")
            else:
                wait = 5.0  # long-poll: the hub answers the moment it commits the line

    async def read_to(self, nick: str, window: int) -> list[Message]:
        """Messages to @nick among the room's last `window` lines, read over the hub."""
        head = int((await self.client.health())["seq"])
        after = max(0, head - window)
        messages: list[Message] = []
        while True:
            lines, last = await self.client.read(after, 1000, to=f"@{nick}")
            messages += [Message.model_validate(line) for line in lines]
            if len(lines) < 1000:
                return messages
            after = last
