"""Whether an HTTP client checks TLS certificates: yes, unless its URL is plain http.

httpx builds an SSL context from the CA bundle for every client it makes, whatever
the URL's scheme: some 40 ms of CPU, paid by every command, lurker step and model
call, though a plain-http client (a loopback hub, a local model server or gateway)
never speaks TLS. Passing `verify=verify_tls(url)` skips that work for http and keeps
full verification for https and anything else.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def verify_tls(url: str) -> bool:
    """httpx's `verify` for a client of `url`."""
    return urlsplit(url).scheme.lower() != "http"
