"""Spans sent over OTLP/HTTP with the official OpenTelemetry SDK and exporter.

The SDK is the `bullpen[telemetry]` extra and is imported here only, when
something is to be exported: a hub, an idle lurker or any command that
exports nothing never loads it (tests/test_footprint.py). The spans are
made with the ids tree.py derived, not the SDK's random ones, so the same
run exported twice (live, then by `bullpen trace`) is the same trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.telemetry.tree import SpanRecord
from room.errors import BullpenError

__all__ = ["ExportFailed", "OtlpSender", "export_spans"]

INSTALL = "pip install 'bullpen[telemetry]'"


class ExportFailed(BullpenError):
    code = "export_failed"


class OtlpSender:
    """One OTLP/HTTP exporter, kept: a live process sends every batch through the same one
    (its HTTP session and the SDK loaded once, when the sender is made)."""

    def __init__(self, url: str, service_name: str = "bullpen", timeout_s: float = 10.0) -> None:
        try:
            from opentelemetry import trace as api
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import ReadableSpan
            from opentelemetry.sdk.trace.export import SpanExportResult
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError as exc:
            raise ExportFailed(
                f"the OpenTelemetry SDK is not installed ({exc.name}); install it with {INSTALL}"
            ) from None
        self.url = url
        self._api, self._readable, self._success = api, ReadableSpan, SpanExportResult.SUCCESS
        self._resource = Resource.create({"service.name": service_name})
        self._scope = InstrumentationScope("bullpen")
        self._flags = api.TraceFlags(api.TraceFlags.SAMPLED)
        self._exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)

    def _context(self, trace_id: str, span_id: str) -> Any:
        return self._api.SpanContext(int(trace_id, 16), int(span_id, 16), False, self._flags)

    def send(self, spans: Sequence[SpanRecord]) -> int:
        """Post `spans`; the number sent, or ExportFailed."""
        api = self._api
        made = []
        for span in spans:
            status = (
                api.Status(api.StatusCode.ERROR, span.error)
                if span.error
                else api.Status(api.StatusCode.OK)
            )
            made.append(
                self._readable(
                    span.name,
                    context=self._context(span.trace_id, span.span_id),
                    parent=self._context(span.trace_id, span.parent_id) if span.parent_id else None,
                    resource=self._resource,
                    attributes=dict(span.attributes),
                    kind=api.SpanKind.CLIENT if span.kind == "client" else api.SpanKind.INTERNAL,
                    status=status,
                    start_time=span.start_ns,
                    end_time=span.end_ns,
                    instrumentation_scope=self._scope,
                )
            )
        if self._exporter.export(made) != self._success:
            raise ExportFailed(
                f"the OTLP receiver at {self.url} did not take the spans (is it running, and "
                "an OTLP/HTTP receiver? Phoenix: http://HOST:6006, Jaeger and Collectors: "
                "http://HOST:4318)"
            )
        return len(made)

    def close(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]  # the OTLP exporter has no hints


def export_spans(
    spans: Sequence[SpanRecord], url: str, service_name: str = "bullpen", timeout_s: float = 10.0
) -> int:
    """Post `spans` to the OTLP/HTTP traces URL once; the number sent, or ExportFailed."""
    sender = OtlpSender(url, service_name, timeout_s)
    try:
        return sender.send(spans)
    finally:
        sender.close()
