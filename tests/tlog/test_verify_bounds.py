"""`bullpen verify` on hostile files: a proof bundle or a line nested 100,000 deep was a
RecursionError traceback, a huge file was read whole; both are exit 2 with the reason now."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support import run_cli
from trust.note import Verifier

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def key() -> str:
    return Verifier("example.org/log", Ed25519PrivateKey.generate().public_key()).text()


@pytest.mark.parametrize(
    "text",
    ['{"format": "bullpen-proof-bundle/v1", "seq": 1, "line": "x", "proof": ' + DEEP + "}", DEEP],
    ids=["inside-a-bundle", "the-whole-file"],
)
def test_a_nesting_bomb_bundle_is_exit_2_with_the_reason(
    tmp_path: Path, key: str, text: str
) -> None:
    bundle = tmp_path / "bundle.json"
    bundle.write_text(text)
    done = run_cli(tmp_path / "nowhere", "verify", str(bundle), "--key", key)
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "nesting deeper than 32 levels" in done.stderr, done.stderr


def test_a_bundle_over_the_bound_is_refused_unread(tmp_path: Path, key: str) -> None:
    bundle = tmp_path / "bundle.json"
    with open(bundle, "wb") as handle:
        handle.truncate(2**30)  # sparse
    done = run_cli(tmp_path / "nowhere", "verify", str(bundle), "--key", key)
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "over the bound of 4096 KiB" in done.stderr and "Traceback" not in done.stderr
