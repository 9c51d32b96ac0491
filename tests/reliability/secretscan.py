"""The session-wide secret scan: no secret value may appear anywhere a test can see.

Registered by tests/conftest.py. At the end of the run it collects every
secret of every home the run created (the shared secret, the relaxed token,
the hub's and every nick's private key, found under each home's `secrets/`)
and looks for them in:

- every file under the run's temporary folder outside a `secrets/` folder:
  rooms, side files, cursors, nonce journals, checkpoints, and the logs of
  every hub and lurker process;
- every CLI output run through tests.support.run_cli, and every output
  recorded with tests.support.record_output (HTTP error bodies, say);
- every test's captured stdout, stderr and log, and failure reports.

A leak fails the run (exit status 1) and is named in the summary.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MIN_SECRET = 16  # shorter strings would match by accident


def _key_material(pem: bytes) -> list[bytes]:
    """What of a PEM private key must never show: its base64 body, and the raw key in hex and base64."""
    found = [line for line in pem.splitlines() if line and not line.startswith(b"-----")]
    body = b"".join(found)
    out = [body, *found]
    try:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(pem, password=None)
        raw = key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        out += [raw.hex().encode(), base64.b64encode(raw)]
    except (ValueError, TypeError):
        pass
    return out


def secrets_of(home_secrets: Path) -> dict[bytes, str]:
    """Every secret value under one home's secrets/ folder, with a name for the report."""
    found: dict[bytes, str] = {}
    for path in home_secrets.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        values = _key_material(data) if b"PRIVATE KEY" in data else [data.strip()]
        for value in values:
            if len(value) >= MIN_SECRET:
                found[value] = str(path)
    return found


@dataclass
class Leak:
    secret_from: str
    where: str


@dataclass(eq=False)  # a plugin object must stay hashable
class SecretScan:
    outputs: list[tuple[str, str]] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    summary: str = ""

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        texts = [content for _, content in report.sections]
        if report.failed:
            texts.append(report.longreprtext)
        if texts:
            self.outputs.append((f"{report.nodeid} ({report.when})", "\n".join(texts)))

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from tests import support

        factory = getattr(session.config, "_tmp_path_factory", None)
        base = factory.getbasetemp() if factory is not None else None
        secrets: dict[bytes, str] = {}
        homes = 0
        if base is not None and base.exists():
            for folder in base.rglob("secrets"):
                if folder.is_dir() and not folder.is_symlink():
                    homes += 1
                    secrets.update(secrets_of(folder))
        files = self._scan_files(base, secrets) if base is not None else 0
        outputs = [*support.RECORDED_OUTPUTS, *self.outputs]
        for where, text in outputs:
            data = text.encode("utf-8", "replace")
            for value, name in secrets.items():
                if value in data:
                    self.leaks.append(Leak(name, where))
        self.summary = (
            f"secret scan: {len(secrets)} secret values from {homes} homes, {files} files, "
            f"{len(outputs)} outputs: "
            + ("no secret found" if not self.leaks else f"{len(self.leaks)} LEAKS")
        )
        if self.leaks:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _scan_files(self, base: Path, secrets: dict[bytes, str]) -> int:
        count = 0
        for root, dirs, names in os.walk(base):
            dirs[:] = [d for d in dirs if d != "secrets"]
            for name in names:
                path = Path(root) / name
                if path.is_symlink() or name.endswith(".key") or not path.is_file():
                    continue  # a FIFO left by a test would block the read forever
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                count += 1
                for value, secret_name in secrets.items():
                    if value in data:
                        self.leaks.append(Leak(secret_name, str(path)))
        return count

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.summary:
            return
        terminalreporter.write_line(self.summary)
        for leak in self.leaks[:50]:
            terminalreporter.write_line(f"  LEAK of {leak.secret_from} in {leak.where}")
