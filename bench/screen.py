"""What the secret screen (trust/screen.py) costs the hub per post, against the old gate.

    python bench/screen.py            # 5,000 calls per small body, 200 per large one
    python bench/screen.py --quick    # a tenth of that, for a smoke check

A throwaway home from `bullpen init` plus three nick keys: the shared secret, the relaxed
token and four private keys in each of their forms. The baseline, in the same run, is the
gate before the screen: two values looked for with `in`. Each body is a post as the hub
sees it (JSON), looked at once per measure; the hub looks twice (raw and decoded). Every
body is honest text: the screen must find nothing in it, in any form (trust/pieces.py).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.cli.init import InitOptions, init_home
from bench.table import print_table
from trust import keys, table
from trust.screen import Screen

BODIES = {
    "prose, 500 B": "The deploy worked after the retry, and the tests passed. " * 9,
    "prose with a sha256": "the trace " * 40 + os.urandom(32).hex(),
    "prose, 64 KiB": "The deploy worked after the retry, and the tests passed. " * 1150,
    "base64 data, 192 KiB": base64.b64encode(os.urandom(144 * 1024)).decode(),
    # Text that is not ASCII is looked at again in its NFKC form only when it holds a
    # look-alike of a token character (trust/screen.py): both kinds, as the room stores them.
    "CJK prose, 64 KiB": "東京の天気は晴れです。気温は25度、湿度は60%でした。" * 800,
    "prose with fullwidth words, 64 KiB": "Tests passed — ｆｕｌｌ ｗｉｄｔｈ, café. " * 1700,
}


def per_call_us(check: object, body: bytes, number: int) -> float:
    """The best of five runs of `number // 5` calls: on a shared machine the others measure
    the neighbours."""
    runs = timeit.repeat(lambda: check(body), number=max(1, number // 5), repeat=5)  # type: ignore[operator]
    return min(runs) / max(1, number // 5) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "home"
        init_home(root, InitOptions(strict="127.0.0.1:1", relaxed="127.0.0.1:2"))
        for nick in ("alice", "bob", "carol"):
            keys.generate_private_key(root / "secrets" / "keys" / f"{nick}.key")
        screen = Screen.of_trust(table.load(root / "trust.toml"))
    old = [os.urandom(32).hex().encode(), os.urandom(32).hex().encode()]
    rows = [["body", "old gate (2 values)", f"screen ({len(screen.needles)} values + PEM)"]]
    for label, text in BODIES.items():
        post = {"from": "x", "to": "@y", "type": "chat", "body": text}
        body = json.dumps(post, ensure_ascii=False).encode()  # as decoded: the second look
        number = (200 if len(body) > 10_000 else 5000) // scale
        base = per_call_us(lambda b: any(v in b for v in old), body, number)
        assert screen.find(body) is None, f"a false positive on {label!r}"
        cost = per_call_us(screen.find, body, number)
        rows.append([label, f"{base:.1f} µs", f"{cost:.1f} µs ({cost / base:.1f}×)"])
    print_table(rows)


if __name__ == "__main__":
    main()
