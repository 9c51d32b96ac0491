"""`bullpen verify` against a real hub: a checkpoint, --seq, --since, and a proof bundle.

The bundle is checked from a folder with no home at all, with only the
hub's verifier key: what someone who got a line as a mail attachment has.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import Society, run_cli
from tests.tlog.helpers import checkpoint_of, fill, prepare


def test_verify_and_a_bundle_checked_with_the_key_alone(tmp_path: Path) -> None:
    """Checkpoint, inclusion and consistency verify; a bundle verifies anywhere, and not once changed."""
    society = Society(tmp_path / "home")
    prepare(society)
    society.start_hub()
    try:
        fill(society, 12)
        old = tmp_path / "old.note"
        old.write_text(checkpoint_of(society, 12))
        fill(society, 9, start=12)
        checkpoint_of(society, 21)
        key = run_cli(society.root, "trust", "verifier-key").stdout.strip()
        done = run_cli(society.root, "verify", "--seq", "5", "--since", str(old))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ok: the tree of 21 lines extends the tree of 12" in done.stdout
        assert "ok: line 5 is in the signed tree of 21 lines" in done.stdout
        bundle = tmp_path / "line-5.json"
        done = run_cli(society.root, "verify", "--export", "5", "--out", str(bundle))
        assert done.returncode == 0, done.stdout + done.stderr
        again = run_cli(society.root, "verify", "--export", "5", "--out", str(bundle))
        assert again.returncode == 2 and f"--out {bundle} exists" in again.stderr
        as_json = run_cli(society.root, "verify", "--seq", "5", "--since", str(old), "--json")
        said = json.loads(as_json.stdout)
        assert as_json.returncode == 0 and said["ok"] is True and said["error"] is None
        assert [c["check"] for c in said["checks"]] == ["checkpoint", "consistency", "inclusion"]
    finally:
        society.stop_all()

    nowhere = tmp_path / "no-home"  # the recipient has the key and the file, nothing else
    checked = run_cli(nowhere, "verify", str(bundle), "--key", key)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok: line 5 is in ")
    content = json.loads(bundle.read_text())
    assert json.loads(content["line"])["seq"] == 5 and content["checkpoint"].startswith("bullpen/")

    changed = dict(content, line=content["line"].replace("line 4", "line 9"))
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(changed))
    refused = run_cli(nowhere, "verify", str(forged), "--key", key)
    assert refused.returncode == 1 and "is not line 5 of the signed tree" in refused.stdout
    refused = run_cli(nowhere, "verify", str(forged), "--key", key, "--json")
    said = json.loads(refused.stdout)
    assert refused.returncode == 1 and said["ok"] is False
    assert "is not line 5 of the signed tree" in said["error"]

    other_key = run_cli(
        nowhere,
        "witness",
        "--show-key",
        "--name",
        "bullpen/x",
        "--key-file",
        str(tmp_path / "k"),
        "--hub",
        "http://127.0.0.1:9",
        "--hub-key",
        key,
        "--state",
        str(tmp_path / "s"),
    ).stdout.strip()
    wanted = run_cli(nowhere, "verify", str(bundle), "--key", key, "--witness", other_key)
    assert wanted.returncode == 1 and "no valid cosignature" in wanted.stdout
    bad = run_cli(nowhere, "verify", str(bundle), "--key", "nonsense")
    assert bad.returncode == 2 and "NAME+HEXHASH+BASE64" in bad.stderr
