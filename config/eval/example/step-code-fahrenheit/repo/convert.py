def to_fahrenheit(c):
    return c * 9 / 5
