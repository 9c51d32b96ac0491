"""A lurker handler kind that runs an MCP-speaking agent for each message.

For every message that wakes the nick, the lurker

1. renders a prompt from the message (who asked, its id, thread, body and
   data, and exactly which room_say call answers it);
2. writes an MCP client configuration that starts `bullpen mcp --as NICK`
   for this home, and passes its path to the agent in the environment
   (BULLPEN_MCP_CONFIG) and in the `{mcp_config}` placeholder of the argv;
3. starts the agent command in its own process group, the prompt in the
   `{prompt}` placeholder (or on stdin when the argv has no `{prompt}`);
4. when the agent exits (or overruns the nick's timeout and its whole
   process group is stopped), looks in the room for the agent's reply: a
   line from NICK with in_reply_to = the message's id.

The agent answers by calling room_say itself, so the reply is the agent's own
verified post and the lurker posts nothing more. An agent that exits, fails or
times out without replying gets a `[NICK FAILED — reason]` reply with the tail of
its output in data: never silence. Its stdout is never posted as the answer:
a headless agent's stdout is its narration, not a reply it chose to make.

Configure it with `mcp_agent = [...]` under [nicks.NICK] (see docs/mcp.md),
or, with no change to the lurker, as a Python step:

    [nicks.coder]
    handler = "agents.mcp.handler:agent_step"
    options = { mcp_agent = ["my-agent", "-p", "{prompt}"] }
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agents.mcp.check import agent_argv
from agents.memory.lessons import Lesson, block
from agents.runtime.outcome import Failure, Handler, Outbox, Outcome
from agents.runtime.procgroup import feed, kill_group, read_tail
from room.errors import BullpenError, ConfigError, HubUnavailable, StepFailed
from room.message import Message

if TYPE_CHECKING:
    from agents.config import NickConfig
    from agents.home import Home
    from agents.runtime.step import StepContext

log = structlog.get_logger("agents.mcp.handler")

SERVER_NAME = "bullpen"  # the MCP server's name in the generated configuration
CONFIG_ENV = "BULLPEN_MCP_CONFIG"
STDOUT_TAIL = 4000
STDERR_TAIL = 2000
READER_GRACE_S = 2.0  # after the agent exits, how long its output pipes may stay open
FIND_ATTEMPTS = 5  # looking for the agent's reply while the hub is unreachable

DEFAULT_PROMPT = """\
You are @{nick}, a member of a bullpen society: agents and people who talk through one shared room.
You reach the room only through the MCP tools of the server "{server}": room_say, room_read and room_thread.

@{sender} sent you this {type} (message id {id}, thread {thread}):

{body}
{data}
Do what it asks. Then answer exactly once by calling room_say with these arguments, your answer in "body" (and any machine-readable result as a JSON object in "data"):

{reply_args}

If you cannot do it, still call room_say with those arguments and say why in "body".
Only room_say reaches @{sender}; nothing you print is posted.
"""

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Literal, single-pass substitution: `{name}` becomes its value; nothing else changes.

    A value is never scanned again, so a message body holding `{id}` or `$1`
    stays as it is, and braces that name no value are left alone.
    """
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def reply_arguments(message: Message) -> dict[str, Any]:
    """The room_say arguments that answer `message` (all but the body)."""
    args: dict[str, Any] = {
        "to": f"@{message.from_}",
        "type": "reply",
        "in_reply_to": message.id,
    }
    if message.thread:
        args["thread"] = message.thread
    return args


def render_prompt(
    message: Message, nick: str, template: str | None = None, lessons: Sequence[Lesson] = ()
) -> str:
    """The agent's prompt; it starts with the wake's lessons block when there are lessons."""
    data = ""
    if message.data is not None:
        data = (
            "\nIts data (JSON):\n\n" + json.dumps(message.data, ensure_ascii=False, indent=2) + "\n"
        )
    return block(list(lessons)) + fill(
        template or DEFAULT_PROMPT,
        {
            "nick": nick,
            "server": SERVER_NAME,
            "sender": message.from_,
            "type": message.type,
            "id": message.id,
            "seq": str(message.seq),
            "thread": message.thread or "(none)",
            "body": message.body,
            "data": data,
            "reply_args": json.dumps(reply_arguments(message), ensure_ascii=False),
        },
    )


def server_command(home: Home, nick: str, *, relaxed: bool) -> list[str]:
    """The command that serves this home's room as `nick` over stdio."""
    return [
        sys.executable,
        "-m",
        "agents.cli",
        "--home",
        str(home.root),
        "mcp",
        "--as",
        nick,
        "--relaxed" if relaxed else "--no-relaxed",
    ]


def client_config(home: Home, nick: str, *, relaxed: bool) -> dict[str, Any]:
    """An MCP client configuration (the `mcpServers` form) naming one server: the room as `nick`.

    It holds no secret: the server reads the nick's proof from the home itself.
    """
    command = server_command(home, nick, relaxed=relaxed)
    return {"mcpServers": {SERVER_NAME: {"command": command[0], "args": command[1:], "env": {}}}}


def redact(text: str, home: Home) -> str:
    """The agent's output with this home's shared secret and relaxed token cut out.

    The tail of what the agent printed goes into a room post; an agent that
    echoed its environment or a file must not carry the society's secrets there.
    """
    for load in (home.secret, home.relaxed_token):
        try:
            secret = load().decode("utf-8", "replace")
        except (BullpenError, OSError):
            continue
        if len(secret) >= 8:
            text = text.replace(secret, "<redacted>")
    return text


def _result(task: asyncio.Future[bytes], done: set[Any]) -> bytes:
    if task not in done or task.exception() is not None:
        return b""
    return task.result()


async def find_reply(
    home: Home, nick: str, message: Message, *, relaxed: bool
) -> dict[str, Any] | None:
    """The line in which `nick` answered `message`, or None; raise HubUnavailable if unsure."""
    delay = 0.5
    for attempt in range(FIND_ATTEMPTS):
        try:
            # No proof is needed to read: a client without a signer, so a missing
            # secret cannot stop the look-up (the relaxed listener still needs its token).
            async with home.client(None, relaxed=relaxed) as client:
                after = message.seq
                while True:
                    lines, last = await client.read(after, 1000, sender=nick)
                    for line in lines:
                        if line.get("in_reply_to") == message.id:
                            return line
                    if len(lines) < 1000:
                        return None
                    after = last
        except HubUnavailable:
            if attempt == FIND_ATTEMPTS - 1:
                raise
            await asyncio.sleep(delay)
            delay *= 2
    return None


async def run_agent(
    message: Message,
    *,
    home: Home,
    nick: str,
    argv: list[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    relaxed: bool = False,
    prompt_template: str | None = None,
    lessons: Sequence[Lesson] = (),
) -> Outcome:
    """Run the agent for one message; an empty Outbox when it replied, else a Failure."""
    prompt = render_prompt(message, nick, prompt_template, lessons)
    workdir = Path(tempfile.mkdtemp(prefix=f"bullpen-mcp-{nick}-"))
    try:
        config_path = workdir / "mcp.json"
        config_path.write_text(
            json.dumps(client_config(home, nick, relaxed=relaxed), indent=2) + "\n",
            encoding="utf-8",
        )
        config_path.chmod(0o600)
        values = {
            "prompt": prompt,
            "mcp_config": str(config_path),
            "nick": nick,
            "message_id": message.id,
            "thread": message.thread or "",
            "sender": message.from_,
            "home": str(home.root),
        }
        command = [fill(word, values) for word in argv]
        prompt_on_stdin = not any("{prompt}" in word for word in argv)
        child_env = {
            **os.environ,
            **(env or {}),
            "BULLPEN_NICK": nick,
            "BULLPEN_HOME": str(home.root),
            "BULLPEN_MESSAGE_ID": message.id,
            "BULLPEN_THREAD": message.thread or "",
            "BULLPEN_SENDER": message.from_,
            CONFIG_ENV: str(config_path),
        }
        return await _run(
            message,
            home=home,
            nick=nick,
            command=command,
            env=child_env,
            stdin=prompt.encode() if prompt_on_stdin else None,
            timeout=timeout,
            relaxed=relaxed,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _run(
    message: Message,
    *,
    home: Home,
    nick: str,
    command: list[str],
    env: dict[str, str],
    stdin: bytes | None,
    timeout: float,
    relaxed: bool,
) -> Outcome:
    program = command[0]
    bound = log.bind(nick=nick, id=message.id, agent=program)
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: stopped whole, never by name
        )
    except OSError as exc:
        return Failure(
            f"cannot start the agent {program!r} ({exc.strerror}); check mcp_agent under "
            f"[nicks.{nick}]"
        )
    bound.info("agent started", pid=proc.pid)
    readers = [
        asyncio.ensure_future(read_tail(proc.stdout, STDOUT_TAIL)),
        asyncio.ensure_future(read_tail(proc.stderr, STDERR_TAIL)),
    ]
    feeder = asyncio.ensure_future(feed(proc.stdin, stdin or b""))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
        await kill_group(proc)
    except asyncio.CancelledError:
        await kill_group(proc)
        for task in (*readers, feeder):
            task.cancel()
        raise
    if not timed_out:
        await kill_group(proc)  # what the agent left running in its group (its MCP server)
    # Output pipes close when the group is gone; a descendant that left the group
    # may hold them open, so wait only briefly.
    done, pending = await asyncio.wait([*readers, feeder], timeout=READER_GRACE_S)
    for task in pending:
        task.cancel()
    out, err = (_result(task, done) for task in readers)
    details: dict[str, Any] = {
        "exit_code": proc.returncode,
        "stdout": redact(out.decode("utf-8", "replace"), home),
        "stderr": redact(err.decode("utf-8", "replace"), home),
    }
    try:
        found = await find_reply(home, nick, message, relaxed=relaxed)
    except BullpenError as exc:
        return Failure(f"could not look for the agent's reply in the room: {exc.message}", details)
    if found is not None:
        bound.info(
            "the agent replied through MCP",
            seq=found.get("seq"),
            exit_code=proc.returncode,
            timed_out=timed_out,
        )
        return Outbox([])  # the reply is in the room already, posted by the agent itself
    if timed_out:
        reason = f"timed out after {timeout:g} s without replying; the agent was stopped"
        details["timeout_s"] = timeout
    elif proc.returncode != 0:
        reason = f"the agent {program} exited with status {proc.returncode} without replying"
    else:
        reason = (
            f"the agent {program} exited without replying: it must call room_say with "
            f'in_reply_to = "{message.id}"'
        )
    bound.warning("the agent did not reply", reason=reason)
    return Failure(reason, details)


class McpAgentHandler(Handler):
    """The `mcp_agent` handler kind: an MCP-speaking agent that replies through room_say."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        *,
        relaxed: bool = False,
        prompt_template: str | None = None,
    ) -> None:
        if not argv:
            raise ConfigError("mcp_agent must name a program, like ['my-agent', '-p', '{prompt}']")
        self.argv = list(argv)
        self.env = dict(env or {})
        self.relaxed = relaxed
        self.prompt_template = prompt_template

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        try:
            return await run_agent(
                message,
                home=ctx.home,
                nick=ctx.nick,
                argv=self.argv,
                timeout=timeout,
                env=self.env,
                relaxed=self.relaxed,
                prompt_template=self.prompt_template,
                lessons=ctx.lessons,
            )
        except BullpenError as exc:
            return Failure(exc.message, exc.to_dict())
        except Exception as exc:  # never silence: the lurker posts it as FAILED
            log.exception("the MCP agent handler raised", nick=ctx.nick, id=message.id)
            return Failure(f"{type(exc).__name__}: {exc}")


def load(config: NickConfig) -> McpAgentHandler:
    """The handler for a [nicks.X] table with `mcp_agent = [...]`."""
    argv = agent_argv(config)
    if not argv:
        raise ConfigError("mcp_agent must name a program, like ['my-agent', '-p', '{prompt}']")
    template = config.options.get("mcp_prompt")
    return McpAgentHandler(
        argv,
        config.env,
        relaxed=config.relaxed,
        prompt_template=template if isinstance(template, str) else None,
    )


def _grace(timeout: float) -> float:
    """How much earlier than the lurker's own timeout the step stops its agent.

    Stopping the agent's group and reading the room for its reply must fit in this
    margin, or the lurker's timeout wins and flags an agent that did reply: a tenth
    of an 8 s timeout (0.8 s) was too thin on a loaded machine, a quarter is not.
    """
    return min(5.0, timeout / 4)


async def agent_step(message: Message, ctx: StepContext) -> Outcome:
    """The same handler as a Python step: `handler = "agents.mcp.handler:agent_step"`.

    It reads the agent command from `options.mcp_agent` and stops the agent a
    little before the lurker's own timeout, so that it can still look for a
    reply the agent made before it hung.
    """
    config = ctx.home.society.nicks.get(ctx.nick)
    argv = ctx.options.get("mcp_agent")
    if not (isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv)):
        raise StepFailed(
            f"options.mcp_agent under [nicks.{ctx.nick}] must be a command list, like "
            '["my-agent", "-p", "{prompt}"]'
        )
    timeout = config.timeout_s if config is not None else 120.0
    template = ctx.options.get("mcp_prompt")
    return await run_agent(
        message,
        home=ctx.home,
        nick=ctx.nick,
        argv=argv,
        timeout=timeout - _grace(timeout),
        env=config.env if config is not None else None,
        relaxed=config.relaxed if config is not None else False,
        prompt_template=template if isinstance(template, str) else None,
        lessons=ctx.lessons,
    )
