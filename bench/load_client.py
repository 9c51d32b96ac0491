"""A lean load client for the benchmarks: keep-alive HTTP/1.1 posts, one at a time.

    python bench/load_client.py HOST PORT NICK N [SECRET_FILE]

Waits for a line on stdin (the start signal), posts N messages, then prints
`<n_ok> <seconds>` for the posting phase. Uses http.client so the client's
own cost stays small next to the hub's.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from room.message import Post
from trust.proof import SecretSigner


def main() -> int:
    host, port, nick, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    signer = SecretSigner(Path(sys.argv[5]).read_bytes().strip()) if len(sys.argv) > 5 else None
    conn = http.client.HTTPConnection(host, port, timeout=30)
    bodies = []
    for k in range(n):
        payload = {"from": nick, "to": "@sink", "type": "chat", "body": f"{nick} message {k}"}
        if signer is not None:
            payload.update(signer.prove(Post.model_validate(payload)))
        bodies.append(json.dumps(payload).encode())
    sys.stdin.readline()
    ok = 0
    started = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/say", body, {"content-type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        ok += answer.status == 200
    print(ok, time.perf_counter() - started, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
