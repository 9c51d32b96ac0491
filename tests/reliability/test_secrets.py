"""Suite 10: secrets stay secret, and secret files that are not safe stop the hub.

A secret or key file that others can read, that is a symlink, that another
user owns, or that is not a regular file (a FIFO would make a naive reader
block forever) stops the hub with exit 78 and a message naming the file and
the command that fixes it — never the secret. A busy session of posts, bad
proofs, wrong tokens, CLI commands at debug level and a fail-stop leaves
the shared secret, the relaxed token and every private key out of every
room line, log line, error body and CLI output. (The same scan runs over
the whole test run at its end: tests/reliability/secretscan.py.)
"""

from __future__ import annotations

import os
import signal
import stat
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.reliability.secretscan import secrets_of
from tests.support import HTTP, Society, record_output, run_cli, wait_for
from trust.proof import hmac_hex, proof_bytes


def loosen(path: Path) -> str:
    path.chmod(0o644)
    return f"chmod 600 {path}"


def symlink(path: Path) -> str:
    real = path.with_name(path.name + ".real")
    path.rename(real)
    path.symlink_to(real)
    return "symlink"


def foreign(path: Path) -> str:
    os.chown(path, 12345, -1)
    return f"chown {os.geteuid()} {path}"


def fifo(path: Path) -> str:
    path.unlink()
    os.mkfifo(path, 0o600)
    return "not a regular file"


def folder(path: Path) -> str:
    path.unlink()
    path.mkdir(mode=0o700)
    return "not a regular file"


PROBLEMS: dict[str, Callable[[Path], str]] = {
    "group/world-readable": loosen,
    "a symlink": symlink,
    "owned by another user": foreign,
    "a FIFO": fifo,
    "a folder": folder,
}
FILES = {
    "shared secret": lambda s: s.home.trust.secret_file,
    "relaxed token": lambda s: s.home.trust.relaxed_token_file,
    "hub key": lambda s: s.home.trust.hub_key_file,
}


@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("which", list(FILES))
def test_unsafe_secret_file_stops_the_hub(society: Society, which: str, problem: str) -> None:
    """Each unsafe secret or key file stops the hub with exit 78 and the fix, never the secret."""
    if problem == "owned by another user" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")  # a precondition, not a way to pass
    path = FILES[which](society)
    values = secrets_of(path.parent)
    assert values, "the home has no secrets to protect: the test would prove nothing"
    fix = PROBLEMS[problem](path)
    hub = society.spawn("hub", "hub")
    try:
        code = hub.proc.wait(20)
    except Exception:
        hub.kill()
        raise AssertionError(f"the hub hung on a secret file that is {problem}") from None
    out = hub.output()
    assert code == 78, out
    assert str(path) in out and fix in out, out
    assert not [v for v in values if v.decode(errors="replace") in out]


def _without_hub_public_key(society: Society) -> None:
    trust = society.root / "trust.toml"
    kept = [x for x in trust.read_text().splitlines() if not x.startswith("hub_public_key")]
    trust.write_text("\n".join(kept) + "\n")


def test_hub_key_is_made_private_when_missing(society: Society) -> None:
    """With no hub_public_key to match, a missing hub key is created 0600 on first start
    (O_EXCL, no link followed) and its public half is logged."""
    key = society.home.trust.hub_key_file
    key.unlink()
    _without_hub_public_key(society)
    hub = society.start_hub()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == os.geteuid()
    assert "made a new hub key" in hub.output() and "PRIVATE" not in hub.output()


@pytest.mark.parametrize("change", ["missing", "another key", "garbage"])
def test_a_hub_key_trust_toml_does_not_name_stops_the_hub(society: Society, change: str) -> None:
    """Checkpoints signed by a key trust.toml does not name would never verify: the hub
    refuses to start (78) and says how to fix it, and the trust check reports it too."""
    from trust import keys

    key = society.home.trust.hub_key_file
    key.unlink()
    if change == "another key":
        keys.generate_private_key(key)
    elif change == "garbage":
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"not a key\n")
        os.close(fd)
    hub = society.spawn("hub", "hub")
    assert hub.proc.wait(20) == 78, hub.output()
    out = hub.output()
    assert "hub_public_key" in out and "bullpen keys new" not in out, out
    assert not key.exists() or change != "missing"  # nothing made behind the operator's back
    check = run_cli(society.root, "trust", "check", "--static")
    assert check.returncode == 1 and "hub_public_key" in check.stdout + check.stderr


@pytest.mark.long
def test_no_secret_anywhere_after_a_busy_session(society: Society, tmp_path: Path) -> None:
    """Posts, bad proofs, wrong tokens, debug-level CLI commands and a fail-stop: no secret in any line, log, body or output."""
    done = run_cli(society.root, "keys", "new", "alice")
    assert done.returncode == 0
    trust = society.root / "trust.toml"
    trust.write_text(trust.read_text().rstrip("\n") + "\n" + done.stdout.strip() + "\n")
    secrets = {v.decode(errors="replace") for v in secrets_of(society.root / "secrets")}
    assert len(secrets) >= 4  # secret, token, hub key, alice's key (each with its forms)
    hub = society.start_hub(env={"BULLPEN_FAULTS": "eio@fsync:60"})
    seen: list[str] = [done.stdout + done.stderr]
    secret = society.secret()
    for n in range(10):  # good and bad proofs, by hand
        fields = {"from": "operator", "to": "@echo", "type": "ask", "body": f"hello {n}"}
        full = {**fields, "data": None, "in_reply_to": None, "thread": None}
        ts = 2_000_000_000 if n % 2 else int(time.time())  # stale every other time
        mac = hmac_hex(secret, proof_bytes(full, ts, f"nonce-{n:04d}"))
        proof = {"ts": ts, "nonce": f"nonce-{n:04d}", "hmac": mac}
        answer = HTTP.post(f"{society.strict_url}/say", json={**fields, "proof": proof}, timeout=10)
        seen.append(answer.text)
        wrong = {**proof, "hmac": hmac_hex(b"x" * 64, b"y")}
        answer = HTTP.post(f"{society.strict_url}/say", json={**fields, "proof": wrong}, timeout=10)
        seen.append(answer.text)
    for token in ("x", "wrong", society.token()[:-2], society.token() + "x"):
        answer = HTTP.get(
            f"{society.relaxed_url}/read", headers={"authorization": f"Bearer {token}"}, timeout=10
        )
        seen.append(answer.text)
    for args in (
        ("say", "@echo", "hello from the cli", "--type", "ask"),
        ("say", "@echo", "as alice", "--as", "alice"),
        ("say", "@echo", "relaxed", "--relaxed", "--as", "echo"),
        ("--log-level", "debug", "say", "@echo", "debug level"),
        ("say", "@echo", "x" * 70_000),
        ("read",),
        ("audit",),
        ("keys", "show", "alice"),
        ("--log-level", "debug", "trust", "check", "--static"),
    ):
        done = run_cli(society.root, *args)
        seen.append(done.stdout + done.stderr)
    for n in range(200):  # until the injected fsync fault stops the hub
        try:
            answer = HTTP.post(
                f"{society.strict_url}/say",
                json={"from": "stranger", "to": "@sink", "type": "chat", "body": f"load {n}"},
                timeout=10,
            )
        except httpx.TransportError:
            break
        seen.append(answer.text)
    wait_for(lambda: not hub.alive(), 30, "the injected fsync fault to stop the hub")
    assert hub.proc.returncode == 70
    hub.signal(signal.SIGTERM)
    for text in seen:
        record_output("test_no_secret_anywhere_after_a_busy_session", text)
    files = [p for p in society.root.rglob("*") if p.is_file() and "secrets" not in p.parts]
    everything = "".join(seen) + "".join(p.read_text(errors="replace") for p in files)
    assert (
        "hello from the cli" in everything and "hub listening" in everything
    )  # the scan saw real output
    leaked = [s for s in secrets if s in everything]
    assert not leaked, f"{len(leaked)} secret values leaked"


def test_the_session_scan_finds_a_leak() -> None:
    """The end-of-run scan really finds a secret in a log or in captured output, and fails the run."""
    import tempfile
    from types import SimpleNamespace

    from tests.reliability.secretscan import SecretScan

    # Outside the run's temporary folder, so the real end-of-run scan does not see the plant.
    with tempfile.TemporaryDirectory() as elsewhere:
        base = Path(elsewhere)
        society = Society(base / "home")
        logs = society.root / "test-logs"
        logs.mkdir()
        (logs / "hub.log").write_text(f"all fine\nsecret={society.secret().decode()}\n")
        (base / "clean.txt").write_text("nothing to see")
        factory = SimpleNamespace(getbasetemp=lambda: base)
        session = SimpleNamespace(config=SimpleNamespace(_tmp_path_factory=factory), exitstatus=0)
        scan = SecretScan()
        scan.outputs.append(("captured", f"token {society.token()} printed"))
        scan.pytest_sessionfinish(session)  # type: ignore[arg-type]
        where = sorted(leak.where for leak in scan.leaks)
        assert where == sorted(["captured", str(logs / "hub.log")]), where
        assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
        assert "2 LEAKS" in scan.summary


def test_a_workers_leak_reaches_the_controller_and_fails_the_run() -> None:
    """Under pytest-xdist each worker scans its own folder; what it found travels in its
    workeroutput, and the controller fails the run on it without scanning that folder again."""
    import tempfile
    from types import SimpleNamespace

    from tests.reliability.secretscan import WORKER_KEY, SecretScan

    def session_over(base: Path, **config: object) -> SimpleNamespace:
        factory = SimpleNamespace(getbasetemp=lambda: base)
        return SimpleNamespace(config=SimpleNamespace(_tmp_path_factory=factory, **config),
                               exitstatus=0)  # fmt: skip

    with tempfile.TemporaryDirectory() as elsewhere:
        controller_base = Path(elsewhere)
        worker_base = controller_base / "popen-gw0"
        society = Society(worker_base / "home")
        leaked = worker_base / "home" / "test-logs" / "hub.log"
        leaked.parent.mkdir()
        leaked.write_text(f"secret={society.secret().decode()}\n")
        worker, sent = SecretScan(), {}
        worker.pytest_sessionfinish(session_over(worker_base, workeroutput=sent))  # type: ignore[arg-type]
        assert [leak.where for leak in worker.leaks] == [str(leaked)]
        assert sent[WORKER_KEY]["counts"]["homes"] == 1

        controller = SecretScan()
        controller.pytest_testnodedown(SimpleNamespace(workeroutput=sent), None)
        session = session_over(controller_base)
        controller.pytest_sessionfinish(session)  # type: ignore[arg-type]
        assert [leak.where for leak in controller.leaks] == [str(leaked)]  # reported once
        assert (
            controller.counts["homes"] == 1 and session.exitstatus == pytest.ExitCode.TESTS_FAILED
        )
        assert "1 LEAKS" in controller.summary
