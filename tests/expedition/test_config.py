from __future__ import annotations

from pathlib import Path

import pytest

from agents.expedition.config import ExpeditionConfig
from agents.home import Home
from room.errors import ConfigError


def home_with(tmp_path: Path, section: str) -> Home:
    (tmp_path / "society.toml").write_text(f'operator = "avery"\n\n[expedition]\n{section}\n')
    return Home(tmp_path)


def test_defaults_follow_the_spec(tmp_path: Path) -> None:
    """Batches of 10, 40 candidates, top 8, 150-500-word excerpts, unless configured."""
    config = ExpeditionConfig.from_home(home_with(tmp_path, 'operator_names = ["Avery"]'))
    assert (config.batch_size, config.max_candidates, config.top_for_scotoma) == (10, 40, 8)
    assert (config.excerpt_min_words, config.excerpt_max_words) == (150, 500)
    assert config.limits() == {"batch_size": 10, "max_candidates": 40, "top_for_scotoma": 8}


def test_operator_names_are_required(tmp_path: Path) -> None:
    """Without operator_names the digest gate cannot work, so the error says what to add."""
    with pytest.raises(ConfigError, match='operator_names = \\["Avery"\\]'):
        ExpeditionConfig.from_home(home_with(tmp_path, 'kb = "kb"'))


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    """A misspelt key is an error naming it, not a setting silently ignored."""
    with pytest.raises(ConfigError, match="batchsize"):
        ExpeditionConfig.from_home(home_with(tmp_path, 'operator_names = ["A"]\nbatchsize = 5'))


def test_excerpt_bounds_must_be_ordered(tmp_path: Path) -> None:
    """A minimum above the maximum is refused with both numbers."""
    section = 'operator_names = ["A"]\nexcerpt_min_words = 600'
    with pytest.raises(ConfigError, match=r"600.*500"):
        ExpeditionConfig.from_home(home_with(tmp_path, section))
