"""Secret and key files: created 0600 without following links, refused when loose.

A secret that another user can read, or a symlink an attacker could point
elsewhere, is not a secret. Every refusal says which file and the command
that fixes it; no message ever contains the secret itself.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from pathlib import Path

from room.errors import SecretFileError


def new_secret() -> str:
    """A fresh random secret or token: 256 bits, hex."""
    return secrets.token_hex(32)


def ensure_private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def copy_private_tree(source: Path, dest: Path, ignore: tuple[str, ...] = ()) -> None:
    """Copy a folder of packaged files into a home, private to its user whatever the source's
    modes or the umask: folders 0700, files 0600 (0700 if the owner could run them)."""
    shutil.copytree(
        source, dest, ignore=shutil.ignore_patterns(*ignore), copy_function=shutil.copyfile
    )
    dest.chmod(0o700)
    for where, dirs, files in os.walk(dest):
        for name in dirs:
            os.chmod(os.path.join(where, name), 0o700, follow_symlinks=False)
        for name in files:
            path = os.path.join(where, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700 if os.stat(path).st_mode & 0o100 else 0o600)


def create_secret_file(path: Path, content: str | bytes) -> None:
    """Create a new 0600 file; refuse to follow a link or replace an existing file."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    ensure_private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise SecretFileError(
            f"{path} already exists; remove it first if you mean to replace it", path=str(path)
        ) from None
    try:
        os.fchmod(fd, 0o600)  # the umask can only narrow, but be explicit
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_secret_text(path: Path, what: str = "secret file") -> tuple[bytes, bool]:
    """The secret in `path`, made first (0600, a fresh random value) if there is none.

    Returns (secret, created). A home laid down before this secret existed
    gets it from whichever bullpen process needs it first; the file appears
    whole (written aside, then linked into place), so a concurrent reader
    never sees it empty, and two creators agree on the one that landed.
    """
    if not os.path.lexists(path):
        ensure_private_dir(path.parent)
        aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        create_secret_file(aside, new_secret() + "\n")
        try:
            os.link(aside, path)
            created = True
        except FileExistsError:
            created = False
        finally:
            os.unlink(aside)
        if created:
            return read_secret_text(path, what), True
    return read_secret_text(path, what), False


def read_secret_file(path: Path, what: str = "secret file") -> bytes:
    """Read a secret file after checking it is a private, regular file of ours."""
    try:
        # O_NONBLOCK: opening a FIFO planted in the secret's place must not block forever;
        # the file-type check below then refuses it. It changes nothing for a regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SecretFileError(
            f"the {what} {path} does not exist; create a home with `bullpen init` "
            "or point trust.toml at the right file",
            path=str(path),
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SecretFileError(
                f"the {what} {path} is a symlink; replace it with the file itself "
                f'(cp --remove-destination "$(readlink -f {path})" {path}; chmod 600 {path})',
                path=str(path),
            ) from None
        raise SecretFileError(
            f"the {what} {path} cannot be read ({exc.strerror})", path=str(path)
        ) from None
    try:
        info = os.fstat(fd)
        problem = _problem(info, path)
        if problem:
            raise SecretFileError(f"the {what} {path} {problem}", path=str(path))
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _problem(info: os.stat_result, path: Path) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file; replace it with a file holding the secret"
    if info.st_uid != os.geteuid():
        return (
            f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}); "
            f"run: chown {os.geteuid()} {path}"
        )
    if info.st_mode & 0o077:
        return (
            f"is readable by group or others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run: chmod 600 {path}"
        )
    return None


def check_secret_file(path: Path, what: str = "secret file") -> str | None:
    """The problem with a secret file (loose, a link, short ...), or None. Never raises."""
    try:
        read_secret_text(path, what)
    except SecretFileError as exc:
        return exc.message
    return None


MIN_SECRET_BYTES = 32


def read_secret_text(path: Path, what: str = "secret file") -> bytes:
    """A secret as bytes with surrounding whitespace removed; refuse an empty or short one.

    A short secret can be guessed, and the screen (trust/screen.py) could not
    tell it from honest text: 32 bytes at least (`bullpen init` writes 64).
    """
    value = read_secret_file(path, what).strip()
    if len(value) < MIN_SECRET_BYTES:
        state = "is empty" if not value else f"holds {len(value)} bytes"
        raise SecretFileError(
            f"the {what} {path} {state}, under the {MIN_SECRET_BYTES} a secret needs; make a "
            f"new one: (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' "
            f"> {path}.new) && mv {path}.new {path} (then restart the hub and the "
            "lurkers, which read it at start)",
            path=str(path),
        )
    return value
