"""The corpus expedition: find files in a knowledge base that embody a pattern.

Six steps, each a lurker nick, sequenced by the foreman through the room:

    0 context    (code)   the run's parameters and the blaze file's claims
    1 termgen    (model)  10-12 search terms, fan-out gated in code
    2 retriever  (code)   substring retrieval over the index, prescored, capped
    3 scorer     (model)  summaries scored 0-3 in batches, fanned out in parallel
    4 scotoma    (model)  0-2 deep cuts among the top rows
    5 excerpter  (code)   verbatim body excerpts behind the digest gates
      -> Dig Report to the operator; the run stops until the operator answers
    6 briefer    (code)   the brief, behind the voice-anchor and banned-phrase gates

Models are asked only for bounded JSON judgments; every gate is code. The
modules split by concept: `kb` reads the knowledge base and `blaze` the
blaze file, `terms`, `retrieve`, `scoring`, `scotoma`, `excerpts`, `brief`
hold each step's pure logic,
`prompts` and `local` are the two ways a judgment is answered, `steps` does
the I/O, `pipeline` is the foreman's half and `command` the operator's.
"""

HANDLERS = {
    "context": "agents.expedition.steps:build_context",
    "termgen": "agents.expedition.steps:gen_terms",
    "retriever": "agents.expedition.steps:retrieve_candidates",
    "scorer": "agents.expedition.steps:score_batch",
    "scotoma": "agents.expedition.steps:pick_scotoma",
    "excerpter": "agents.expedition.late_steps:extract_excerpts",
    "briefer": "agents.expedition.late_steps:assemble_brief",
}
"""Each step nick's `handler` for society.toml, by default nick."""
