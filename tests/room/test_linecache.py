"""The hub's line cache (room/linecache.py): bounded in bytes and in lines, oldest out first."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from room.linecache import LineCache


@dataclass
class Line:
    seq: int
    raw: bytes


def test_the_oldest_lines_go_once_the_bytes_pass_the_bound() -> None:
    cache: LineCache[Line] = LineCache(max_bytes=1000, max_lines=100)
    for seq in range(1, 11):
        cache.append(Line(seq, b"x" * 300))
    assert cache.nbytes <= 1000 and len(cache) == 3
    assert cache.first_seq == 8 and cache.get(7) is None and cache.get(10) == Line(10, b"x" * 300)
    assert not cache.holds_after(6) and cache.holds_after(7)


def test_the_line_bound_still_holds_for_small_lines() -> None:
    cache: LineCache[Line] = LineCache(max_bytes=1 << 20, max_lines=5)
    for seq in range(1, 21):
        cache.append(Line(seq, b"y"))
    assert [line.seq for line in cache] == [16, 17, 18, 19, 20] and cache.nbytes == 5


def test_a_line_over_the_bound_alone_is_kept_until_the_next() -> None:
    cache: LineCache[Line] = LineCache(max_bytes=100, max_lines=10)
    cache.append(Line(1, b"z" * 500))
    assert cache.get(1) is not None and cache.nbytes == 500
    cache.append(Line(2, b"z" * 10))
    assert cache.first_seq == 2 and cache.nbytes == 10


def test_an_empty_bound_is_refused() -> None:
    with pytest.raises(ValueError):
        LineCache(max_bytes=0)
