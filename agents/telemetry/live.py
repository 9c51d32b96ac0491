"""Live export: spans handed over as they happen, sent in batches on a thread of their own.

A process with `[telemetry]` configured (the gateway: a span per model call
as its ledger line is written; the foreman: a span per step as it is
answered, and the run's at its end; a lurker: a span per ask it handles;
the grinder: a span per iteration and per fenced test run) submits each span here; the
submitting side only puts it on a queue, so a slow or absent receiver never
slows a call. A batch goes out every FLUSH_S or BATCH spans; a receiver
that refuses is logged (once a minute at most) and the spans dropped,
never retried forever. The ids are the derived ones (room/traceids.py), so what is
sent live and what `bullpen trace --otlp` sends later are the same spans.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:  # nothing but the stdlib and structlog loaded here: a lurker imports it
    from agents.home import Home
    from agents.telemetry.tree import SpanRecord
    from room.message import Message

__all__ = ["LiveExporter", "closed", "for_home", "install", "installed", "submit", "woke"]

log = structlog.get_logger("agents.telemetry")

BATCH = 256
FLUSH_S = 1.0
QUEUE = 10_000


class LiveExporter:
    def __init__(self, url: str, service_name: str = "bullpen", process: str = "") -> None:
        self.url, self.service_name, self.process = url, service_name, process
        self._queue: queue.Queue[SpanRecord | None] = queue.Queue(QUEUE)
        self.dropped = 0
        self.sent = 0
        self._warned = 0.0
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def submit(self, span: SpanRecord) -> None:
        """Queue a span for export; never blocks (a full queue drops it, counted). The span
        names the process that made it (`bullpen.process`: gateway, foreman, lurker NICK)."""
        if self.process:
            span.attributes.setdefault("bullpen.process", self.process)
        try:
            self._queue.put_nowait(span)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued, then stop the thread."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        from agents.telemetry.export import ExportFailed, OtlpSender  # the SDK, here only

        try:  # loaded now, as the process starts, not under its first spans
            sender = OtlpSender(self.url, self.service_name)
        except ExportFailed as exc:
            log.warning("telemetry.off", error=exc.message)
            self._drain()
            return
        try:
            self._send(sender)
        finally:
            sender.close()

    def _drain(self) -> None:
        """With no SDK nothing can be sent: count what is queued as dropped, until told to stop."""
        while self._queue.get() is not None:
            self.dropped += 1

    def _send(self, sender: Any) -> None:
        from agents.telemetry.export import ExportFailed

        stopping = False
        while not stopping:
            batch: list[SpanRecord] = []
            deadline = time.monotonic() + FLUSH_S
            while len(batch) < BATCH:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            if not batch:
                continue
            try:
                self.sent += sender.send(batch)
            except ExportFailed as exc:
                self.dropped += len(batch)
                if time.monotonic() - self._warned > 60:
                    self._warned = time.monotonic()
                    log.warning("telemetry.export_failed", error=exc.message, spans=len(batch))


def for_home(home: Home, process: str) -> LiveExporter | None:
    """A LiveExporter when [telemetry] (or OTEL_EXPORTER_OTLP_*) names a receiver, else None:
    with telemetry off nothing of OpenTelemetry is loaded (the SDK is imported only on the
    exporter's own thread, when it first sends)."""
    from agents.telemetry.config import TelemetryConfig

    config = TelemetryConfig.of(home)
    url = config.endpoint()
    if url is None:
        return None
    log.info("telemetry.live", otlp=url, process=process)
    return LiveExporter(url, config.service_name, process)


_PROCESS: list[LiveExporter] = []  # this process's exporter, once installed (a lurker's)


def install(home: Home, process: str) -> LiveExporter | None:
    """Make this process's exporter (None with telemetry off): what `submit` sends through,
    so a step (the grinder) exports without being handed one."""
    exporter = for_home(home, process)
    _PROCESS[:] = [exporter] if exporter is not None else []
    return exporter


def installed() -> LiveExporter | None:
    return _PROCESS[0] if _PROCESS else None


def submit(span: SpanRecord) -> None:
    """Export `span` through this process's exporter; nothing when telemetry is off."""
    if _PROCESS:
        _PROCESS[0].submit(span)


def woke(
    exporter: LiveExporter | None, message: Message, nick: str, started_ns: int, outcome: object
) -> None:
    """A lurker's span for one wake, when it exports and the ask carries a trace
    (agents/telemetry/process.py); nothing, and nothing imported, otherwise."""
    if exporter is None:
        return
    from agents.runtime.outcome import Failure
    from agents.telemetry.process import handled_span

    error = outcome.reason if isinstance(outcome, Failure) else None
    span = handled_span(message, nick, started_ns, type(outcome).__name__.lower(), error)
    if span is not None:
        exporter.submit(span)


async def closed(exporter: LiveExporter | None) -> None:
    """Send what `exporter` holds and stop it, off the event loop (None: nothing to do)."""
    if exporter is not None:
        import asyncio

        await asyncio.to_thread(exporter.close)
