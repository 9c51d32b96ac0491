"""The room on NATS JetStream: one engine in one folder (docs/scaling.md).

stream.py   settings, connecting, the stream itself, publishing
engine.py   the RoomLog a hub serves from a stream
follow.py   a lurker's durable consumer
"""
