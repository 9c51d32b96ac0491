"""The cmd seat, running tests/fakes/fake_model.py as the external program."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agents.runtime.step import JudgmentRequest
from agents.seats import CmdSeat, CmdSeatConfig
from room.errors import SeatError
from tests.support import pid_alive, wait_for

if TYPE_CHECKING:
    from conftest import FakeModel


def seat(fake: FakeModel, **extra: object) -> CmdSeat:
    return CmdSeat("bulk", CmdSeatConfig.model_validate(fake.table(**extra)))


PROMPT = 'step: analysis\nTrace:\n  a & b $1 \\1 "quoted"\nReturn JSON.'


def ask(prompt: str = PROMPT, step: str = "analysis") -> JudgmentRequest:
    return JudgmentRequest(step=step, prompt=prompt)


class TestCmdSeat:
    def test_stdout_is_the_completion(self, fake_model: FakeModel) -> None:
        """The program's stdout comes back as the completion text, byte for byte."""
        fake_model.script = {"analysis": ['{"positive": [], "negative": [], "gaps": ["é"]}\n']}
        text = asyncio.run(seat(fake_model).complete(ask()))
        assert text == '{"positive": [], "negative": [], "gaps": ["é"]}\n'

    def test_the_prompt_arrives_on_stdin_unchanged(self, fake_model: FakeModel) -> None:
        """The program reads exactly the prompt, `step: X` first, with &, $ and \\1 intact."""
        fake_model.script = {"analysis": "{}"}
        asyncio.run(seat(fake_model).complete(ask()))
        [call] = fake_model.calls()
        assert call["prompt"] == PROMPT
        assert call["step"] == "analysis"

    def test_consecutive_calls_walk_the_script(self, fake_model: FakeModel) -> None:
        """Each call is a new process, and the script's answers are used in order."""
        fake_model.script = {"analysis": ['{"n": 1}', '{"n": 2}']}
        cmd = seat(fake_model)
        assert asyncio.run(cmd.complete(ask())) == '{"n": 1}'
        assert asyncio.run(cmd.complete(ask())) == '{"n": 2}'
        assert len({call["pid"] for call in fake_model.calls()}) == 2

    def test_table_env_reaches_the_program(self, fake_model: FakeModel) -> None:
        """The table's env is added to the program's environment (the script path is one)."""
        fake_model.script = {"*": "ok"}
        table = fake_model.table()
        table["env"]["FAKE_MODEL_SCRIPT"] = str(fake_model.folder / "elsewhere.json")
        (fake_model.folder / "elsewhere.json").write_text('{"*": "from elsewhere"}')
        cmd = CmdSeat("bulk", CmdSeatConfig.model_validate(table))
        assert asyncio.run(cmd.complete(ask())) == "from elsewhere"

    def test_non_zero_exit_reports_code_and_stderr_tail(self, fake_model: FakeModel) -> None:
        """A failing program's exit code and the last lines of its stderr are in the error."""
        stderr = "".join(f"noise {n}\n" for n in range(20)) + "model not loaded\n"
        fake_model.script = {"analysis": [{"exit": 3, "stderr": stderr, "stdout": "{}"}]}
        with pytest.raises(SeatError) as caught:
            asyncio.run(seat(fake_model).complete(ask()))
        message = caught.value.message
        assert message.startswith("seat 'bulk' (cmd): ")
        assert "exited with code 3" in message
        assert "model not loaded" in message
        assert "noise 0" not in message  # only the tail

    def test_timeout_kills_the_whole_process_group(self, fake_model: FakeModel) -> None:
        """A program past its timeout is killed with everything it started, and the call fails."""
        fake_model.script = {"analysis": [{"sleep": 60, "spawn_child": True}]}
        started = time.monotonic()
        with pytest.raises(SeatError, match=r"did not answer within 1 s; its process group"):
            asyncio.run(seat(fake_model, timeout_s=1).complete(ask()))
        assert time.monotonic() - started < 10
        [call] = fake_model.calls()
        assert call["pgid"] == call["pid"]  # the seat gave it a group of its own
        wait_for(lambda: not pid_alive(call["pid"]), 10, "the program to be gone")
        wait_for(lambda: not pid_alive(call["child"]), 10, "the program's child to be gone")

    def test_cancellation_kills_the_process_group(self, fake_model: FakeModel) -> None:
        """A judgment cancelled mid-call leaves no process behind."""
        fake_model.script = {"analysis": [{"sleep": 60, "spawn_child": True}]}

        async def cancel_once_running() -> None:
            task = asyncio.create_task(seat(fake_model, timeout_s=60).complete(ask()))
            deadline = time.monotonic() + 10
            while not fake_model.calls():
                assert time.monotonic() < deadline, "the fake model never started"
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_once_running())
        [call] = fake_model.calls()
        wait_for(lambda: not pid_alive(call["pid"]), 10, "the program to be gone")
        wait_for(lambda: not pid_alive(call["child"]), 10, "the program's child to be gone")

    def test_a_missing_program_says_so(self, tmp_path: Path) -> None:
        """A command that does not exist fails naming the program and the key to fix."""
        config = CmdSeatConfig.model_validate(
            {"kind": "cmd", "command": [str(tmp_path / "no-such-model")]}
        )
        with pytest.raises(
            SeatError, match=r"cannot start .*no-such-model.*\[seats.bulk\] command"
        ):
            asyncio.run(CmdSeat("bulk", config).complete(ask()))

    def test_a_program_that_ignores_stdin_still_answers(self) -> None:
        """A program that never reads its stdin does not break the call."""
        config = CmdSeatConfig.model_validate(
            {"kind": "cmd", "command": [sys.executable, "-c", "print('{}')"]}
        )
        text = asyncio.run(CmdSeat("bulk", config).complete(ask("step: analysis\n" + "x" * 10**6)))
        assert text == "{}\n"
