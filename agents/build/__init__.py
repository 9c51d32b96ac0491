"""The build pipeline: a ticket in, a spec checked red, a grinder routed by the spec's file
type, a ladder of code seats, a green artifact in a throwaway clone (docs/build.md).

    ticket.py    the §8.3 ticket checks (code, no model), done by the foreman
    routing.py   the one table of languages: path patterns, runner, syntax check, counts
    builddir.py  the build-dir rules: root, alias, scaffold, baseline, clone
    fence.py     how a test run and a cmd code seat are fenced (bwrap, rlimits, env, time)
    runs.py      one fenced run of the spec, counted
    codeseat.py  the code seats: a fenced cmd program in the clone, an openai JSON answer
    grind.py     the tier ladder
    report.py    the operator's report
    pipeline.py  the foreman's `build` pipeline
    steps.py     the step agents: @sandbox, @testdesigner, @py, @godev, @jsdev
    command.py   `bullpen build TICKET.md`
"""
