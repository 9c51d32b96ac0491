"""Traces of runs (OpenTelemetry, GenAI semantic conventions) and the ids that tie them.

    (room/traceids.py: trace and span ids derived from the thread, the room seqs
    and the gateway's call ids, so every process and `bullpen trace` name the
    same span the same way; W3C traceparent strings. In room/, stdlib only, so a
    seat and the gateway can name a step's span without this package.)
    config.py    the [telemetry] section and the standard OTEL_* variables
    tree.py      a run's spans built from the room's thread and the gateway's ledger
    export.py    those spans sent over OTLP/HTTP with the official SDK (the
                 `bullpen[telemetry]` extra), imported only when asked for
    live.py      spans handed over as they happen (the gateway's calls), sent in
                 batches from a thread of its own
    command.py   `bullpen trace THREAD [--otlp URL] [--json]`

Nothing here is imported by the hub or an idle lurker: room/traceids.py is
stdlib only, and the SDK loads only inside export.py (tests/test_footprint.py).
"""
