"""`replay --offline`: every model call answered from the gateway's recording, none sent on.

A small HTTP server in this process speaks the chat-completions wire format
and answers each request with what the gateway recorded for the same
request digest from the step's own nick in the recorded run
(agents/gateway/recording.py): another caller's answer to the same request,
or one from another run, is never served. The step's openai seats are
pointed at it: `via = "gateway"` seats through a throwaway token, seats
with a `base_url` by that URL replaced. A request with no recording is
answered 404 naming the step, and the replay then fails loud (exit 1)
saying so, rather than show an answer the recording did not hold.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agents.gateway.recording import Recording, recording_path, request_digest
from agents.seats import build_seats, make_judge
from agents.seats.registry import OpenAISeatConfig, parse_seat_table
from agents.seats.tables import GatewayAccess
from room.errors import BullpenError, UsageError

if TYPE_CHECKING:
    from agents.home import Home
    from agents.replay.recorded import Step
    from agents.seats.request import Judge


class NoRecording(BullpenError):
    """A replayed step asked a model something the recording does not hold."""


class RecordingServer:
    """The recording, served on 127.0.0.1 at an ephemeral port, in a thread of this process."""

    def __init__(self, recording: Recording, step: str, caller: str, run: str) -> None:
        self.recording = recording
        self.step = step
        self.caller = caller  # the nick that answered the step: its seats called the gateway
        self.run = run  # the recorded run's thread, as its seats named it (x-bullpen-run)
        self.answered = 0
        self.misses: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = None
                answer = None
                if isinstance(body, dict) and self.path.endswith("/chat/completions"):
                    digest = request_digest(body)
                    answer = server.recording.answer(server.caller, server.run, digest)
                    if answer is None:
                        server.misses.append(digest)
                if answer is None:
                    message = (
                        f"no recorded answer for this request (offline replay of {server.step})"
                    )
                    self._send(404, {"error": {"message": message}})
                    return
                server.answered += 1
                self._send(200, answer)

            def _send(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # the replay's output is its report, not an access log

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def _token_file(folder: Path) -> Path:
    """A throwaway caller token (the recording server checks none; the seat needs one)."""
    path = folder / "offline.token"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    return path


def offline_tables(home: Home, url: str) -> dict[str, Any]:
    """The home's seat tables, every openai seat with a base_url sent to the recording."""
    tables: dict[str, Any] = {}
    for name, raw in home.society.seats.items():
        table = parse_seat_table(name, raw)
        if isinstance(table, OpenAISeatConfig) and table.base_url is not None:
            table = table.model_copy(update={"base_url": url, "api_key_env": None})
        tables[name] = table
    return tables


class OfflineJudge:
    """A judge over the recording; `check()` after the step raises NoRecording on a miss."""

    def __init__(self, home: Home, step: Step, seat: str | None) -> None:
        path = recording_path(home)
        if not path.is_file():
            raise UsageError(
                f"there is no gateway recording at {path}: set `record = true` in [gateway] of "
                "society.toml, run the steps through the gateway once, then replay offline"
            )
        self.step = step
        self.server = RecordingServer(Recording(path), step.key, step.nick, step.ask.thread or "")
        self._folder = tempfile.TemporaryDirectory(prefix="bullpen-offline-")
        access = GatewayAccess(self.server.url, _token_file(Path(self._folder.name)))
        self.registry = build_seats(offline_tables(home, self.server.url), access)
        self.screen = home.screen
        config = home.society.nicks.get(step.nick)
        self.chosen = seat or (config.seat if config else None)

    async def __call__(self, role: str, request: Any, schema: Any) -> Any:
        roles = {role: self.chosen} if self.chosen else None
        return await make_judge(self.registry, roles, self.screen)(role, request, schema)

    def check(self) -> None:
        misses = len(self.server.misses)
        self.close()
        if misses:
            raise NoRecording(
                f"offline replay of step {self.step.key} (@{self.step.nick}): {misses} model "
                "request(s) had no recorded answer, so the replayed answer is not the "
                "recording's; record this step through the gateway ([gateway] record = true) "
                "and replay again"
            )

    def close(self) -> None:
        self.server.close()
        self._folder.cleanup()


def offline_judge(home: Home, step: Step, seat: str | None) -> Judge:
    return cast("Judge", OfflineJudge(home, step, seat))
