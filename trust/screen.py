"""The screen: nothing secret leaves the home, through any door.

One piece of code knows the home's secret set and looks for it in text about
to leave: a prompt for a model seat, a line for the room, a file for a
commit, a PR body, and (at the hub) every incoming request. The set is

- every secret file of the home: every regular file in the folders that hold
  the files trust.toml names (`secrets/`, `secrets/keys/`), so a token file
  added there later (a read token, gateway caller tokens) is covered without
  a list to keep up to date; a plain file's whole value and each word of it
  as long as a token (32 bytes);
- every private key among them in each form it can be pasted in: the PEM's
  base64 body, joined and line by line, and the raw key in hex and base64;
- any PEM private key block (`-----BEGIN ... PRIVATE KEY-----` with key
  text after it: PKCS#8, RSA, EC, OPENSSH, ENCRYPTED, PGP), the home's or not;
- what this process registered with the log scrubber (a seat's API key).

A value is matched in every form a copy of it takes (trust/pieces.py): in any
case, with separators between its characters, cut in pieces of 16 characters
or more (each half of it), as hex or base64 of its bytes, and each of these
written backwards; and, for structured content, in the form the hub stores
(JSON escapes decoded: `\\u0061` is `a`). Text that is not ASCII is looked at
again in its compatibility form (NFKC, then case-folded), so fullwidth
letters (`ｓｅｃｒｅｔ`), ligatures and other look-alikes a reader turns back
into the secret at a glance are matched too (issue 33); ASCII text, the
usual post, costs one `isascii()` more. Only values of at least MIN_SECRET
bytes are screened: shorter ones would match honest text by chance.

A hit raises SecretFound naming where the text came from and which kind of
secret it held, never the secret or where in the text it was; the caller
sends nothing.
"""

from __future__ import annotations

import base64
import os
import re
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from room import logs, strictjson
from room.errors import SecretFound
from trust.pieces import PIECE, RAW, TOKEN, WHOLE, PieceIndex, Secret, fold
from trust.secretfiles import MIN_SECRET_BYTES
from trust.table import TrustTable

__all__ = ["MIN_SECRET", "HomeSecrets", "Screen", "key_material"]

MIN_SECRET = 16
MAX_SECRET_FILE = 1024 * 1024  # a secrets folder holds small files; a bigger one is not a secret
PEM_HEADER = re.compile(rb"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----")
# Key text after the header: a run of base64 within the next few hundred bytes (headers
# such as `Proc-Type: 4,ENCRYPTED` may come first). A header alone, as in documentation
# about the format, is not a key.
PEM_BODY = re.compile(rb"[A-Za-z0-9+/]{16,}")
PEM_LOOKAHEAD = 400
PEM_BLOCK = "a PEM private key block"
TOKEN_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/=_-"
TOKEN_RUN = re.compile(rb"[A-Za-z0-9+/=_\-]+")


def _pem_body(pem: bytes) -> list[bytes]:
    """A PEM's base64 body, joined and line by line."""
    lines = [line.strip() for line in pem.splitlines()]
    body_lines = [
        line for line in lines if line and not line.startswith(b"-----") and b":" not in line
    ]
    return [b"".join(body_lines), *body_lines]


def _raw_key(pem: bytes) -> bytes | None:
    """The raw private key (when it is a key `cryptography` can read and export raw)."""
    try:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(pem, password=None)
        return key.private_bytes(  # type: ignore[union-attr, no-any-return]
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    except (ValueError, TypeError, AttributeError):
        return None  # not a key it can read (or not raw-exportable): the PEM body still counts


def key_material(pem: bytes) -> list[bytes]:
    """What of a PEM private key must never leave: its base64 body, joined and line by
    line, and the raw key in hex and base64 (when it is a key `cryptography` can read)."""
    found = _pem_body(pem)
    raw = _raw_key(pem)
    if raw is not None:
        found += [raw.hex().encode(), raw.hex().upper().encode(), base64.b64encode(raw)]
        found.append(base64.urlsafe_b64encode(raw).rstrip(b"="))
    return found


def _kind(value: bytes) -> str:
    """A token (high entropy: hex, base64) is found by its pieces; anything else whole."""
    return TOKEN if TOKEN_RUN.fullmatch(value) else WHOLE


def _values(data: bytes, what: str) -> list[Secret]:
    if b"PRIVATE KEY" in data:
        # The body only whole (its first bytes are every such key's); the key's own bytes
        # in every form and piece, which covers the key part of the body too.
        found = [Secret(value, what, WHOLE) for value in _pem_body(data)]
        raw = _raw_key(data)
        return found + ([Secret(raw, what, RAW)] if raw is not None else [])
    whole = data.strip()
    if whole.startswith((b"ed25519:", b"ssh-", b"-----BEGIN PUBLIC KEY")):
        return []  # a public half kept beside its key is meant to be shown
    # Each word too, for a file of several tokens (`name token` lines), but only words as
    # long as a token must be (32 bytes), so a caller's name never becomes a needle.
    words = [word for word in whole.split() if len(word) >= MIN_SECRET_BYTES]
    return [Secret(value, what, _kind(value)) for value in (whole, *words)]


class Screen:
    """A fixed secret set, found in any form a copy takes, plus every PEM private key block."""

    def __init__(self, secrets: tuple[Secret, ...] = ()) -> None:
        self.secrets = secrets
        self.needles = tuple((secret.value, secret.what) for secret in secrets)
        # Every form and piece of a token or key (trust/pieces.py); anything else (a value
        # with spaces, one too short once folded) is looked for whole, in any case.
        whole = self._whole(secrets)
        self._pieces = PieceIndex(secret for secret in secrets if secret not in whole)
        self._exact = tuple(
            (form, secret.what)
            for secret in whole
            for form in (secret.value.lower(), secret.value.lower()[::-1])
        )

    @staticmethod
    def _whole(secrets: tuple[Secret, ...]) -> list[Secret]:
        return [
            secret
            for secret in secrets
            if secret.kind != RAW
            and (not TOKEN_RUN.fullmatch(secret.value) or len(fold(secret.value)) < PIECE)
        ]

    @classmethod
    def of(cls, named: Iterable[tuple[bytes | str | None, str]]) -> Screen:
        """A screen for these values (`what` names each kind, e.g. "the shared secret");
        a token (letters, digits, `+/=_-`) is found by its pieces too, anything else whole."""
        return cls.of_secrets(
            Secret(raw, what, _kind(raw))
            for value, what in named
            if value is not None
            for raw in [value.encode("utf-8") if isinstance(value, str) else value]
        )

    @classmethod
    def of_secrets(cls, secrets: Iterable[Secret]) -> Screen:
        seen: dict[bytes, Secret] = {}
        for secret in secrets:
            if len(secret.value) >= MIN_SECRET and secret.value not in seen:
                seen[secret.value] = secret
        # Longest first: a key's joined body is named before one of its lines.
        return cls(tuple(sorted(seen.values(), key=lambda secret: -len(secret.value))))

    @classmethod
    def of_trust(cls, trust: TrustTable) -> Screen:
        """Every secret file of the home trust.toml describes (see the module docstring)."""
        return cls.of_secrets(_values_of(_files(trust), _named(trust)))

    def find(self, content: bytes | str) -> str | None:
        """Which kind of secret `content` holds, or None: as it is and, when it is not
        ASCII, in its compatibility form (fullwidth letters folded, module docstring)."""
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        found = self._find(data)
        if found is None and not data.isascii():
            folded = compatibility_form(data)
            if folded is not None:
                found = self._find(folded)
        return found

    def _find(self, data: bytes) -> str | None:
        if self._exact:
            lowered = data.lower()
            for value, what in self._exact:
                if value in lowered:
                    return what
        found = self._pieces.find(data)
        if found is not None:
            return found
        if b"PRIVATE KEY" in data:
            for match in PEM_HEADER.finditer(data):
                if PEM_BODY.search(data, match.end(), match.end() + PEM_LOOKAHEAD):
                    return PEM_BLOCK
        return None

    def find_json(self, value: Any) -> str | None:
        """`find` over structured content in the form the room stores it, escapes decoded."""
        if isinstance(value, str):
            return self.find(value)
        return self.find(strictjson.dumps(value))

    def check(self, content: bytes | str, where: str) -> None:
        """Raise SecretFound when `content` (from `where`) holds a secret."""
        what = self.find(content)
        if what is not None:
            raise _found(where, what)

    def check_json(self, value: Any, where: str) -> None:
        what = self.find_json(value)
        if what is not None:
            raise _found(where, what)


def _nfkc_casefold(text: str) -> str:
    """Unicode's NFKC_Casefold, as the standard builds it from these three steps."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


# The characters NFKC leaves as they are but case folding turns into ASCII letters (the
# sharp s as `ss`, the dotted capital I as `i` and a dot): tests/room/test_screen_forms.py
# recomputes them from this Python's Unicode tables.
CASEFOLD_ONLY = "ßẞİ"
_ASCII = bytes(range(128))
_NOT_TOKEN = bytes(i for i in range(256) if chr(i) not in TOKEN_CHARS)


def _has_look_alike(rest: str) -> bool:
    """Whether text's non-ASCII characters (`rest`) read back as any token character."""
    plain = unicodedata.normalize("NFKC", rest)  # the input itself, fast, when it is NFKC
    if plain != rest and plain.encode("utf-8", "replace").translate(None, _NOT_TOKEN):
        return True
    return any(char in rest for char in CASEFOLD_ONLY)


def compatibility_form(data: bytes) -> bytes | None:
    """`data` as a reader reads it back (NFKC, case-folded), or None when none of its
    characters reads back as a letter, digit or other token character: most text that is
    not ASCII (accents, CJK, dashes, no-break spaces) is told from its non-ASCII bytes
    alone, so the normalisation of the whole text is paid only by text with a look-alike
    (bench figures: docs/room.md, "The secret screen"). Bytes that are not UTF-8 become
    U+FFFD: they were looked at as they are already."""
    if not _has_look_alike(data.translate(None, _ASCII).decode("utf-8", "replace")):
        return None
    return _nfkc_casefold(data.decode("utf-8", "replace")).encode("utf-8")


def _found(where: str, what: str) -> SecretFound:
    return SecretFound(
        f"{where} holds {what}; nothing was sent. Remove it from there (a secret belongs "
        "only in the home's secrets/ folder), and replace that secret if the text may "
        "have been seen elsewhere",
        where=where,
        secret=what,
    )


class HomeSecrets:
    """The home's screen, read again only when a file in its secret folders changed.

    A lurker lives for weeks while keys are made (`bullpen keys new`) and tokens
    are added; stat-ing a handful of files per use is cheap next to a model call.
    """

    def __init__(self, trust: TrustTable | None, secrets_dir: Path | None = None) -> None:
        """`trust` names the secret files; a home without trust.toml (only a backpass's
        folders, say) is screened by its `secrets_dir` and every PEM block alone."""
        self.trust = trust
        self.secrets_dir = secrets_dir
        self._signature: tuple[Any, ...] | None = None
        self._screen = Screen()

    def screen(self) -> Screen:
        files = _files(self.trust, self.secrets_dir)
        signature = (_signature(files), frozenset(logs.registered()))
        if signature != self._signature:
            self._screen = Screen.of_secrets(_values_of(files, _named(self.trust)))
            self._signature = signature
        return self._screen

    def check(self, content: bytes | str, where: str) -> None:
        self.screen().check(content, where)

    def check_json(self, value: Any, where: str) -> None:
        self.screen().check_json(value, where)


def _named(trust: TrustTable | None) -> dict[Path, str]:
    if trust is None:
        return {}
    return {
        trust.secret_file: "the shared secret",
        trust.relaxed_token_file: "the relaxed token",
        trust.hub_key_file: "the hub's private key",
    }


def _folders(trust: TrustTable) -> list[Path]:
    """The folders whose every file is a secret: key_dir, and the folders of the named
    files unless that is the home itself (which holds the room, not only secrets); each
    only when it is a private (0700) folder of ours, so a path set to /etc walks nothing."""
    home = trust.path.parent
    folders = [trust.key_dir] if _private(trust.key_dir) else []
    for path in _named(trust):
        folder = path.parent
        # a 0700 folder of secrets besides the home itself, never /etc or a shared one
        outside_home = folder != home and folder not in home.parents
        if folder not in folders and outside_home and _private(folder):
            folders.append(folder)
    return folders


def _private(folder: Path) -> bool:
    try:
        info = os.stat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def _files(trust: TrustTable | None, secrets_dir: Path | None = None) -> list[Path]:
    found: list[Path] = list(_named(trust))
    folders = _folders(trust) if trust is not None else []
    if secrets_dir is not None and secrets_dir not in folders and _private(secrets_dir):
        folders.append(secrets_dir)
    for folder in folders:
        for root, dirs, names in os.walk(folder):  # never follows a link to a folder
            dirs.sort()
            for name in sorted(names):
                path = Path(root) / name
                if path not in found:
                    found.append(path)
    return found


def _read(path: Path) -> bytes | None:
    """A secret file's bytes, or None for a link, a non-file, a big file or one we cannot read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SECRET_FILE:
            return None
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _values_of(files: list[Path], named: dict[Path, str]) -> list[Secret]:
    out: list[Secret] = []
    for path in files:
        data = _read(path)
        if data is None:
            continue
        what = named.get(path) or (
            f"a private key of the home ({path.name})"
            if b"PRIVATE KEY" in data
            else f"a secret of the home ({path.name})"
        )
        out += _values(data, what)
    held = "a secret this process holds"
    out += [Secret(value, held, _kind(value)) for value in map(_bytes, logs.registered())]
    return out


def _bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _signature(files: list[Path]) -> tuple[tuple[str, int, int, int], ...]:
    out = []
    for path in files:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        out.append((str(path), info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(out)
