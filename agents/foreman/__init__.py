"""The foreman: the deterministic sequencer, the pipeline model it runs, and its registry.

`agents.foreman:handle` is the foreman's handler string in society.toml.
"""

from agents.foreman.sequencer import Foreman, handle

__all__ = ["Foreman", "handle"]
