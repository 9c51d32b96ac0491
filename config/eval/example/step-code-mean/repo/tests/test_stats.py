import pytest
from stats import mean


def test_mean():
    assert mean([2, 4, 6]) == 4


def test_empty():
    with pytest.raises(ValueError):
        mean([])
