"""Reading threads: a new thread is answered from the thread filter, an old one is still found."""

from __future__ import annotations

from typing import Any

from tests.support import HTTP, Society


def post(society: Society, thread: str, body: str) -> dict[str, Any]:
    line = {"from": "stranger", "to": "@all", "type": "chat", "body": body, "thread": thread}
    answer = HTTP.post(f"{society.strict_url}/say", json=line, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def thread(society: Society, name: str) -> list[str]:
    params = {"thread": name, "limit": 1000}
    answer = HTTP.get(
        f"{society.strict_url}/read", params=params, headers=society.read_headers(), timeout=10
    )
    assert answer.status_code == 200, answer.text
    return [m["body"] for m in answer.json()["messages"]]


def test_threads_before_and_after_a_restart_read_whole(society: Society) -> None:
    """After a restart, old threads, new threads and threads mentioned only in data read right."""
    hub = society.start_hub()
    post(society, "old", "one")
    line = {"from": "stranger", "to": "@all", "type": "chat", "body": "two", "thread": "old"}
    line["data"] = {"thread": "decoy"}  # a "thread" key inside data is not the line's thread
    assert HTTP.post(f"{society.strict_url}/say", json=line, timeout=10).status_code == 200
    assert hub.stop() == 0
    society.start_hub()
    assert thread(society, "fresh") == []  # surveys the room; nothing to find
    post(society, "fresh", "three")
    post(society, "later", "four")
    assert thread(society, "fresh") == ["three"]
    assert thread(society, "later") == ["four"]
    assert thread(society, "old") == ["one", "two"]
    assert thread(society, "decoy") == []
