"""The model gateway: every model call of the society passes one place.

    config.py    the [gateway] section: backends, policy, budgets, the ledger's place
    body.py      a request body read strictly: every bad body a 400 naming the field
    screening.py the home's secret screen on every request (trust/screen.py)
    routing.py   a model name to its backend: a listed id, else the longest prefix
    catalog.py   /v1/models: the backends' lists, learnt so every listed id routes
    policy.py    stop strings and template markers, enforced on the answer (streams too)
    masking.py   a backend's key masked out of whatever it sends back
    answer.py    a whole or streamed answer, every choice masked and cut
    budgets.py   calls, tokens and calls in flight per caller and per backend; fail closed
    ledger.py    one durable JSON line per call, and the usage table read from it
    tokens.py    caller tokens: one 0600 file per nick under secrets/gateway/
    upstream.py  one call to a backend: retries with backoff within the deadline
    http1.py     the lean keep-alive HTTP/1.1 client those calls use
    server.py    the OpenAI-compatible ASGI app
    check.py     `gateway check`: a backend's chat template and markers (failure mode D)
    command.py   the subcommands; cli.py is their argparse side

See docs/gateway.md. Nothing below agents/gateway imports it: a seat that
goes through the gateway is given its URL and token file by agents/home.py.
"""
