"""A lean chat-completions client for bench/gateway.py: keep-alive HTTP/1.1, one call at a time.

    python bench/gateway_client.py HOST PORT N [TOKEN_FILE]

Waits for a line on stdin (the start signal), makes N non-streaming calls,
then prints `<n_ok> <seconds>`. http.client keeps the client's own cost small.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path


def main() -> int:
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    headers = {"content-type": "application/json"}
    headers.update({"x-bullpen-thread": "exp-bench", "x-bullpen-seq": "1"})  # as a seat's calls
    if len(sys.argv) > 4:
        headers["authorization"] = "Bearer " + Path(sys.argv[4]).read_text().strip()
    body = json.dumps({"model": "bench-1", "messages": [{"role": "user", "content": "hi"}]})
    conn = http.client.HTTPConnection(host, port, timeout=30)
    sys.stdin.readline()
    ok = 0
    started = time.perf_counter()
    for _ in range(n):
        conn.request("POST", "/v1/chat/completions", body, headers)
        answer = conn.getresponse()
        answer.read()
        ok += answer.status == 200
    print(ok, time.perf_counter() - started, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
