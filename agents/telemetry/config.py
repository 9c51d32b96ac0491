"""The `[telemetry]` section of society.toml, and the standard OTEL_* variables.

    [telemetry]
    otlp_endpoint = "http://127.0.0.1:4318"   # an OTLP/HTTP receiver: Phoenix, Jaeger, a Collector
    capture_content = false                   # true: prompts and answers on spans (screened)
    service_name = "bullpen"

With no `otlp_endpoint`, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as
it is) or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, `/v1/traces` added) is
used, as every OpenTelemetry SDK does; with neither, nothing is exported and
nothing of OpenTelemetry is loaded. OTEL_EXPORTER_OTLP_HEADERS and
OTEL_SERVICE_NAME are honoured by the SDK itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.config import parse_section
from room.errors import UsageError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["TelemetryConfig", "traces_url"]

TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP base URL (or the traces URL itself) as the URL spans are posted to."""
    endpoint = endpoint.strip()
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(
            f"the OTLP endpoint {endpoint[:200]!r} is not an http(s) URL; give one like "
            "http://127.0.0.1:4318 (an OTLP/HTTP receiver)"
        )
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


class TelemetryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    otlp_endpoint: str | None = None
    capture_content: bool = False
    service_name: str = Field(default="bullpen", min_length=1, max_length=100)

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL, e.g. http://127.0.0.1:4318")
        return value

    @classmethod
    def of(cls, home: Home) -> TelemetryConfig:
        return parse_section(cls, home.society.telemetry, "telemetry", home.society_file)

    def endpoint(self) -> str | None:
        """Where spans go (the traces URL), or None: telemetry is off."""
        if self.otlp_endpoint:
            return traces_url(self.otlp_endpoint)
        traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if traces:
            return traces
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        return traces_url(base) if base else None
