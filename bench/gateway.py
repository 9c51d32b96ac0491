"""Benchmark the model gateway: what it adds on top of an instant backend.

    python bench/gateway.py            # full run (about a minute)
    python bench/gateway.py --quick    # smaller counts, for a smoke check
    python bench/gateway.py --telemetry     # the same with live OTLP export on (a local sink)

One run, one machine, the same instant backend (bench/instant_backend.py)
called straight and through a real `bullpen gateway` process, whose ledger
appends and fsyncs every call: added latency p50/p99 for non-streaming calls
and for the first streamed token, and calls/s from 8 clients.
Goals (issue 17): ≤ 2 ms p50 and ≤ 5 ms p99 added; ≥ 1,000 calls/s.
Every call names a run (x-bullpen-thread, x-bullpen-seq), as a seat's do; with
--telemetry the gateway exports each call's span live (agents/telemetry/live.py)
to an OTLP/HTTP sink in this process, so two runs compare export off and on
(issue 36: within 5%).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402
from tests.support import Society, free_port, wait_for  # noqa: E402

BACKEND = str(REPO / "bench" / "instant_backend.py")
CLIENT = str(REPO / "bench" / "gateway_client.py")
BODY = {"model": "bench-1", "messages": [{"role": "user", "content": "hi"}]}
RUN_HEADERS = {"x-bullpen-thread": "exp-bench", "x-bullpen-seq": "1"}


class Sink:
    """An OTLP/HTTP receiver that takes every export (200) and counts the requests."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        sink = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _up(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def latencies(port: int, token: str | None, n: int, stream: bool) -> list[float]:
    """Milliseconds per call (or to the first streamed content), one keep-alive connection."""
    headers = {"content-type": "application/json", **RUN_HEADERS}
    if token:
        headers["authorization"] = f"Bearer {token}"
    body = json.dumps({**BODY, "stream": stream})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    found = []
    for i in range(n + 50):  # the first 50 warm up
        started = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, headers)
        answer = conn.getresponse()
        if stream:
            while True:
                line = answer.readline()
                if line.startswith(b"data: {") or not line:
                    break
            elapsed = time.perf_counter() - started
            answer.read()
            conn.close()  # the streamed answer ends its connection
        else:
            answer.read()
            elapsed = time.perf_counter() - started
        assert answer.status == 200, answer.status
        if i >= 50:
            found.append(elapsed * 1000)
    conn.close()
    return found


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(port: int, token_file: Path | None, clients: int, each: int) -> float:
    argv = [sys.executable, CLIENT, "127.0.0.1", str(port), str(each)]
    if token_file:
        argv.append(str(token_file))
    procs = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(clients)
    ]
    time.sleep(1.0)  # let every client import and connect before the start signal
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=300)[0].split() for proc in procs]
    ok = sum(int(r[0]) for r in results)
    assert ok == clients * each, results
    return ok / max(float(r[1]) for r in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--ledger-dir",
        help="put the ledger here (e.g. /dev/shm, to see the gateway's cost without the disk's)",
    )
    parser.add_argument(
        "--telemetry", action="store_true", help="with live OTLP export on, to a local sink"
    )
    args = parser.parse_args()
    sink = Sink() if args.telemetry else None
    n, n_stream, each = (200, 100, 200) if args.quick else (2000, 500, 1000)
    backend_port, gateway_port = free_port(), free_port()
    backend = subprocess.Popen([sys.executable, BACKEND, str(backend_port)])
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as folder:
        society = Society(Path(folder) / "home")
        society_toml = society.root / "society.toml"
        society_toml.write_text(
            society_toml.read_text()
            + f'\n[gateway]\nlisten = "127.0.0.1:{gateway_port}"\n'
            + "[gateway.backends.instant]\n"
            + f'base_url = "http://127.0.0.1:{backend_port}/v1"\nprefixes = ["bench"]\n'
            + "check = false\n"
            + (f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{sink.port}"\n' if sink else "")
        )
        if args.ledger_dir:
            ledger_at = Path(args.ledger_dir) / f"bench-gateway-{gateway_port}.jsonl"
            text = society_toml.read_text().replace(
                "[gateway]\n", f'[gateway]\nledger = "{ledger_at}"\n', 1
            )
            society_toml.write_text(text)
        from agents.gateway.tokens import issue

        token_file = issue(society.home, "bench")
        token = token_file.read_text().strip()
        society.spawn("gateway", "--log-level", "warning", "gateway")
        try:
            wait_for(lambda: _up(f"http://127.0.0.1:{backend_port}/"), 20, "the backend")
            wait_for(lambda: _up(f"http://127.0.0.1:{gateway_port}/health"), 20, "the gateway")
            direct = latencies(backend_port, None, n, False)
            through = latencies(gateway_port, token, n, False)
            direct_s = latencies(backend_port, None, n_stream, True)
            through_s = latencies(gateway_port, token, n_stream, True)
            rate_direct = throughput(backend_port, None, 8, each)
            rate_through = throughput(gateway_port, token_file, 8, each)
            ledger = ledger_at if args.ledger_dir else society.root / "gateway" / "ledger.jsonl"
            lines = len(ledger.read_bytes().splitlines())
            if args.ledger_dir:
                ledger.unlink()
        finally:
            society.stop_all()
            backend.terminate()
            backend.wait(10)
    rows = [["measure", "direct", "gateway", "added"]]
    for label, a, b in (
        ("non-streaming p50 ms", direct, through),
        ("non-streaming p99 ms", direct, through),
        ("first token p50 ms", direct_s, through_s),
        ("first token p99 ms", direct_s, through_s),
    ):
        q = 0.5 if "p50" in label else 0.99
        x, y = (statistics.median(a), statistics.median(b)) if q == 0.5 else (pct(a, q), pct(b, q))
        rows.append([label, f"{x:.2f}", f"{y:.2f}", f"{y - x:+.2f}"])
    rows.append(["calls/s, 8 clients", f"{rate_direct:.0f}", f"{rate_through:.0f}", ""])
    rows.append(["ledger lines (fsynced)", "", str(lines), ""])
    if sink is not None:
        rows.append(["OTLP exports received", "", str(sink.requests), ""])
    print(
        f"{n} calls, {n_stream} streamed, 8 clients x {each}; goals: +2 ms p50, +5 ms p99, "
        f"1,000 calls/s; telemetry {'on' if sink else 'off'}"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
