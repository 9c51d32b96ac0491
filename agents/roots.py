"""Where a pipeline may read and write: the roots society.toml declares, enforced on every open.

Every path a pipeline touches (traces, state, runs, memory repositories,
prompts; knowledge bases, blaze files, briefs; the build's REPO) is data
that may come from a poster (an ask), from a folder someone else can drop a
symbolic link in, or from a file swapped between a check and a read. So a
path is never trusted as written: it is resolved and must lie inside a root
declared for its purpose (`[roots]` in society.toml; see docs/operating.md),
and a file is checked again *after* it is opened, by the real path of the
open descriptor (/proc/self/fd/N), so a link that appears between the check
and the read is refused too. A write opens its folder, checks the folder's
real path the same way, and creates and renames its file relative to that
open folder, never through a name that could be swapped.

A purpose that [roots] leaves out has its default folder in the home
(agents.config.ROOT_DEFAULTS) plus whatever the pipeline's own section
configures outside it, so a home laid down before [roots] keeps working. A
declared root is exact: a configured pipeline path outside it is a
ConfigError naming both. No root may hold, or lie inside, the home's
secrets (its secrets folder, trust.toml, the secret files trust.toml names).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from agents.config import ROOT_DEFAULTS
from room.errors import BullpenError, ConfigError, StepFailed

if TYPE_CHECKING:
    from agents.home import Home

__all__ = [
    "SECRET_KEYS",
    "OutsideRoot",
    "PlaceKey",
    "Roots",
    "gather_places",
    "inside",
    "real_path_of",
    "secret_places",
]

_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK  # a FIFO must not hang a step
_DIR = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY


class OutsideRoot(StepFailed):
    """A path (or what a link in it leads to) lies outside the root declared for its purpose."""

    code = "outside_root"


def replace_in(folder: int, name: str, data: bytes, mode: int, chmod: int | None = None) -> None:
    """Replace `name` in the open `folder` with `data`: a new file beside it (created with
    `mode`, then given `chmod` if set), fsynced, renamed over it. Relative to the folder's
    descriptor, so no link swapped into the path redirects the write, and a link at `name` is
    replaced rather than written through."""
    temp = f".{name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if chmod is not None:
                os.fchmod(handle.fileno(), chmod)
            os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder)
        raise


class FileTooLarge(ValueError):
    """A file over its size limit, refused from its size rather than read."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(f"{path} is {size} bytes, over the limit of {limit}")
        self.path, self.size, self.limit = path, size, limit


def read_at_most(handle: BinaryIO, limit: int | None, path: Path) -> bytes:
    """All of an open file, or FileTooLarge when it holds more than `limit` bytes."""
    if limit is None:
        return handle.read()
    size = os.fstat(handle.fileno()).st_size
    if size > limit:
        raise FileTooLarge(path, size, limit)
    data = handle.read(limit + 1)  # should it grow meanwhile
    if len(data) > limit:
        raise FileTooLarge(path, len(data), limit)
    return data


def inside(root: Path, path: Path) -> bool:
    """Whether the resolved `path` is `root` or lies under it (both already resolved)."""
    return path == root or path.is_relative_to(root)


def real_path_of(fd: int, checked: Path | None = None) -> Path:
    """Where an open descriptor really is: the kernel's answer, not a name checked earlier.

    Without /proc (some sandboxes), the open file must be the very file (device and inode)
    now at `checked`, the resolved name that was checked; else its place is unknown."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        opened = os.fstat(fd)
        try:
            there = os.stat(checked) if checked is not None else None
        except OSError:
            there = None
        if there is not None and (there.st_dev, there.st_ino) == (opened.st_dev, opened.st_ino):
            return checked  # type: ignore[return-value]
        return Path("/nonexistent/unknown-place-of-an-open-file")


def _resolve(path: Path) -> Path:
    """`path` with every link followed; a loop of links is an OSError naming it."""
    try:
        return path.resolve()
    except RuntimeError:  # Python 3.11 and 3.12 report a loop this way
        raise OSError(errno.ELOOP, "a loop of links", str(path)) from None


# The home's secret places, each configuration key once (agents/privateplaces.py adds the
# private data and is what a fence hides; no root may hold or lie in a secret place).


@dataclass(frozen=True)
class PlaceKey:
    """One configuration key (or fixed place) naming a place to hide, and how to find it."""

    key: str  # as an operator finds it: "trust.toml secret_file", "[gateway] ledger"
    holds: str  # what lies there, said for a person
    paths: Callable[[Home], Iterable[Path]]


def _trust(key: str) -> Callable[[Home], list[Path]]:
    def paths(home: Home) -> list[Path]:
        return [getattr(home.trust, key)]

    return paths


def _credentials(home: Home) -> list[Path]:
    value = home.society.room.credentials
    return [home.path(value)] if value else []


SECRET_KEYS: tuple[PlaceKey, ...] = (
    PlaceKey(
        "the home's secrets/",
        "every secret bullpen makes itself: gateway caller tokens, the web token, the "
        "trust.toml defaults",
        lambda home: [home.root / "secrets", home.gateway_token_dir()],
    ),
    PlaceKey("trust.toml", "where each secret file is", lambda home: [home.trust_file]),
    PlaceKey("trust.toml secret_file", "the shared secret", _trust("secret_file")),
    PlaceKey(
        "trust.toml relaxed_token_file", "the relaxed bearer token", _trust("relaxed_token_file")
    ),
    PlaceKey("trust.toml read_token_file", "the read token", _trust("read_token_file")),
    PlaceKey("trust.toml hub_key_file", "the hub's signing key", _trust("hub_key_file")),
    PlaceKey("trust.toml key_dir", "each nick's private key", _trust("key_dir")),
    PlaceKey("[room] credentials", "the NATS credentials of a JetStream room", _credentials),
)


def gather_places(home: Home, keys: Iterable[PlaceKey], strict: bool) -> list[Path]:
    found: list[Path] = []
    for key in keys:
        try:
            found += key.paths(home)
        except (BullpenError, OSError):
            if strict:
                raise
    return list(dict.fromkeys(Path(place).resolve() for place in found))


def secret_places(home: Home) -> list[Path]:
    """The home's secret places, resolved: no root may hold one or lie inside one. A home
    whose trust.toml cannot be read still has its secrets/ folder and trust.toml named."""
    return gather_places(home, SECRET_KEYS, strict=False)


@dataclass(frozen=True)
class Roots:
    """The resolved roots of each purpose, and the reads and writes confined to them."""

    home: Path
    places: dict[str, tuple[Path, ...]]
    origin: dict[Path, str] = field(default_factory=dict)  # root -> the setting that made it

    @classmethod
    def of(cls, home: Home, configured: Mapping[str, Iterable[tuple[str, str | Path]]]) -> Roots:
        """The roots of the purposes in `configured`: purpose -> (setting, configured path).

        ConfigError when a configured path lies outside a declared root, or a root
        holds the home's secrets; each message names both and says what to change."""
        declared_roots = home.society.roots
        protected = secret_places(home)
        places: dict[str, tuple[Path, ...]] = {}
        origin: dict[Path, str] = {}
        for purpose, settings in configured.items():
            declared = declared_roots.declared(purpose)
            found: list[Path] = []
            if declared is not None:
                for value in declared:
                    root = home.path(value).resolve()
                    found.append(root)
                    origin.setdefault(root, f"[roots] {purpose} = {value!r}")
            else:
                default = (home.root / ROOT_DEFAULTS[purpose]).resolve()
                found.append(default)
                origin.setdefault(default, f"the default [roots] {purpose} ({default})")
            for setting, configured_value in settings:
                path = home.path(str(configured_value)).resolve()
                if any(inside(root, path) for root in found):
                    continue
                if declared is not None:
                    raise ConfigError(
                        f"{home.society_file}: {setting} = {str(configured_value)!r} ({path}) lies outside "
                        f"[roots] {purpose} ({', '.join(map(str, found))}); move it under that "
                        f"root, or add its folder to [roots] {purpose}"
                    )
                found.append(path)  # an old home's own setting is its root
                origin.setdefault(path, f"{setting} = {str(configured_value)!r}")
            for root in found:
                for secret in protected:
                    if inside(root, secret) or inside(secret, root):
                        raise ConfigError(
                            f"{home.society_file}: {origin[root]} ({root}) would let a pipeline "
                            f"read or write the home's secrets ({secret}); point it at a folder "
                            "that holds no secrets and is not inside the secrets folder"
                        )
            places[purpose] = tuple(dict.fromkeys(found))
        return cls(home.root, places, origin)

    @classmethod
    def single(cls, purpose: str, folder: Path) -> Roots:
        """One folder as the only root of `purpose`: a knowledge base, a traces folder."""
        root = folder.resolve()
        return cls(root, {purpose: (root,)}, {root: f"the {purpose} folder {root}"})

    # --- checks ----------------------------------------------------------------------------

    def root_of(self, purpose: str, path: Path) -> Path | None:
        """The root of `purpose` that holds the resolved `path`, or None."""
        return next((root for root in self.places[purpose] if inside(root, path)), None)

    def _refusal(self, purpose: str, what: str, path: Path, real: Path) -> OutsideRoot:
        shown = ", ".join(str(root) for root in self.places[purpose])
        via = f" (a link to {real})" if real != path else ""
        return OutsideRoot(
            f"refused {what} {path}{via}: it lies outside [roots] {purpose} ({shown}). Nothing "
            f"was read from or written to it. Put the file under that root, remove the link, "
            f"or declare its folder in [roots] {purpose} in society.toml",
            path=str(path),
            purpose=purpose,
        )

    def check(self, purpose: str, path: str | Path, what: str = "the file") -> Path:
        """`path` resolved (relative to the home), or OutsideRoot naming it."""
        given = Path(path).expanduser()
        given = given if given.is_absolute() else self.home / given
        real = _resolve(given)
        if self.root_of(purpose, real) is None:
            raise self._refusal(purpose, what, given, real)
        return real

    def narrow(self, purpose: str, value: str | None, configured: Path, what: str) -> Path:
        """A path an ask gives (or the configured one): only ever narrowed to inside a root."""
        return configured.resolve() if not value else self.check(purpose, value, what)

    # --- reads -----------------------------------------------------------------------------

    def open_fd(self, purpose: str, path: str | Path, what: str = "the file") -> int:
        """A read-only descriptor of a regular file inside the root, checked after opening."""
        given = Path(path)
        checked = self.check(purpose, given, what)
        fd = os.open(given if given.is_absolute() else self.home / given, _READ)
        try:
            real = real_path_of(fd, checked)
            if self.root_of(purpose, real) is None:
                raise self._refusal(purpose, what, given, real)
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a folder", str(given))
            if not stat.S_ISREG(mode):
                raise OSError(errno.EINVAL, "not a regular file", str(given))
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def open(self, purpose: str, path: str | Path, what: str = "the file") -> Iterator[BinaryIO]:
        """open_fd as a binary file object."""
        with os.fdopen(self.open_fd(purpose, path, what), "rb") as handle:
            yield handle

    def read_bytes(
        self, purpose: str, path: str | Path, what: str = "the file", *, limit: int | None = None
    ) -> bytes:
        """The file's bytes; with `limit`, a file over it is refused from the opened file's
        size, before a byte is read, and the read stops one byte past it (FileTooLarge)."""
        with self.open(purpose, path, what) as handle:
            return read_at_most(handle, limit, Path(path))

    def read_text(self, purpose: str, path: str | Path, what: str = "the file") -> str:
        return self.read_bytes(purpose, path, what).decode("utf-8")

    def walk(self, purpose: str, folder: Path) -> tuple[list[Path], list[str]]:
        """The non-hidden files under `folder` (links not followed out), and those refused.

        A link that stays inside the root is listed where it is; one that leads
        outside (to the secrets, say) is never opened: it is returned in the second
        list as `<path> -> <target>` so the run can report it by name."""
        top = self.check(purpose, folder, "the folder")
        files: list[Path] = []
        refused: list[str] = []
        for where, dirs, names in os.walk(top):
            base = Path(where)
            kept = []
            for name in sorted(d for d in dirs if not d.startswith(".")):
                if (base / name).is_symlink():  # not descended into, as before; named if outside
                    try:
                        real = _resolve(base / name)
                    except OSError:
                        refused.append(f"{base / name} -> (a loop of links)")
                        continue
                    if self.root_of(purpose, real) is None:
                        refused.append(f"{base / name} -> {real}")
                    continue
                kept.append(name)
            dirs[:] = kept
            for name in sorted(n for n in names if not n.startswith(".")):
                path = base / name
                try:
                    real = _resolve(path)
                except OSError:
                    refused.append(f"{path} -> (a loop of links)")
                    continue
                if self.root_of(purpose, real) is None:
                    refused.append(f"{path} -> {real}")
                    continue
                files.append(path)
        return files, refused

    # --- writes ----------------------------------------------------------------------------

    def open_folder(self, purpose: str, folder: Path, what: str = "the folder") -> int:
        """A descriptor of `folder` (made if missing), whose real path is inside the root."""
        checked = self.check(purpose, folder, what)
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, _DIR)
        try:
            real = real_path_of(fd, checked)
            if self.root_of(purpose, real) is None:
                raise self._refusal(purpose, what, folder, real)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write_bytes(
        self, purpose: str, path: Path, data: bytes, what: str = "the file", mode: int = 0o644
    ) -> Path:
        """Replace `path` with `data`, atomically, created and renamed inside its checked folder.

        The rename replaces a link at `path` rather than writing through it."""
        self.check(purpose, path.parent, what)
        folder = self.open_folder(purpose, path.parent, what)
        try:
            replace_in(folder, path.name, data, mode)
        finally:
            os.close(folder)
        return path
