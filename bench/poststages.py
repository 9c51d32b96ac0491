"""The hub's post path, stage by stage: CPU microseconds per post, in this process.

    python bench/poststages.py                 # the stages on a fresh home (a few seconds)
    python bench/poststages.py --quick         # fewer posts per stage, for a smoke check
    python bench/poststages.py --serve PORT    # the HTTP floor's server (bench/room.py starts it)

bench/room.py prints these beside the hub's measured CPU per post; what the
stages do not cover (HTTP framing in uvicorn and httptools, the /say exchange (room/direct.py),
the event loop's wake-ups, the hand-off to the writer thread and back, the
reply's send) is that measured figure minus their sum. Each stage runs the
hub's own code on a real home (its secret screen, trust table, nonce
store), so a change to any of them shows here.
"""

from __future__ import annotations

import argparse
import hmac
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from room import strictjson
from room.chain import GENESIS, line_hash
from room.hub import bind, serve_asgi
from room.ids import IdClock
from room.limits import HubLimits, Limits
from room.log import Draft, build_line
from room.message import Post, parse_request, parse_request_obj
from room.tree import Tree
from trust.gate import Gate
from trust.nonces import NonceStore
from trust.proof import SecretSigner, hmac_hex, proof_bytes
from trust.screen import Screen
from trust.table import TrustTable


def _per_call_us(fn: Callable[[int], Any], n: int, repeats: int = 5) -> float:
    """The best of `repeats` runs of fn(0..n-1), in CPU microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        for i in range(n):
            fn(i)
        best = min(best, time.thread_time() - started)
    return best / n * 1e6


def _bodies(nick: str, n: int, signer: SecretSigner | None) -> list[bytes]:
    out = []
    for k in range(n):
        payload: dict[str, Any] = {
            "from": nick,
            "to": "@sink",
            "type": "chat",
            "body": f"{nick} message {k}",
        }
        if signer is not None:
            payload.update(signer.prove(Post.model_validate(payload)))
        out.append(strictjson.dumps(payload).encode())
    return out


def stage_costs(trust: TrustTable, secret: bytes, n: int) -> list[tuple[str, float]]:
    """(stage, CPU us per post) for each stage of the post path, in the hub's order."""
    screen = Screen.of_trust(trust)
    signed = _bodies("operator", n, SecretSigner(secret))
    plain = _bodies("load0", n, None)
    objs = [strictjson.loads(raw) for raw in plain]
    requests = [parse_request(raw) for raw in plain]
    proved = [parse_request(raw) for raw in signed]
    rows: list[tuple[str, float]] = []
    rows.append(("secret screen, request bytes", _per_call_us(lambda i: screen.find(plain[i]), n)))
    rows.append(("JSON parse (strict)", _per_call_us(lambda i: strictjson.loads(plain[i]), n)))
    rows.append(
        (
            "secret screen, stored form",
            _per_call_us(lambda i: screen.find(strictjson.dumps(objs[i]).encode()), n),
        )
    )
    rows.append(
        ("validation (fields, pydantic)", _per_call_us(lambda i: parse_request_obj(objs[i]), n))
    )

    def check_hmac(i: int) -> bool:
        request = proved[i]
        assert request.proof is not None
        message = proof_bytes(request.post.signed_fields(), request.proof.ts, request.proof.nonce)
        return hmac.compare_digest(hmac_hex(secret, message), request.proof.hmac)

    rows.append(("signed only: canonical JSON + HMAC", _per_call_us(check_hmac, n)))
    with tempfile.TemporaryDirectory(prefix="bullpen-stages-") as tmp:
        folder = Path(tmp)
        nonce_store = NonceStore(None)
        nonce_store.open(folder / "room.jsonl")
        gate = Gate(trust, secret, None, NonceStore(None), screen=screen)
        rows.append(
            ("gate, unsigned post", _per_call_us(lambda i: gate.judge(requests[i], False), n))
        )
        nonces = iter(range(10 * n))
        rows.append(
            (
                "signed only: nonce reserved (memory; the line carries it to disk)",
                _per_call_us(
                    lambda i: nonce_store.reserve(f"nonce-{next(nonces):012d}", int(time.time())),
                    n,
                ),
            )
        )
        nonce_store.close()
        off = HubLimits(
            unverified_nick_posts_per_s=0,
            unverified_nick_bytes_per_s=0,
            unverified_total_posts_per_s=0,
            unverified_total_bytes_per_s=0,
        )
        limits = Limits(off, folder)
        rows.append(
            (
                "limits (buckets, disk check)",
                _per_call_us(lambda i: limits.admit_unverified("load0", 60), n),
            )
        )
        clock = IdClock()
        drafts = [Draft(request.post, False) for request in requests]

        def stamp(i: int) -> bytes:
            ulid, ms = clock.next()
            return build_line(i + 1, ulid, ms, drafts[i], GENESIS)

        rows.append(("stamp + stored line (id, ts, JSON)", _per_call_us(stamp, n)))
        lines = [stamp(i) for i in range(n)]
        rows.append(("chain hash (SHA-256)", _per_call_us(lambda i: line_hash(lines[i]), n)))
        tree = Tree(folder / "tree")
        rows.append(
            ("Merkle tree, one line a batch", _per_call_us(lambda i: tree.append([lines[i]]), n))
        )
        tree.close()
    return rows


async def _trivial(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that reads the body and answers `{}`: what the HTTP stack costs alone."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-length", b"2"), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def floor_server(port: int) -> subprocess.Popen[bytes]:
    """The hub's server stack (uvicorn, httptools, the connection guard: room/hub.py's
    serve_asgi) around the trivial app, in its own process, listening once this returns."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE
    )
    assert server.stdout is not None
    if server.stdout.readline().strip() != b"listening":
        server.kill()
        raise RuntimeError("the HTTP floor's server did not start")
    return server


def _serve(port: int) -> None:
    import uvloop  # as the hub runs (room/service.py)

    async def run() -> None:
        sock = bind("127.0.0.1", port)
        await serve_asgi([(_trivial, sock)], on_ready=lambda: print("listening", flush=True))

    uvloop.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer posts per stage")
    parser.add_argument(
        "--serve", type=int, metavar="PORT", help="serve the HTTP floor's trivial app instead"
    )
    args = parser.parse_args()
    if args.serve is not None:
        _serve(args.serve)
        return 0
    from bench.table import print_table
    from tests.support import Society

    n = 500 if args.quick else 5000
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-") as tmp:
        society = Society(Path(tmp) / "home")
        bodies = _bodies("load", n, None)
        baseline = _per_call_us(lambda i: json.loads(bodies[i]), n)
        stages = stage_costs(society.home.trust, society.secret(), n)
    rows = [("json.loads of the post's body (stdlib)", f"{baseline:,.1f} us", "baseline")]
    rows += [(name, f"{us:,.1f} us", f"{us / baseline:,.1f}x") for name, us in stages]
    total = sum(us for _, us in stages)
    rows.append(("stages, sum", f"{total:,.1f} us", f"{total / baseline:,.1f}x"))
    print_table([("stage (CPU per post, in-process)", "value", "vs baseline"), *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
