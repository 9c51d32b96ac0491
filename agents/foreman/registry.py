"""Where the foreman finds a pipeline by its name: the built-in ones and the operator's own.

A pipeline is a class with a `name`, `advance(run)` and `in_flight_limit(run)`
(agents/foreman/pipeline.py). Built-in pipelines are listed here as
`module:Class` strings and an operator adds their own the same way in
society.toml (`[pipelines] NAME = "module:Class"`), so the foreman imports no
pipeline by name and a pipeline is imported only when a run asks for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from agents.foreman.pipeline import Pipeline
from room.errors import ConfigError

__all__ = ["BUILTIN", "PipelineRegistry"]

BUILTIN: dict[str, str] = {
    "expedition": "agents.expedition.pipeline:Expedition",
    "backpass": "agents.backpass.pipeline:Backpass",
    "build": "agents.build.pipeline:Build",
    "relay": "agents.foreman.relay:Relay",
}


class PipelineRegistry:
    """The pipelines one foreman knows: BUILTIN, overridden and extended by `[pipelines]`."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        self.targets: dict[str, str] = {**BUILTIN, **(extra or {})}
        self._loaded: dict[str, Pipeline] = {}

    def names(self) -> list[str]:
        return sorted(self.targets)

    def get(self, name: str) -> Pipeline | None:
        """The pipeline registered under `name`, or None; a broken registration is a ConfigError."""
        if name not in self.targets:
            return None
        if name not in self._loaded:
            self._loaded[name] = self._load(name, self.targets[name])
        return self._loaded[name]

    @staticmethod
    def _load(name: str, target: str) -> Pipeline:
        module_name, _, attr = target.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
            pipeline: Pipeline = cls()
        except Exception as exc:
            raise ConfigError(
                f"pipeline {name!r} = {target!r} cannot be loaded ({type(exc).__name__}: {exc}); "
                "check [pipelines] in society.toml"
            ) from None
        for method in ("advance", "in_flight_limit"):
            if not callable(getattr(pipeline, method, None)):
                raise ConfigError(
                    f"pipeline {name!r} = {target!r} has no {method}(run) method; "
                    "a pipeline needs advance(run) and in_flight_limit(run)"
                )
        return pipeline
