"""The operator docs, shipped as package data (agents.docs) so `bullpen docs NAME` prints them."""
