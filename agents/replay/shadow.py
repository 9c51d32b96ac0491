"""The home a file-writing step sees in its replay: the same society, pointed at the private copy.

Its root is the copy's mirror of the home, so every relative path (a run
folder, `briefs`, `memory/public`) lands in the copy; the pipeline sections
and `[roots]` have their absolute paths mapped the same way; the seats, the
trust table and the secret screen are the original home's (the step is
judged and screened exactly as in its run). It cannot post: a step that
posts while it works (the grinder's iteration notes) hands its posts to a
sink the replay reports, and any other use of the room is refused. Fences
hide both homes from model-written code (`homes()`).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agents.config import RootsConfig
from agents.home import Home
from room.errors import UsageError

if TYPE_CHECKING:
    from agents.replay.copy import PrivateCopy


class PostSink:
    """Stands where a step's room client would: keeps what the step would post, posts nothing."""

    def __init__(self, nick: str | None, posts: list[dict[str, Any]]) -> None:
        self.nick = nick
        self.posts = posts

    async def __aenter__(self) -> PostSink:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def say(self, to: str, body: str, **fields: Any) -> dict[str, Any]:
        self.posts.append({"from": self.nick, "to": to, "body": body, **fields})
        return {"seq": 0, "id": None}

    def __getattr__(self, name: str) -> Any:
        raise UsageError(
            f"a replayed step used the room ({name}); a replay reads the run from its record "
            "and posts nothing, so this step cannot be replayed"
        )


class ShadowHome(Home):
    """A Home whose files are the private copy's, and whose posts go nowhere."""

    stores_objects = False  # a replayed step hands nothing on (agents/objects)

    def __init__(self, original: Home, copy: PrivateCopy) -> None:
        super().__init__(copy.into(original.root.resolve()))
        self.original = original
        self.posts: list[dict[str, Any]] = []
        society = original.society
        mapped = {
            name: copy.map_in(getattr(society, name), resolve=False)
            for name in ("expedition", "backpass", "build")
        }
        roots = copy.map_in(society.roots.model_dump(exclude_none=True), resolve=False)
        mapped["roots"] = RootsConfig.model_validate(roots)
        # cached_property slots, filled here: the original's seats, trust and screen
        self.__dict__["society"] = society.model_copy(update=mapped)
        self.__dict__["trust"] = original.trust
        self.__dict__["screen"] = original.screen

    @property
    def trust_file(self) -> Path:
        return self.original.trust_file

    def gateway_token_dir(self) -> Path:
        """The nicks' gateway tokens are the original home's: a step asks as in its run."""
        return self.original.gateway_token_dir()

    def homes(self) -> tuple[Path, ...]:
        return (*super().homes(), *self.original.homes())

    def client(  # type: ignore[override]
        self, nick: str | None = None, *, relaxed: bool = False, timeout: float = 10.0
    ) -> PostSink:
        return PostSink(nick, self.posts)
