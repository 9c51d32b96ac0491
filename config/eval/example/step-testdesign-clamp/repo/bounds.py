def clamp(x, lo, hi):
    raise NotImplementedError
