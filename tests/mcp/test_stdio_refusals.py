"""`bullpen mcp` on stdio, as a client meets it: a line that is not JSON-RPC is answered with
JSON-RPC's parse error (not silence), the session goes on; flags for the http transport are
refused with stdio. `bullpen replay` refuses options that cannot go together."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support import Society, bullpen_argv, run_cli

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "garbage-test", "version": "1"},
    },
}


def test_garbage_on_stdio_gets_a_parse_error_and_the_session_goes_on(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    lines = ["this is not json", '{"jsonrpc": "2.0", "id": 7}', json.dumps(INITIALIZE)]
    done = subprocess.run(
        bullpen_argv(society.root, "mcp", "--as", "operator"),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [a for a in answers if "error" in a]
    assert len(errors) == 2, done.stdout + done.stderr
    assert all(e["error"]["code"] == -32700 and e["id"] is None for e in errors)
    assert errors[0]["error"]["message"].startswith("Parse error")
    (ready,) = [a for a in answers if a.get("id") == 1]
    assert ready["result"]["serverInfo"]["name"] == "bullpen"


def test_http_flags_with_stdio_and_clashing_replay_options_are_refused(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    refused = run_cli(society.root, "mcp", "--as", "operator", "--port", "9000")
    assert refused.returncode == 2 and "--port only applies to --transport http" in refused.stderr
    for args, says in (
        (("--all", "--step", "terms"), "--all and --step cannot go together"),
        (("--list", "--fork"), "--list and --fork cannot go together"),
    ):
        done = run_cli(society.root, "replay", "exp-1", *args)
        assert done.returncode == 2 and says in done.stderr, done.stderr
