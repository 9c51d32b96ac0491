"""A bullpen home: the folder that holds one society's configuration, secrets and room.

society.toml     who runs and how (agents.config)
trust.toml       PRIVILEGED and TRUST (trust.table)
secrets/         post-secret, relaxed-token, read-token, hub.key, keys/<nick>.key (all 0600)
room/room.jsonl  the room (its place is configurable)
state/<nick>/    each lurker's cursor and flags (under systemd: $STATE_DIRECTORY/<nick>)
secrets/gateway/<nick>.token   a caller's token for the model gateway (0600)
gateway/ledger.jsonl           one line per model call through the gateway
objects/<sha256> what steps hand each other across hosts (a JSONL room's hub; 0700/0600)
home.toml        the bullpen that made the home and each file family's format (agents.formats)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from agents import config as society
from room.errors import ConfigError, SecretFileError
from room.logs import register_secret
from trust import table as trust_table
from trust.proof import KeySigner, SecretSigner, Signer
from trust.screen import HomeSecrets
from trust.secretfiles import ensure_secret_text, read_secret_text

if TYPE_CHECKING:
    from room.client import RoomClient

DEFAULT_HOME = Path("~/.config/bullpen")
DEFAULT_GATEWAY_LISTEN = "127.0.0.1:8090"


def resolve(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--home, else $BULLPEN_HOME, else ~/.config/bullpen."""
    chosen = explicit or os.environ.get("BULLPEN_HOME") or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass
class Home:
    root: Path
    # whether steps acting for this home may store objects in the room's engine
    # (agents/objects): a replay's private copy reads them, and stores none
    stores_objects = True
    _society_sha256: str | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def at(cls, explicit: str | os.PathLike[str] | None = None) -> Home:
        return cls(resolve(explicit))

    @property
    def society_file(self) -> Path:
        return self.root / "society.toml"

    @property
    def trust_file(self) -> Path:
        return self.root / "trust.toml"

    @cached_property
    def society(self) -> society.SocietyConfig:
        config, self._society_sha256 = society.load_stamped(self.society_file)
        return config

    @property
    def society_sha256(self) -> str:
        """SHA-256 of the society.toml bytes `society` was parsed from, read once with it: a
        lurker's pong names it, so `bullpen trust check` and `bullpen build` see a process
        still running on a society.toml edited since it started (agents/runtime/ping.py)."""
        _ = self.society  # the digest comes with the load, of the same bytes
        if self._society_sha256 is None:  # a config set by code (a replay's shadow home)
            self._society_sha256 = hashlib.sha256(self.society_file.read_bytes()).hexdigest()
        return self._society_sha256

    @cached_property
    def trust(self) -> trust_table.TrustTable:
        return trust_table.load(self.trust_file)

    def homes(self) -> tuple[Path, ...]:
        """Every bullpen home this process acts for, resolved: the folders a fence hides from
        model-written code. One, except in a replay, whose private copy adds the original."""
        return (self.root.resolve(),)

    def path(self, value: str) -> Path:
        candidate = Path(value).expanduser()
        return candidate if candidate.is_absolute() else self.root / candidate

    @cached_property
    def screen(self) -> HomeSecrets:
        """This home's secret set: what no prompt, post, commit or PR body may hold."""
        if not self.trust_file.exists():  # a bare folder (a backpass's only): secrets/ alone
            return HomeSecrets(None, self.root / "secrets")
        return HomeSecrets(self.trust, self.root / "secrets")

    @property
    def objects_dir(self) -> Path:
        """Where a JSONL room's hub keeps the objects steps hand on (room/objectstore.py)."""
        return self.root / "objects"

    @property
    def room_path(self) -> Path:
        return self.path(self.society.room.path)

    def state_dir(self, nick: str) -> Path:
        """A lurker's own folder; systemd's $STATE_DIRECTORY wins when it is set."""
        base = os.environ.get("STATE_DIRECTORY")
        return Path(base.split(":")[0]) / nick if base else self.home_state_dir(nick)

    def home_state_dir(self, nick: str) -> Path:
        """`state/<nick>` in the home: where `bullpen up` keeps a lurker's state."""
        return self.root / "state" / nick

    @property
    def unit_state_name(self) -> str:
        """The units' StateDirectory=: one per home, so two homes never share a cursor."""
        digest = hashlib.sha256(str(self.root).encode("utf-8")).hexdigest()[:12]
        return f"bullpen-lurkers/{digest}"

    def unit_state_dirs(self, nick: str) -> list[Path]:
        """Where a lurker under systemd keeps its state: user units put StateDirectory= in
        $XDG_CONFIG_HOME up to systemd 252 (Debian 12) and in $XDG_STATE_HOME after."""
        bases = (
            os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config",
            os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state",
        )
        return [Path(base) / self.unit_state_name / nick for base in bases]

    def state_dirs(self, nick: str) -> list[Path]:
        """Every place this nick's state may be: where it runs now first, then the others."""
        found: list[Path] = []
        for where in (self.state_dir(nick), self.home_state_dir(nick), *self.unit_state_dirs(nick)):
            if where not in found:
                found.append(where)
        return found

    def wake_replies_flagged(self, nick: str) -> bool:
        """The seed's flag file `.wakereplies`, honoured in the home and under systemd alike."""
        return any((where / ".wakereplies").exists() for where in self.state_dirs(nick))

    # -- the model gateway: where it is and what a caller holds (agents/gateway) --------

    @property
    def has_gateway(self) -> bool:
        """Whether society.toml configures a gateway (a `[gateway]` section)."""
        return bool(self.society.gateway)

    def gateway_url(self) -> str:
        """How callers reach the gateway: `[gateway] url`, else its listen address, + /v1."""
        section = self.society.gateway
        url = section.get("url")
        if isinstance(url, str) and url:
            return url.rstrip("/")
        listen = section.get("listen", DEFAULT_GATEWAY_LISTEN)
        return society.HubConfig._url_for(str(listen)) + "/v1"

    def gateway_token_dir(self) -> Path:
        return self.root / "secrets" / "gateway"

    def gateway_token_file(self, nick: str) -> Path:
        """The caller token `bullpen gateway token NICK` issues to `nick` (0600)."""
        return self.gateway_token_dir() / f"{nick}.token"

    def require(self) -> None:
        if not self.society_file.exists():
            raise ConfigError(
                f"no bullpen home at {self.root} (society.toml is missing); create one with "
                f"`bullpen init {self.root}` or pass --home DIR / set BULLPEN_HOME"
            )
        # A home a newer bullpen wrote is refused here, before anything is read; an older
        # one has its safe migrations run (agents/formats.py).
        from agents import formats

        formats.check(self.root)

    def secret(self) -> bytes:
        """The shared secret; from now on this process scrubs it from logs and posts."""
        value = read_secret_text(self.trust.secret_file, "shared secret file")
        register_secret(value)
        return value

    def relaxed_token(self) -> bytes:
        """The relaxed listener's token, scrubbed from logs and posts like the secret."""
        value = read_secret_text(self.trust.relaxed_token_file, "relaxed token file")
        register_secret(value)
        return value

    def read_token(self) -> bytes:
        """The strict listener's read token; made now (0600) if this home predates it."""
        path = self.trust.read_token_file
        try:
            value, _ = ensure_secret_text(path, "read token file")
        except OSError as exc:  # a home this user may read but not write
            raise SecretFileError(
                f"the read token file {path} is missing and cannot be made here "
                f"({exc.strerror or exc}); start the home's hub once (it makes it), or copy it "
                "from the home's owner",
                path=str(path),
            ) from None
        register_secret(value)
        return value

    def signer_for(self, nick: str) -> Signer | None:
        """How `nick` proves itself from this home: its own key, the shared secret, or not at all."""
        proof = self.trust.proof_of(nick)
        if proof is None:
            return None
        if proof.method == "key":
            from trust.keys import load_private_key

            return KeySigner(load_private_key(self.trust.key_file(nick)))
        return SecretSigner(self.secret())

    def client(
        self, nick: str | None = None, *, relaxed: bool = False, timeout: float = 10.0
    ) -> RoomClient:
        """A client of this home's hub posting as `nick` with the proof it holds."""
        from room.client import RoomClient  # httpx: not loaded by the hub, which never posts

        hub = self.society.hub
        if relaxed:
            url = hub.relaxed_endpoint()
            if url is None:
                raise ConfigError(
                    "this home has no relaxed listener ([hub] relaxed in society.toml)"
                )
            return RoomClient(url, nick=nick, token=self.relaxed_token(), timeout=timeout)
        signer = self.signer_for(nick) if nick else None
        return RoomClient(
            hub.strict_url(), nick=nick, signer=signer, token=self.read_token(), timeout=timeout
        )
