"""@librarian and the ways into shared memory: the librarian's step (which keeps the index
as a projection of the room), `bullpen memory ...`, and the backpass sync (docs/memory.md).

agents.memory holds the index and the recall; this package is the top of the
house (it may import the runtime and the backpass), so agents.runtime can read
lessons from agents.memory without ever reaching up here.
"""
