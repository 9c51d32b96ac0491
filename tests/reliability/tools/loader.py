"""Load for the reliability suites: K clients posting numbered messages to a hub.

    python -m tests.reliability.tools.loader URL --name w --clients 4 --posts 500
        [--secret-file F] [--stop-file PATH] [--pad BYTES] [--rate POSTS_PER_S] [--out FILE]

Each client is one keep-alive connection posting one message at a time, so
its posts must land in the room in the order it sent them. Client `i` posts
as nick `<name><i>`; with --secret-file, every even client posts as the
privileged `operator` instead, with an HMAC proof, so verified lines are in
the mix. The body is `<client> <k>` and data is {"c": client, "k": k}.

Output, one line per post (written at exit):

    ack <client> <k> <seq>     the hub answered 200 with that seq
    fail <client> <k> <why>    anything else; the post may or may not be stored

A post is never retried: after a failure the client reconnects and goes on
with the next number. A connection that cannot be opened does not use up a
number (nothing was sent), so a hub that is down only delays the clients.
Raw HTTP/1.1 over asyncio streams keeps the clients cheap enough that the
hub, not the load, is the bottleneck on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from urllib.parse import urlsplit

from room import strictjson
from trust.proof import hmac_hex, new_nonce, proof_bytes

TIMEOUT_S = 30.0


class Client:
    def __init__(
        self, args: argparse.Namespace, index: int, secret: bytes | None, out: list[str]
    ) -> None:
        url = urlsplit(args.url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.name = f"{args.name}{index}"
        self.sender = "operator" if secret is not None and index % 2 == 0 else self.name
        self.secret = secret
        self.args = args
        self.out = out
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    def stopping(self) -> bool:
        return bool(self.args.stop_file) and os.path.exists(self.args.stop_file)

    async def connect(self) -> bool:
        delay = 0.01
        while not self.stopping():
            try:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                return True
            except OSError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
        return False

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def payload(self, k: int) -> bytes:
        fields = {
            "from": self.sender,
            "to": "@sink",
            "type": "chat",
            "body": f"{self.name} {k}" + (" " + "x" * self.args.pad if self.args.pad else ""),
            "data": {"c": self.name, "k": k},
            "in_reply_to": None,
            "thread": None,
        }
        post: dict[str, object] = dict(fields)
        if self.secret is not None and self.sender == "operator":
            ts, nonce = int(time.time()), new_nonce()
            mac = hmac_hex(self.secret, proof_bytes(fields, ts, nonce))
            post["proof"] = {"ts": ts, "nonce": nonce, "hmac": mac}
        return strictjson.dumps(post).encode()

    async def post(self, body: bytes) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (
            f"POST /say HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return status, await self.reader.readexactly(length)

    async def run(self) -> None:
        k = self.args.start
        end = self.args.start + self.args.posts if self.args.posts else None
        loop = asyncio.get_running_loop()
        begun = loop.time()
        while (end is None or k < end) and not self.stopping():
            if self.args.rate:  # pace: post number n goes out no sooner than n / rate seconds in
                ahead = begun + (k - self.args.start) / self.args.rate - loop.time()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if self.writer is None and not await self.connect():
                break
            try:
                status, answer = await asyncio.wait_for(self.post(self.payload(k)), TIMEOUT_S)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                self.out.append(f"fail {self.name} {k} {type(exc).__name__}")
                self.close()
                k += 1
                continue
            if status == 200:
                self.out.append(f"ack {self.name} {k} {json.loads(answer)['seq']}")
            else:
                self.out.append(f"fail {self.name} {k} {status}")
            k += 1
        self.close()


async def main_async(args: argparse.Namespace) -> list[str]:
    secret = None
    if args.secret_file:
        with open(args.secret_file, "rb") as f:
            secret = f.read().strip()
    out: list[str] = []
    clients = [Client(args, i, secret, out) for i in range(args.clients)]
    await asyncio.gather(*(c.run() for c in clients))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--name", default="w")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--posts", type=int, default=0, help="per client; 0: until --stop-file")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--secret-file")
    parser.add_argument("--stop-file")
    parser.add_argument("--pad", type=int, default=0, help="extra body bytes per post")
    parser.add_argument("--rate", type=float, default=0, help="posts/s per client; 0: flat out")
    parser.add_argument("--out", help="write the results here instead of stdout")
    args = parser.parse_args()
    out = asyncio.run(main_async(args))
    text = "".join(line + "\n" for line in out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
