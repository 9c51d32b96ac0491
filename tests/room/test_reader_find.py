"""RoomFile.lines_containing: the lines of a room holding a needle, found with bytes.find.

It must give exactly the lines that filtering `lines_from` gives (whole lines only, at their
offsets), whatever the chunk size: needles across a chunk boundary, lines longer than a
chunk, a last line still being written.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from room.reader import CHUNK, RoomFile


def room_of(tmp_path: Path, blob: bytes) -> Path:
    path = tmp_path / "room.jsonl"
    path.write_bytes(blob)
    return path


def by_lines_from(reader: RoomFile, needle: bytes, offset: int = 0, end: int | None = None):
    return [(at, raw) for at, raw in reader.lines_from(offset, end) if needle in raw]


def test_a_needle_across_a_chunk_boundary_is_found(tmp_path: Path) -> None:
    lines = [b"aaaa", b"xx needle yy", b"bbbb"]
    path = room_of(tmp_path, b"\n".join(lines) + b"\n")
    with RoomFile(path) as reader:
        for chunk in range(1, 24):  # every cut through "needle", and none
            found = list(reader.lines_containing(b"needle", chunk=chunk))
            assert found == [(5, b"xx needle yy")], chunk


def test_a_needle_across_the_real_chunk_boundary_is_found(tmp_path: Path) -> None:
    first = b"f" * (CHUNK - 101)  # with its newline, the next line starts at CHUNK - 100
    target = b"p" * 97 + b"needle" + b"q" * 10  # "needle" starts at CHUNK - 3
    blob = first + b"\n" + target + b"\nlast\n"
    assert blob.index(b"needle") == CHUNK - 3
    path = room_of(tmp_path, blob)
    with RoomFile(path) as reader:
        assert list(reader.lines_containing(b"needle")) == [(CHUNK - 100, target)]


def test_a_line_longer_than_a_chunk_is_read_whole(tmp_path: Path) -> None:
    long_hit = b"z" * 50 + b"needle" + b"z" * 50
    long_miss = b"y" * 120
    blob = b"short needle\n" + long_miss + b"\n" + long_hit + b"\nend needle\n"
    path = room_of(tmp_path, blob)
    with RoomFile(path) as reader:
        found = list(reader.lines_containing(b"needle", chunk=16))
        assert found == [
            (0, b"short needle"),
            (13 + 121, long_hit),
            (13 + 121 + len(long_hit) + 1, b"end needle"),
        ]
        assert found == by_lines_from(reader, b"needle")


@pytest.mark.parametrize("chunk", [4, 7, 64, CHUNK])
def test_a_partial_last_line_is_left_for_the_next_read(tmp_path: Path, chunk: int) -> None:
    path = room_of(tmp_path, b"one needle\ntwo needle still being writ")
    with RoomFile(path) as reader:
        assert list(reader.lines_containing(b"needle", chunk=chunk)) == [(0, b"one needle")]
        path.write_bytes(path.read_bytes() + b"ten\n")
        assert list(reader.lines_containing(b"needle", chunk=chunk)) == [
            (0, b"one needle"),
            (11, b"two needle still being written"),
        ]


def test_an_end_inside_a_line_leaves_that_line_out(tmp_path: Path) -> None:
    path = room_of(tmp_path, b"a needle\nb needle\nc needle\n")
    with RoomFile(path) as reader:
        for chunk in (3, 8, 100):
            assert list(reader.lines_containing(b"needle", 9, 20, chunk=chunk)) == [
                (9, b"b needle")
            ]


def test_a_line_with_the_needle_twice_comes_once(tmp_path: Path) -> None:
    path = room_of(tmp_path, b"needle needle needle\nnone\nneedleneedle\n")
    with RoomFile(path) as reader:
        assert [raw for _, raw in reader.lines_containing(b"needle", chunk=10)] == [
            b"needle needle needle",
            b"needleneedle",
        ]


def test_the_needle_in_a_string_is_found_and_the_json_look_tells_it_apart(
    tmp_path: Path,
) -> None:
    """The needle is a prefilter: a line whose body or data holds the thread key is found too,
    so the caller's JSON look after it must stay."""
    lines = [
        {"seq": 1, "body": 'says "thread":"t1" in prose', "thread": None},
        {"seq": 2, "data": {"thread": "t1"}, "thread": "t2"},
        {"seq": 3, "body": "hi", "thread": "t1"},
    ]
    raw = [json.dumps(line, separators=(",", ":")).encode() for line in lines]
    path = room_of(tmp_path, b"\n".join(raw) + b"\n")
    needle = b'"thread":"t1"'
    with RoomFile(path) as reader:
        found = [line for _, line in reader.lines_containing(needle, chunk=32)]
    assert found == [raw[1], raw[2]]  # the escaped quotes in seq 1's body are no match
    assert [json.loads(line)["seq"] for line in found if json.loads(line)["thread"] == "t1"] == [3]


def test_a_needle_with_a_newline_is_refused(tmp_path: Path) -> None:
    path = room_of(tmp_path, b"a\n")
    with RoomFile(path) as reader, pytest.raises(ValueError, match="newline"):
        list(reader.lines_containing(b"a\nb"))


def test_random_rooms_give_what_lines_from_gives(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(200):
        lines = [
            bytes(rng.choice(b"abn\n") for _ in range(rng.choice([0, 1, 3, 9, 40])))
            for _ in range(rng.randint(0, 12))
        ]
        blob = b"".join(lines)
        path = room_of(tmp_path, blob)
        needle = rng.choice([b"a", b"ab", b"nab", b"bb", b"abba"])
        offsets = [0] + [i + 1 for i, c in enumerate(blob) if c == 10]
        offset = rng.choice(offsets)
        end = rng.choice([None, rng.randint(0, len(blob))])
        chunk = rng.choice([1, 2, 3, 5, 8, 64])
        with RoomFile(path) as reader:
            got = list(reader.lines_containing(needle, offset, end, chunk=chunk))
            assert got == by_lines_from(reader, needle, offset, end), (trial, blob, needle)


def test_lines_holding_every_needle_or_every_line_without_needles(tmp_path: Path) -> None:
    """lines_holding: every needle in the line (a Filter's prefilter), or every line for none."""
    blob = b'{"to":"@a","thread":"t"}\n{"to":"@b","thread":"t"}\n{"to":"@a"}\npartial'
    with RoomFile(room_of(tmp_path, blob)) as reader:
        both = [raw for _, raw in reader.lines_holding([b'"thread":"t"', b'"to":"@a"'])]
        assert both == [b'{"to":"@a","thread":"t"}']
        assert list(reader.lines_holding([])) == list(reader.lines_from(0))
