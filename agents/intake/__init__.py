"""What bullpen takes in from folders and files someone handed it, taken in one safe way.

A suite, a knowledge base, a build case's starting files, a replay's run
folder, a ticket, a proof bundle: each is hostile input, and so is anything a
link in it points at. `safecopy` is the one copy of a folder (links that
leave it refused, sizes summed and bounded before a byte is written);
`bounded` is the one read of a file (its size checked before it is read, its
nesting before it is parsed). Each refusal is a UsageError (exit 2) that
names the path and the bound.
"""
