"""`bullpen upgrade`: bring a home's files to this bullpen's formats (agents/formats.py).

Every migration runs here, the safe ones too (a command's start runs only those). A
home with no format record (made before 0.1.0 kept one) gets it written. A home a
newer bullpen wrote is refused as at any start. The room file is never rewritten.
"""

from __future__ import annotations

import argparse
import sys

from agents import formats
from agents.home import Home
from room.errors import ConfigError
from room.version import __version__


def cmd_upgrade(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    if not home.society_file.exists():
        home.require()  # the usual "no bullpen home at …" error
    record = formats.read_record(home.root)
    formats.refuse_newer(home.root, record)  # a migration never goes back
    steps = formats.pending(record)
    if args.check:
        for step in steps:
            print(f"to do: {step.family} {step.source} -> {step.source + 1}: {step.what}")
        if not record.present:
            print(f"to do: write {formats.RECORD} (this home predates it)")
        return 1 if steps or not record.present else 0
    if not record.present:
        path = formats.write_record(home.root, record.made_by, record.formats)
        print(
            f"recorded the home's formats in {path} (a home made before bullpen kept one)",
            file=sys.stderr,
        )
        record = formats.read_record(home.root)
    if steps:
        try:
            formats.migrate(home.root, record, steps)
        except OSError as exc:
            raise ConfigError(
                f"the upgrade stopped: {exc}; {formats.RECORD} names the formats reached, the "
                "backups are beside the files, and running `bullpen upgrade` again resumes"
            ) from None
    print(
        f"the home {home.root} is at this bullpen's formats ({__version__}): "
        + ", ".join(f"{f} {v}" for f, v in formats.current().items()),
        file=sys.stderr,
    )
    return 0
