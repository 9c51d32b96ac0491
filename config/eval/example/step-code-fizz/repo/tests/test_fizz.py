from fizz import fizz


def test_fifteen():
    assert fizz(30) == "FizzBuzz"


def test_others():
    assert [fizz(3), fizz(10), fizz(7)] == ["Fizz", "Buzz", "7"]
