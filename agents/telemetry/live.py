"""Live export: spans handed over as they happen, sent in batches on a thread of their own.

A process with `[telemetry]` configured (today: the gateway, a span per
model call as its ledger line is written) submits each span here; the
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

import structlog

from agents.telemetry.tree import SpanRecord

__all__ = ["LiveExporter"]

log = structlog.get_logger("agents.telemetry")

BATCH = 256
FLUSH_S = 1.0
QUEUE = 10_000


class LiveExporter:
    def __init__(self, url: str, service_name: str = "bullpen") -> None:
        self.url, self.service_name = url, service_name
        self._queue: queue.Queue[SpanRecord | None] = queue.Queue(QUEUE)
        self.dropped = 0
        self.sent = 0
        self._warned = 0.0
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def submit(self, span: SpanRecord) -> None:
        """Queue a span for export; never blocks (a full queue drops it, counted)."""
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
        from agents.telemetry.export import ExportFailed, export_spans  # the SDK, here only

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
                self.sent += export_spans(batch, self.url, self.service_name)
            except ExportFailed as exc:
                self.dropped += len(batch)
                if time.monotonic() - self._warned > 60:
                    self._warned = time.monotonic()
                    log.warning("telemetry.export_failed", error=exc.message, spans=len(batch))
