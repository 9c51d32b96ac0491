"""An OTLP/HTTP receiver in the test's process: it takes every export and keeps its spans.

The requests are decoded with OpenTelemetry's own protobuf classes (the
`opentelemetry-proto` the exporter depends on), so what is checked is what a
Collector would have received. For trees read back through a receiver no one
here wrote, see phoenix.py.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import free_port

__all__ = ["OtlpSink"]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class OtlpSink:
    """Spans as dicts: name, trace_id, span_id, parent_id (hex), attributes (span and
    resource), status_code."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        sink = self
        self.spans: list[dict[str, Any]] = []
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                found = []
                for resource in request.resource_spans:
                    shared = {a.key: _value(a.value) for a in resource.resource.attributes}
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            attributes = {a.key: _value(a.value) for a in span.attributes}
                            found.append(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent_id": span.parent_span_id.hex() or None,
                                    "attributes": {**shared, **attributes},
                                    "status_code": span.status.code,
                                }
                            )
                with sink._lock:
                    sink.spans += found
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def held(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
