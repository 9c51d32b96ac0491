"""A lean load client for the benchmarks: keep-alive HTTP/1.1 posts, one at a time.

    python bench/load_client.py HOST PORT NICK N [SECRET_FILE]

Waits for a line on stdin (the start signal), posts N messages, then prints
`<n_ok> <seconds>` for the posting phase. Every request's bytes are built
(and, with SECRET_FILE, proved) before the start, and sent over one socket
with one request in flight: the 8 clients of bench/room.py share the cores
with the hub, so each costs no more CPU per post than a send and a receive.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from room.message import Post
from trust.proof import SecretSigner


def requests(host: str, nick: str, n: int, signer: SecretSigner | None) -> list[bytes]:
    """N whole POST /say requests, head and body, ready to send."""
    out = []
    for k in range(n):
        payload = {"from": nick, "to": "@sink", "type": "chat", "body": f"{nick} message {k}"}
        if signer is not None:
            payload.update(signer.prove(Post.model_validate(payload)))
        body = json.dumps(payload).encode()
        head = (
            f"POST /say HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        out.append(head + body)
    return out


class Answers:
    """Reads keep-alive HTTP/1.1 answers (Content-Length framed) off one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def status(self) -> int:
        """The next answer's status code, its body read and dropped."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._more()
        head = self.buffer[:end]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < end + 4 + length:
            self._more()
        self.buffer = self.buffer[end + 4 + length :]
        return int(head.split(b" ", 2)[1])

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the hub closed the connection mid-answer")
        self.buffer += chunk


def main() -> int:
    host, port, nick, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    signer = SecretSigner(Path(sys.argv[5]).read_bytes().strip()) if len(sys.argv) > 5 else None
    prepared = requests(host, nick, n, signer)
    sock = socket.create_connection((host, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answers = Answers(sock)
    sys.stdin.readline()
    ok = 0
    started = time.perf_counter()
    for request in prepared:
        sock.sendall(request)
        ok += answers.status() == 200
    print(ok, time.perf_counter() - started, flush=True)
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
