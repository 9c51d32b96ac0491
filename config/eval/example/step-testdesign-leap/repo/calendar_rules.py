def is_leap(year):
    raise NotImplementedError
