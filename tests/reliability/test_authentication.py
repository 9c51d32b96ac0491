"""Suite 6: nothing but a proven, privileged poster is ever stamped verified.

Bad posts of every kind a forger or a replayer could try are generated from
seeded randomness: a wrong secret, another nick's key, the shared secret for
a nick that has its own key, body / other fields / ts / nonce altered after
signing, a stale ts, a replayed request, a privileged nick with no proof, a
post claiming `verified` or another hub field, garbage signatures and MACs,
a wrong bearer token, an unprivileged nick with a valid proof (written, but
never verified). Valid posts are mixed in and must all be verified.

The bulk goes through the real Gate in-process (CI 100,000, --soak
1,000,000); a share goes through a real hub over HTTP (CI 5,000, --soak
100,000) and the room is read back. Replays are tried across hub restarts.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room.errors import PostRejected
from room.message import parse_request
from tests.reliability.forger import Attempt, Forger, write_trust
from tests.reliability.helpers import Seeded, exchange, figures, http_request
from tests.support import HTTP, Society, run_cli, set_hub
from trust import table
from trust.gate import Gate
from trust.nonces import NonceStore


def judge_in_process(gate: Gate, attempt: Attempt) -> str:
    try:
        if attempt.relaxed:
            gate.check_bearer(None if attempt.token is None else f"Bearer {attempt.token}")
        verified = gate.judge(parse_request(attempt.raw), attempt.relaxed)
    except PostRejected:
        return "refused"
    return "verified" if verified else "unverified"


@pytest.fixture
def nick_keys() -> dict[str, Ed25519PrivateKey]:
    return {"alice": Ed25519PrivateKey.generate(), "bob": Ed25519PrivateKey.generate()}


@pytest.mark.soak
def test_bad_posts_through_the_gate(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], soak: bool, rng: Seeded
) -> None:
    """Hundreds of thousands of bad posts through the real Gate: none verified, every valid one verified."""
    count = 1_000_000 if soak else 100_000
    write_trust(society.root / "trust.toml", nick_keys)
    trust = table.load(society.root / "trust.toml")
    now = 1_800_000_000.0
    gate = Gate(
        trust,
        society.secret(),
        society.token().encode(),
        NonceStore(None, clock=lambda: now),
        clock=lambda: now,
    )
    forger = Forger(rng, society.secret(), society.token(), nick_keys, lambda: now)
    outcomes: Counter[tuple[str, str]] = Counter()
    started = time.monotonic()
    for attempt in forger.attempts(count):
        got = judge_in_process(gate, attempt)
        outcomes[(attempt.kind, got)] += 1
        assert got == attempt.expect, (
            f"{attempt.kind}: {got}, not {attempt.expect} (seed {rng.seed_value}): {attempt.raw[:300]!r}"
        )
    bad = sum(n for (kind, _), n in outcomes.items() if kind != "valid")
    assert bad >= count
    assert not [key for key in outcomes if key[0] != "valid" and key[1] == "verified"]
    figures(
        "authentication in-process",
        bad=bad,
        valid=sum(n for (kind, _), n in outcomes.items() if kind == "valid"),
        kinds=len(forger.kinds),
        seconds=round(time.monotonic() - started, 1),
    )


@pytest.mark.soak
def test_bad_posts_through_the_hub(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], soak: bool, rng: Seeded
) -> None:
    """Bad posts over HTTP to both listeners: refused or written unverified; the room shows 0 verified bad lines."""
    count = 100_000 if soak else 5_000
    write_trust(society.root / "trust.toml", nick_keys)
    # The gate is under test, not the stranger limits (tests/room/test_flood.py): thousands of
    # unverified posts at full speed would be answered 429.
    set_hub(
        society.root,
        unverified_nick_posts_per_s=0,
        unverified_total_posts_per_s=0,
        unverified_nick_bytes_per_s=0,
        unverified_total_bytes_per_s=0,
    )
    society.start_hub()
    # Fresh proofs are made just before they are sent, a chunk at a time, within 30 s of now.
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time, skew=30)
    attempts: list[Attempt] = []
    answers: dict[int, tuple[int, bytes]] = {}
    started = time.monotonic()
    made = 0
    while made < count:
        chunk = forger.attempts(min(2_000, count - made))
        made += min(2_000, count - made)
        base = len(attempts)
        attempts += chunk
        requests = []
        for attempt in chunk:
            headers = {} if attempt.token is None else {"authorization": f"Bearer {attempt.token}"}
            requests.append(http_request("POST", "/say", attempt.raw, headers))
        # In order within each listener, so a replay comes after the post it replays.
        for url, relaxed in ((society.strict_url, False), (society.relaxed_url, True)):
            indexes = [i for i, a in enumerate(chunk) if a.relaxed == relaxed]
            got = asyncio.run(exchange(url, [requests[i] for i in indexes], connections=1))
            answers.update((base + i, answer) for i, answer in zip(indexes, got, strict=True))
    elapsed = time.monotonic() - started
    outcomes: Counter[tuple[str, str]] = Counter()
    written: dict[str, Attempt] = {}
    for index, attempt in enumerate(attempts):
        status, body = answers[index]
        assert status < 500, f"{attempt.kind}: HTTP {status} {body[:300]!r}"
        if status == 200:
            line = json.loads(body)
            got = "verified" if line["verified"] else "unverified"
            written[line["body"]] = attempt
        else:
            got = "refused"
            error = json.loads(body)
            assert error["error"] and error["message"], body
        outcomes[(attempt.kind, got)] += 1
        assert got == attempt.expect, (
            f"{attempt.kind}: {got}, not {attempt.expect} (seed {rng.seed_value})"
        )
    lines = society.lines()
    assert len(lines) == len(written)
    for line in lines:
        attempt = written[line["body"]]
        assert line["verified"] == (attempt.expect == "verified"), line
    assert not [m for m in lines if m["body"].startswith("bad ") and m["verified"]]
    bad = sum(n for (kind, _), n in outcomes.items() if kind != "valid")
    figures(
        "authentication through the hub",
        bad=bad,
        valid=sum(n for (kind, _), n in outcomes.items() if kind == "valid"),
        bad_written_unverified=sum(1 for m in lines if m["body"].startswith("bad ")),
        requests_per_s=round(len(attempts) / elapsed),
    )


def replayable(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> list[bytes]:
    """Post two valid proven requests (HMAC and own key); return their exact bytes."""
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    raws = [
        Attempt("valid", forger.hmac(forger.fields("operator", "good"))).raw,
        Attempt("valid", forger.sig(forger.fields("alice", "good"), "alice")).raw,
    ]
    for raw in raws:
        answer = HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10)
        assert answer.status_code == 200 and answer.json()["verified"] is True
    return raws


def assert_replays_refused(society: Society, raws: list[bytes]) -> None:
    for raw in raws:
        answer = HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10)
        assert answer.status_code == 401, answer.text
        assert "already used" in answer.json()["message"]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_replay_across_a_restart(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], how: str, rng: Seeded
) -> None:
    """A proof used before a restart (clean or SIGKILL) is refused after it."""
    write_trust(society.root / "trust.toml", nick_keys)
    hub = society.start_hub()
    raws = replayable(society, nick_keys, rng)
    if how == "sigterm":
        assert hub.stop() == 0
    else:
        hub.signal(signal.SIGKILL)
        hub.proc.wait(10)
    society.start_hub()
    assert_replays_refused(society, raws)


def test_replay_after_a_second_hub_was_refused(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> None:
    """A second hub that is refused the room must not disturb the first hub's nonce journal."""
    write_trust(society.root / "trust.toml", nick_keys)
    first = society.start_hub()
    second = society.spawn("hub-2", "hub")
    assert second.proc.wait(20) == 1 and "another hub" in second.output()
    raws = replayable(society, nick_keys, rng)  # journaled by the first hub after that
    assert first.stop() == 0
    society.start_hub()
    assert_replays_refused(society, raws)


def test_authorship_is_auditable_without_secrets(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], tmp_path: Path, rng: Seeded
) -> None:
    """A nick's own signature stays in its line; audit verifies it from trust.toml alone and names an altered line."""
    write_trust(society.root / "trust.toml", nick_keys)
    hub = society.start_hub()
    replayable(society, nick_keys, rng)
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    for _ in range(5):
        raw = Attempt("valid", forger.sig(forger.fields("bob", "good"), "bob")).raw
        assert HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10).status_code == 200
    assert hub.stop() == 0
    lines = society.lines()
    signed = [m for m in lines if m["from"] in nick_keys]
    assert len(signed) == 6 and all(m["sig"] and m["verified"] for m in signed)
    assert all(m["sig"] is None for m in lines if m["from"] == "operator")  # HMACs are never stored
    # An auditor's copy: the room and trust.toml with public keys only, no secrets at all.
    auditor = tmp_path / "auditor"
    auditor.mkdir()
    (auditor / "room.jsonl").write_bytes(society.room.read_bytes())
    trust_text = (society.root / "trust.toml").read_text()
    (auditor / "trust.toml").write_text(trust_text)
    done = run_cli(auditor, "audit", str(auditor / "room.jsonl"))
    assert (
        done.returncode == 0
        and done.stdout.strip() == f"ok: {len(lines)} lines"
        and "signatures: 6 verified" in done.stderr
    ), done.stdout + done.stderr
    # Edit the last signed line (the last line: the chain alone cannot see it).
    target = signed[-1]
    assert target["seq"] == len(lines)
    edited = [json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() for m in lines]
    target["body"] = target["body"] + " (edited)"
    edited[-1] = json.dumps(target, ensure_ascii=False, separators=(",", ":")).encode()
    (auditor / "room.jsonl").write_bytes(b"".join(line + b"\n" for line in edited))
    done = run_cli(auditor, "audit", str(auditor / "room.jsonl"))
    assert done.returncode == 1
    assert f"FAILED at seq {target['seq']}:" in done.stdout and "signature" in done.stdout


def test_a_legacy_nonce_journal_is_still_honoured_and_no_longer_written(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> None:
    """A home from before nonces moved into the lines kept them in `room.jsonl.nonces`: a hub
    started on it refuses those proofs (the upgrade reopens no window), and writes no more."""
    write_trust(society.root / "trust.toml", nick_keys)
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    raws = [
        Attempt("valid", forger.hmac(forger.fields("operator", "old"))).raw,
        Attempt("valid", forger.sig(forger.fields("alice", "old"), "alice")).raw,
    ]
    journal = society.room.with_name(society.room.name + ".nonces")
    society.room.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for raw in raws:
        proof = json.loads(raw).get("proof") or json.loads(raw)["sig"]
        records.append(f"{proof['ts']} {proof['nonce']}\n")
    journal.write_text("".join(records))
    before = journal.read_bytes()
    society.start_hub()
    assert_replays_refused(society, raws)
    replayable(society, nick_keys, rng)
    assert journal.read_bytes() == before
