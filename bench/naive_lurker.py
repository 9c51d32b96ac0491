"""The baseline to beat: a lurker that re-reads the room file once a second.

    python bench/naive_lurker.py ROOM NICK MARKS

Writes `<id> <time>` to MARKS for each new line addressed to @NICK.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    room, nick, marks = sys.argv[1], sys.argv[2], sys.argv[3]
    offset = 0
    while True:
        with open(room, "rb") as f:
            f.seek(offset)
            chunk = f.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        offset += len(whole)
        for line in whole.splitlines():
            message = json.loads(line)
            if message.get("to") == f"@{nick}":
                with open(marks, "a") as out:
                    out.write(f"{message['id']} {time.time():.6f}\n")
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
