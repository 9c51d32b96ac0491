"""A load client: post N numbered messages as one nick, print each acknowledged seq.

    python tests/tools/poster.py URL NICK N [--secret-file F] [--start K] [--every S]

Prints `ack <k> <seq>` per acknowledged post and `fail <k> <reason>` per
post that got no acknowledgement (the hub died or refused), then exits 0.
It never retries a post: an unacknowledged post may or may not be stored.
`--every S` paces it: a post at most every S seconds (a steady load, not a flood).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import httpx

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from room.message import Post
from trust.proof import SecretSigner


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("nick")
    parser.add_argument("n", type=int)
    parser.add_argument("--secret-file")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--every", type=float, default=0.0)
    args = parser.parse_args()
    signer = None
    if args.secret_file:
        with open(args.secret_file, "rb") as f:
            signer = SecretSigner(f.read().strip())
    with httpx.Client(base_url=args.url, timeout=30) as client:
        for k in range(args.start, args.start + args.n):
            time.sleep(args.every)
            payload = {
                "from": args.nick,
                "to": "@sink",
                "type": "chat",
                "body": f"{args.nick} {k}",
                "data": {"k": k},
            }
            if signer is not None:
                payload.update(signer.prove(Post.model_validate(payload)))
            try:
                answer = client.post("/say", content=json.dumps(payload))
            except httpx.HTTPError as exc:
                print(f"fail {k} {type(exc).__name__}", flush=True)
                continue
            if answer.status_code == 200:
                print(f"ack {k} {answer.json()['seq']}", flush=True)
            else:
                print(f"fail {k} {answer.status_code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
