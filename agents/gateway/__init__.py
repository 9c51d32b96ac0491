"""The model gateway: every model call of the society passes one place.

    config.py    the [gateway] section: backends, policy, budgets, the ledger's place
    routing.py   a model name to its backend, by longest prefix
    policy.py    stop strings and template markers, enforced on the answer (streams too)
    budgets.py   calls, tokens and calls in flight per caller and per backend; fail closed
    ledger.py    one durable JSON line per call, and the usage table read from it
    tokens.py    caller tokens: one 0600 file per nick under secrets/gateway/
    upstream.py  one call to a backend: retries with backoff within the deadline
    server.py    the OpenAI-compatible ASGI app
    check.py     `gateway check`: a backend's chat template and markers (failure mode D)
    command.py   the subcommands; cli.py is their argparse side

See docs/gateway.md. Nothing below agents/gateway imports it: a seat that
goes through the gateway is given its URL and token file by agents/home.py.
"""
