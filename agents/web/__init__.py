"""`bullpen web`: a read-mostly web view of the society, true to the room.

Everything it shows is read from the room through the hub's `/read` (and
from the memory index and the gateway ledger where they exist); everything
it does is a post the room records. It keeps no state of its own: closing
it loses nothing.
"""
