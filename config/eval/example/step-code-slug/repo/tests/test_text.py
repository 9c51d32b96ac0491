from text import slug


def test_words_joined():
    assert slug("Waiting Is Work") == "waiting-is-work"


def test_extra_spaces():
    assert slug("  Two   Words ") == "two-words"
