"""What the hub grants each poster, and how much of the disk it will fill.

An unverified post spends from two token buckets of posts and two of bytes:
its nick's and everyone's. A verified post (a nick the hub proved: by proof
on either listener, or by the relaxed listener's token) spends from its own
nick's pair only, with bounds far above what the society's own pipelines
post (docs/room.md, "Limits"), so the society's work never queues behind a
stranger nor behind another verified nick — but a holder of the relaxed
token can no longer write the disk full at the hub's full speed (issue 33).
Over a bucket, a post is refused with 429, the nick, the bound and how long
to wait (`retry_after_s`, and the Retry-After header); nothing is written.

Below `min_free_disk_bytes` of free space where the room lives, unverified
posts are refused with 507; below the smaller `verified_min_free_disk_bytes`,
every post is, so no poster can fill the disk and stop the hub for everyone.

Per-nick buckets live in a bounded LRU: a flood under a million made-up
nicks costs at most `MAX_TRACKED_NICKS` buckets, and still drains the shared
bucket. A rate of 0 turns that limit off.
"""

from __future__ import annotations

import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from room.errors import PostRejected
from room.linecache import DEFAULT_MAX_BYTES

MAX_TRACKED_NICKS = 4096
DISK_CHECK_INTERVAL_S = 0.5


@dataclass(frozen=True)
class HubLimits:
    """The hub's bounds; society.toml `[hub]` carries the same names (docs/room.md)."""

    head_timeout_s: float = 10.0  # a request head must arrive in full within this
    body_timeout_s: float = 30.0  # and its body within this after the head
    idle_timeout_s: float = 30.0  # a keep-alive connection idle longer is closed
    max_connections: int = 4096  # per listener
    read_max_bytes: int = 4 * 1024 * 1024  # one /read answer (always at least one line)
    cache_max_bytes: int = DEFAULT_MAX_BYTES  # the newest lines kept in memory (room/linecache.py)
    unverified_nick_posts_per_s: float = 20.0
    unverified_nick_bytes_per_s: float = 1024 * 1024
    unverified_total_posts_per_s: float = 200.0
    unverified_total_bytes_per_s: float = 4 * 1024 * 1024
    unverified_burst_s: float = 10.0  # a bucket holds this many seconds of its rate
    min_free_disk_bytes: int = 256 * 1024 * 1024
    # Per verified nick: far above the pipelines' busiest nick (docs/room.md, "Limits").
    verified_nick_posts_per_s: float = 2000.0
    verified_nick_bytes_per_s: float = 4 * 1024 * 1024
    verified_burst_s: float = 10.0
    verified_min_free_disk_bytes: int = 64 * 1024 * 1024


class TooMany(PostRejected):
    """A poster (or all unverified ones together) is over its rate."""

    code = "rate_limited"
    status = 429

    @property
    def headers(self) -> dict[str, str]:
        """Retry-After in whole seconds (at least 1), as HTTP clients read it."""
        return {"retry-after": str(max(1, math.ceil(float(self.details["retry_after_s"]))))}


class DiskLow(PostRejected):
    """The disk under the room is nearly full: only verified posts go in, then none."""

    code = "disk_low"
    status = 507


class Bucket:
    """A token bucket: `rate` per second, holding at most `rate * burst_s`."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, rate: float, burst_s: float, now: float) -> None:
        self.rate = rate
        self.capacity = max(rate * burst_s, 1.0)
        self.level = self.capacity
        self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` could be spent (0: it can now); spends nothing."""
        if self.rate <= 0:
            return 0.0
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        need = min(amount, self.capacity)  # one post bigger than the bucket still gets in when full
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def spend(self, amount: float) -> None:
        if self.rate > 0:
            self.level -= min(amount, self.capacity)


class PostLimiter:
    """The buckets for unverified posts (per nick and in total) and verified ones (per nick)."""

    def __init__(self, limits: HubLimits) -> None:
        self.limits = limits
        now = time.monotonic()
        self._total = (
            Bucket(limits.unverified_total_posts_per_s, limits.unverified_burst_s, now),
            Bucket(limits.unverified_total_bytes_per_s, limits.unverified_burst_s, now),
        )
        self._nicks: OrderedDict[str, tuple[Bucket, Bucket]] = OrderedDict()
        self._verified: OrderedDict[str, tuple[Bucket, Bucket]] = OrderedDict()
        self.refused = 0
        self.verified_refused = 0

    def _for(
        self, nicks: OrderedDict[str, tuple[Bucket, Bucket]], nick: str, now: float, verified: bool
    ) -> tuple[Bucket, Bucket]:
        pair = nicks.get(nick)
        if pair is None:
            lim = self.limits
            pair = (
                (
                    Bucket(lim.verified_nick_posts_per_s, lim.verified_burst_s, now),
                    Bucket(lim.verified_nick_bytes_per_s, lim.verified_burst_s, now),
                )
                if verified
                else (
                    Bucket(lim.unverified_nick_posts_per_s, lim.unverified_burst_s, now),
                    Bucket(lim.unverified_nick_bytes_per_s, lim.unverified_burst_s, now),
                )
            )
            nicks[nick] = pair
            while len(nicks) > MAX_TRACKED_NICKS:
                nicks.popitem(last=False)
        else:
            nicks.move_to_end(nick)
        return pair

    def admit(self, nick: str, nbytes: int) -> None:
        """Spend one post and `nbytes` for an unverified post by `nick`, or raise TooMany."""
        now = time.monotonic()
        posts, size = self._for(self._nicks, nick, now, verified=False)
        total_posts, total_bytes = self._total
        waits: list[tuple[str, float, float]] = [
            ("this nick's", posts.wait_for(1, now), size.wait_for(nbytes, now)),
            (
                "all unverified posters'",
                total_posts.wait_for(1, now),
                total_bytes.wait_for(nbytes, now),
            ),
        ]
        for whose, post_wait, byte_wait in waits:
            wait = max(post_wait, byte_wait)
            if wait > 0:
                self.refused += 1
                raise TooMany(
                    f"too many unverified posts: {whose} rate is used up; post again in "
                    f"{wait:.1f} s, or post as a nick that proves itself (verified posts have "
                    "bounds of their own, far higher)",
                    retry_after_s=round(wait, 1),
                    nick=nick,
                )
        for bucket, amount in zip((posts, size, *self._total), (1, nbytes, 1, nbytes), strict=True):
            bucket.spend(amount)

    def admit_verified(self, nick: str, nbytes: int) -> None:
        """Spend one post and `nbytes` from a verified nick's own buckets, or raise TooMany."""
        now = time.monotonic()
        posts, size = self._for(self._verified, nick, now, verified=True)
        post_wait, byte_wait = posts.wait_for(1, now), size.wait_for(nbytes, now)
        wait = max(post_wait, byte_wait)
        if wait > 0:
            self.verified_refused += 1
            lim = self.limits
            bound = (
                f"{lim.verified_nick_posts_per_s:g} posts/s"
                if post_wait >= byte_wait
                else f"{lim.verified_nick_bytes_per_s / (1024 * 1024):g} MiB/s"
            )
            raise TooMany(
                f"too many posts from the verified nick {nick}: its bound of {bound} (bursts of "
                f"{lim.verified_burst_s:g} s, [hub] verified_nick_*) is used up; nothing was "
                f"written. Post again in {wait:.1f} s",
                retry_after_s=round(max(wait, 0.1), 1),
                nick=nick,
                bound=bound,
            )
        posts.spend(1)
        size.spend(nbytes)


class DiskWatch:
    """Free space where the room lives, looked up at most every DISK_CHECK_INTERVAL_S."""

    def __init__(self, folder: Path, low_water: int, verified_low_water: int = 0) -> None:
        self.folder = folder
        self.low_water = low_water
        self.verified_low_water = verified_low_water
        self._free: int | None = None
        self._stamp = float("-inf")

    def free(self) -> int | None:
        now = time.monotonic()
        if now - self._stamp >= DISK_CHECK_INTERVAL_S:
            self._stamp = now
            try:
                st = os.statvfs(self.folder)
                self._free = st.f_bavail * st.f_frsize
            except OSError:
                self._free = None
        return self._free

    def check(self, verified: bool = False) -> None:
        """Raise DiskLow when free space is under the low-water mark (for unverified posts)
        or the reserve every post leaves (for verified ones)."""
        free = self.free()
        mark = self.verified_low_water if verified else self.low_water
        if free is None or free >= mark:
            return
        mib = 1024 * 1024
        if verified:
            what = (
                f"reserve of {mark // mib} MiB ([hub] verified_min_free_disk_bytes): every "
                "post, verified or not, is refused until space is freed; nothing was written"
            )
        else:
            what = (
                f"low-water mark of {mark // mib} MiB: unverified posts are refused until space "
                f"is freed (verified posts still go in until {self.verified_low_water // mib} "
                "MiB are left)"
            )
        raise DiskLow(f"the disk under the room has {free // mib} MiB free, under the hub's {what}")


class Limits:
    """Everything the hub bounds, in one object the listeners share."""

    def __init__(self, limits: HubLimits, room_folder: Path) -> None:
        self.settings = limits
        self.posts = PostLimiter(limits)
        self.disk = DiskWatch(
            room_folder, limits.min_free_disk_bytes, limits.verified_min_free_disk_bytes
        )
        self.guards: dict[str, Any] = {}  # listener name -> room.guard.ConnectionGuard

    def admit_unverified(self, nick: str, nbytes: int) -> None:
        self.disk.check()
        self.posts.admit(nick, nbytes)

    def admit_verified(self, nick: str, nbytes: int) -> None:
        self.disk.check(verified=True)
        self.posts.admit_verified(nick, nbytes)

    def health(self, listener: str) -> dict[str, Any]:
        body: dict[str, Any] = {"disk_free_bytes": self.disk.free()}
        guard = self.guards.get(listener)
        if guard is not None:
            body["connections"] = guard.stats()
        body["unverified_refused"] = self.posts.refused
        body["verified_refused"] = self.posts.verified_refused
        return body
