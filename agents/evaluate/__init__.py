"""`bullpen eval`: suites of cases run against seat assignments, and their scoreboard.

cases       the case format (pydantic) and loading a suite folder
society     a fresh temporary home with the seats under test, its society up
runners     one case run in that society: expedition, build, backpass
scoreboard  the per-seat tally, printed or as JSON
cli         `bullpen eval`
"""
