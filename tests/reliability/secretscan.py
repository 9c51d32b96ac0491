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

A leak fails the run (exit status 1) and is named in the summary. Under
pytest-xdist each worker scans its own folder (SecretScan), all secrets in one
pass per file (Matcher), and the controller adds up what they found.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ahocorasick_rs
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


class Matcher:
    """Every secret at once, in one pass over each text (Aho-Corasick, ahocorasick-rs).

    A run makes some 400 homes and 2,400 secret values; looking for each in turn over
    its 24,000 files took minutes of one core at the end of every run (a 149 MB room
    alone: 51 s; in one pass: 1.4 s).
    """

    def __init__(self, secrets: dict[bytes, str]) -> None:
        self._names = list(secrets.values())
        self._automaton = ahocorasick_rs.BytesAhoCorasick(list(secrets)) if secrets else None

    def found(self, data: bytes) -> set[str]:
        """The names of the secrets that occur in `data`."""
        if self._automaton is None:
            return set()
        matches = self._automaton.find_matches_as_indexes(data, overlapping=True)
        return {self._names[index] for index, _, _ in matches}


WORKER_KEY = "bullpen_secret_scan"


@dataclass(eq=False)  # a plugin object must stay hashable
class SecretScan:
    """Registered once per pytest process. Under pytest-xdist each worker scans its own
    temporary folder against its own homes' secrets and its own tests' outputs (every home
    and every process a test starts lives in its worker's folder), and the controller adds
    up what the workers sent, scanning itself only what no worker reported on."""

    outputs: list[tuple[str, str]] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    summary: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    scanned: list[Path] = field(default_factory=list)  # folders a worker reported on

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        texts = [content for _, content in report.sections]
        if report.failed:
            texts.append(report.longreprtext)
        if texts:
            self.outputs.append((f"{report.nodeid} ({report.when})", "\n".join(texts)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist's controller: one worker is done, with its scan in its output."""
        found = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if found is None:
            return  # a worker that died: the controller scans its folder itself
        self._add(found["counts"])
        self.leaks += [Leak(secret_from, where) for secret_from, where in found["leaks"]]
        self.scanned.append(Path(found["base"]))

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from tests import support

        factory = getattr(session.config, "_tmp_path_factory", None)
        base = factory.getbasetemp() if factory is not None else None
        folders, files = self._walk(base) if base is not None and base.exists() else ([], [])
        secrets: dict[bytes, str] = {}
        for folder in folders:
            secrets.update(secrets_of(folder))
        matcher = Matcher(secrets)
        scanned = sum(self._scan(path, matcher) for path in files)
        outputs = [*support.RECORDED_OUTPUTS, *self.outputs]
        for where, text in outputs:
            found = matcher.found(text.encode("utf-8", "replace"))
            self.leaks += [Leak(name, where) for name in found]
        # A controller's outputs are its workers' reports, scanned and counted by each worker.
        counted = 0 if self.scanned else len(outputs)
        self._add(
            {"secrets": len(secrets), "homes": len(folders), "files": scanned, "outputs": counted}
        )
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and base is not None:  # an xdist worker: tell the controller
            workeroutput[WORKER_KEY] = {
                "counts": self.counts,
                "leaks": [(leak.secret_from, leak.where) for leak in self.leaks],
                "base": str(base),
            }
        c = self.counts
        self.summary = (
            f"secret scan: {c['secrets']} secret values from {c['homes']} homes, "
            f"{c['files']} files, {c['outputs']} outputs: "
            + ("no secret found" if not self.leaks else f"{len(self.leaks)} LEAKS")
        )
        if self.leaks:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _add(self, counts: dict[str, int]) -> None:
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value

    def _walk(self, base: Path) -> tuple[list[Path], list[Path]]:
        """One walk of `base`, outside the folders a worker scanned: every real `secrets`
        folder (a home's), and every other file, not counting what is in those folders."""
        folders: list[Path] = []
        files: list[Path] = []
        for root, dirs, names in os.walk(base):
            dirs[:] = [d for d in dirs if Path(root, d) not in self.scanned]
            for d in dirs:
                if d == "secrets" and not Path(root, d).is_symlink():
                    folders.append(Path(root, d))
            dirs[:] = [d for d in dirs if d != "secrets"]
            files += [Path(root, name) for name in names]
        return folders, files

    def _scan(self, path: Path, matcher: Matcher) -> int:
        """Look in one file for every secret: 1 if it was read, 0 if it is not a file to read."""
        if path.is_symlink() or path.name.endswith(".key") or not path.is_file():
            return 0  # a FIFO left by a test would block the read forever
        try:
            data = path.read_bytes()
        except OSError:
            return 0
        self.leaks += [Leak(secret_from, str(path)) for secret_from in matcher.found(data)]
        return 1

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.summary:
            return
        terminalreporter.write_line(self.summary)
        for leak in self.leaks[:50]:
            terminalreporter.write_line(f"  LEAK of {leak.secret_from} in {leak.where}")
