"""`bullpen witness`: poll a hub's checkpoint, check it extends the last one, cosign it.

Its own process (systemd/bullpen-witness.service), on the hub's host or any
other that can reach the hub: it needs the hub's URL, read token and
verifier key, and keeps its own key and state. What it decides is
trust/witness.py; this module is the loop around it. A hub that shows an
inconsistent checkpoint is refused (no cosignature), logged, and reported in
the room as a post to the operator whose data says what was seen.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agents.cli.verify import hub_verifier
from agents.home import Home
from room.client import RoomClient
from room.errors import BullpenError, UsageError
from room.tlogclient import TlogClient
from room.version import __version__
from trust import keys, note
from trust.note import NoteError, TreeHead, Verifier
from trust.tlogverify import checked_note
from trust.witness import Refusal, WitnessState, judge

log = structlog.get_logger("agents.witness")


class Witness:
    """One hub watched by one witness key."""

    def __init__(
        self,
        client: TlogClient,
        hub: Verifier,
        key: Ed25519PrivateKey,
        name: str,
        state: WitnessState,
    ) -> None:
        self.client = client
        self.hub = hub
        self.key = key
        self.name = name
        self.verifier = note.verifier_of(name, key, note.COSIGNATURE)
        self.state = state

    def poll(self) -> TreeHead:
        """Fetch, check, record, cosign; raise Refusal, NoteError or a BullpenError."""
        text = self.client.checkpoint()
        head = checked_note(text, self.hub)
        judge(self.state, head, self.client.consistency)
        self.state.record(head)  # durable before the cosignature leaves
        signed = note.parse(text)
        line = note.cosign(signed.text, self.name, self.key, int(time.time()))
        self.client.cosign(note.Note(signed.text, [line]).render(), self.verifier.text())
        return head


def _report(home: Home | None, url: str, nick: str, refusal: Refusal, hub: str) -> None:
    """Say in the room that the hub was refused (best effort: the log has it regardless)."""
    operator = home.society.operator if home is not None and home.society_file.exists() else None
    body = (
        f"witness {hub}: REFUSED the hub's checkpoint ({refusal.kind}): {refusal.message}. "
        "Do not trust checkpoints from this hub until it is explained (`bullpen docs audit`)"
    )
    data = {"tlog": "refused", "kind": refusal.kind, "origin": hub}

    async def post() -> None:
        client = (
            home.client(nick)
            if home is not None and home.society_file.exists()
            else RoomClient(url, nick=nick)
        )
        async with client:
            await client.say(f"@{operator or 'operator'}", body, data=data)

    try:
        asyncio.run(post())
    except (BullpenError, ValueError) as exc:
        log.error("could not report the refusal in the room", error=str(exc))


def _key(path: Path) -> Ed25519PrivateKey:
    if not path.exists() and not path.is_symlink():
        key = keys.generate_private_key(path)
        log.warning("made a new witness key", path=str(path))
        return key
    return keys.load_private_key(path, fix="restore it from a backup")


def cmd_witness(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    has_home = home.society_file.exists()
    if not has_home and not (args.hub and args.hub_key and args.key_file and args.state):
        raise UsageError(
            "without a home, give --hub URL, --hub-key KEY, --key-file FILE and --state FILE"
        )
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in ".-") or "host"
    name = args.name or f"witness/{host}"
    key_file = Path(args.key_file) if args.key_file else home.root / "secrets" / "witness.key"
    key = _key(key_file)
    try:
        verifier = note.verifier_of(name, key, note.COSIGNATURE)
    except NoteError as exc:
        raise UsageError(f"--name: {exc}") from None
    if args.show_key:
        print(verifier.text())
        return 0
    try:
        hub = note.parse_verifier(args.hub_key) if args.hub_key else hub_verifier(home)
    except NoteError as exc:
        raise UsageError(f"--hub-key: {exc}") from None
    url = args.hub or home.society.hub.strict_url()
    token = (
        Path(args.read_token_file).read_bytes().strip()
        if args.read_token_file
        else home.read_token()
    )
    state_path = Path(args.state) if args.state else home.state_dir("witness") / "state.json"
    try:
        state = WitnessState(state_path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    client = TlogClient(url, token)
    witness = Witness(client, hub, key, name, state)
    log.info("witnessing", hub=url, origin=hub.name, witness=verifier.text(), version=__version__)
    reported: set[tuple[str, int, bytes]] = set()
    try:
        while True:
            ok = False
            try:
                head = witness.poll()
                ok = True
                log.info("cosigned", origin=head.origin, size=head.size)
            except Refusal as refusal:
                log.error("refused the hub's checkpoint", kind=refusal.kind, why=refusal.message)
                print(f"bullpen witness: REFUSED: {refusal.message}", file=sys.stderr, flush=True)
                seen = state.last(hub.name)
                mark = (refusal.kind, seen.size if seen else 0, seen.root if seen else b"")
                if mark not in reported:
                    reported.add(mark)
                    _report(home if has_home else None, url, args.as_nick, refusal, hub.name)
            except NoteError as exc:
                log.error("the hub's checkpoint does not verify; not cosigned", why=str(exc))
            except BullpenError as exc:
                log.warning("could not witness this time", why=exc.message)
            if args.once:
                return 0 if ok else 1
            time.sleep(args.interval)
    finally:
        client.close()
