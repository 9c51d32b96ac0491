"""Spans sent over OTLP/HTTP with the official OpenTelemetry SDK and exporter.

The SDK is the `bullpen[telemetry]` extra and is imported here only, when
something is to be exported: a hub, an idle lurker or any command that
exports nothing never loads it (tests/test_footprint.py). The spans are
made with the ids tree.py derived, not the SDK's random ones, so the same
run exported twice (live, then by `bullpen trace`) is the same trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.telemetry.tree import SpanRecord
from room.errors import BullpenError

__all__ = ["ExportFailed", "export_spans"]

INSTALL = "pip install 'bullpen[telemetry]'"


class ExportFailed(BullpenError):
    code = "export_failed"


def export_spans(
    spans: Sequence[SpanRecord], url: str, service_name: str = "bullpen", timeout_s: float = 10.0
) -> int:
    """Post `spans` to the OTLP/HTTP traces URL; the number sent, or ExportFailed."""
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
    resource = Resource.create({"service.name": service_name})
    scope = InstrumentationScope("bullpen")
    flags = api.TraceFlags(api.TraceFlags.SAMPLED)

    def context(trace_id: str, span_id: str) -> api.SpanContext:
        return api.SpanContext(int(trace_id, 16), int(span_id, 16), False, flags)

    made = []
    for span in spans:
        status = (
            api.Status(api.StatusCode.ERROR, span.error)
            if span.error
            else api.Status(api.StatusCode.OK)
        )
        made.append(
            ReadableSpan(
                span.name,
                context=context(span.trace_id, span.span_id),
                parent=context(span.trace_id, span.parent_id) if span.parent_id else None,
                resource=resource,
                attributes=dict(span.attributes),
                kind=api.SpanKind.CLIENT if span.kind == "client" else api.SpanKind.INTERNAL,
                status=status,
                start_time=span.start_ns,
                end_time=span.end_ns,
                instrumentation_scope=scope,
            )
        )
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)
    try:
        result = exporter.export(made)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # the OTLP exporter has no hints
    if result != SpanExportResult.SUCCESS:
        raise ExportFailed(
            f"the OTLP receiver at {url} did not take the spans (is it running, and an "
            "OTLP/HTTP receiver? Phoenix: http://HOST:6006, Jaeger and Collectors: "
            "http://HOST:4318)"
        )
    return len(made)
