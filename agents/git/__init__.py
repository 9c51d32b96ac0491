"""bullpen's git: the one way any part of bullpen runs git, on repositories it does not trust.

safe.py   run git with no configuration a repository's writer can reach, the repository
          checked first (the build, the backpass, the librarian, the demo)
guard.py  what a repository may say to that git: the config allow-list, the attributes
apart.py  a work tree whose git directory lives apart from it: the grinder's clone, which
          the fenced side writes and bullpen's git reads only as data
"""
