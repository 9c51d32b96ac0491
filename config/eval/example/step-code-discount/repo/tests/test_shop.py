from shop import total


def test_quarter_off():
    assert total(100, 0.25) == 75


def test_no_discount():
    assert total(40, 0) == 40
