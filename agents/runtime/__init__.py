"""What runs for one nick: the lurker loop, its handler kinds, the wake rules, the cursor,
the step contract, and `bullpen up`'s supervisor (with the free ports a program picks for
the listeners it starts itself, netports.py)."""
