"""Clients of plain-http URLs build no SSL context; https keeps full verification."""

from __future__ import annotations

import pytest

from room.httpverify import verify_tls


@pytest.mark.parametrize(
    ("url", "verify"),
    [
        ("http://127.0.0.1:8080", False),
        ("HTTP://hub.local:8080/", False),
        ("https://hub.example.org", True),
        ("HTTPS://hub.example.org", True),
        ("hub.example.org:8080", True),  # no scheme: verify, as httpx would
    ],
)
def test_only_plain_http_skips_verification(url: str, verify: bool) -> None:
    assert verify_tls(url) is verify
