"""The room on NATS JetStream: one engine in one folder (docs/scaling.md).

stream.py   settings, connecting, the stream itself, publishing
engine.py   the RoomLog a hub serves from a stream: opening it, /health, composing the two below
view.py     the hub's view of the stream: following it, the cache and thread index, reading
append.py   the hub's append path: batches, conditional publishing, re-stamping, fail-stop
follow.py   a lurker's durable consumer
"""
