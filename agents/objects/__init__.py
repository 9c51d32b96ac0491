"""Objects by SHA-256 through the room's engine: what steps hand each other across hosts."""

from agents.objects.store import here, objects_for

__all__ = ["here", "objects_for"]
