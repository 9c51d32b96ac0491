"""The pages as HTML: every value from the room or a file is escaped on its way in.

The templates (templates/*.html, package data) are `string.Template`s whose
holes are filled only with text this module escaped or markup it built from
escaped parts. The Room page's first lines are rendered here, escaped, so the
page shows them before its stream connects (a one-shot screenshot, a browser
with scripts off); every later line is built by the page's script with
`textContent` (static/app.js), so a body full of `<script>` is shown as the
text it is, either way.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from importlib.resources import files
from string import Template
from typing import Any
from urllib.parse import quote

from agents.web import charts
from agents.web.gate import candidates
from agents.web.runs import RunView, Step
from agents.web.society import Member

PAGES = ("room", "runs", "cost", "society")


def _template(name: str) -> Template:
    return Template(files("agents.web").joinpath("templates", name).read_text(encoding="utf-8"))


def e(value: Any) -> str:
    return escape(str(value), quote=True)


def layout(title: str, page: str, content: str, csrf: str) -> str:
    navs = {f"nav_{p}": ("here" if p == page else "") for p in PAGES}
    return _template("page.html").substitute(
        title=e(title), page=e(page), content=content, csrf=e(csrf), **navs
    )


def message(title: str, text: str) -> str:
    return _template("message.html").substitute(title=e(title), text=e(text))


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _counts(value: Any) -> str:
    """`{'cheap': 2, 'strong': 1}` as a person writes it: `cheap 2, strong 1`."""
    if isinstance(value, dict):
        return ", ".join(f"{name} {count}" for name, count in value.items()) or "none"
    return str(value)


def _line(line: dict[str, Any]) -> str:
    """One room line, as static/app.js's row() builds it, every value escaped."""
    ts = str(line.get("ts") or "").replace("T", " ").replace("Z", "")
    head = (
        f'<span class="seq">{e(line.get("seq"))}</span><time class="ts">{e(ts)}</time>'
        f'<span class="from">{e(line.get("from"))}</span><span class="arrow">→</span>'
        f'<span class="to">{e(line.get("to"))}</span><span class="type">{e(line.get("type"))}</span>'
    )
    if line.get("thread"):
        head += f'<span class="thread">{e(line["thread"])}</span>'
    head += (
        '<span class="verified">✓ verified</span>'
        if line.get("verified") is True
        else '<span class="unverified">unverified</span>'
    )
    data = line.get("data")
    details = ""
    if isinstance(data, dict) and data:
        details = (
            '<details class="data"><summary>data</summary>'
            f"<pre>{e(json.dumps(data, indent=1, ensure_ascii=False))}</pre></details>"
        )
    return (
        f'<li class="line {e(line.get("type") or "")}" data-seq="{e(line.get("seq"))}" '
        f'id="seq-{e(line.get("seq"))}"><div class="head">{head}</div>'
        f'<pre class="body">{e(line.get("body") or "")}</pre>{details}</li>'
    )


# -- Room ------------------------------------------------------------------------------


def room(params: dict[str, str], csrf: str, lines: list[dict[str, Any]] | None = None) -> str:
    fields = "".join(
        f'<label>{label} <input name="{name}" value="{e(params.get(name, ""))}" '
        f'placeholder="{hint}"></label>'
        for name, label, hint in (
            ("thread", "thread", "exp-…"),
            ("from", "from", "nick"),
            ("to", "to", "@nick"),
            ("type", "type", "ask, reply…"),
        )
    )
    query = "&".join(f"{k}={quote(v)}" for k, v in params.items() if v)
    content = (
        '<h1>Room</h1><form class="filters" method="get" action="/room">'
        f'{fields}<button>filter</button> <a href="/room">clear</a></form>'
        '<div id="chain" class="chain">chain: reading…</div>'
        f'<div id="log" class="log" data-query="{e(query)}">'
        '<button id="older" class="older" type="button">older lines</button>'
        f'<ol id="lines">{"".join(_line(line) for line in lines or [])}</ol></div>'
    )
    return layout("Room", "room", content, csrf)


# -- Runs ------------------------------------------------------------------------------


def _step(step: Step) -> str:
    seat = f'<span class="seat">seat {e(step.seat)}</span>' if step.seat else ""
    flags = "".join(f'<span class="flag">{e(flag)}</span>' for flag in step.flags)
    return (
        f'<li class="step {e(step.state)}"><span class="state">{e(step.state)}</span> '
        f'<span class="nick">@{e(step.nick)}</span> <span class="what">{e(step.body[:160])}</span> '
        f'{seat}{flags}<span class="took">{_seconds(step.duration)}</span></li>'
    )


def _cancel_form(run: RunView, csrf: str) -> str:
    """A running or waiting run's stop button (POST, with the page's CSRF token)."""
    if run.state not in ("open", "waiting"):
        return ""
    return (
        f'<form method="post" action="/cancel/{quote(run.thread)}" class="cancel">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        '<button name="action" value="cancel">cancel this run</button></form>'
    )


def _run(run: RunView, csrf: str = "") -> str:
    thread = e(run.thread)
    extra = ""
    if run.iterations:
        extra += f"<figure><figcaption>tier climb</figcaption>{charts.tier_climb(run.iterations)}</figure>"
    report = run.build_report
    if report is not None:
        verdict = "green" if report.get("green") else "red"
        extra += (
            f'<p class="build {verdict}">build {verdict}: tier {e(report.get("tier", "?"))}, '
            f"{e(report.get('passing', '?'))}/{e(report.get('total', '?'))} passing, "
            f"iterations: {e(_counts(report.get('iterations', '?')))}, "
            f"clone {e(report.get('clone', ''))}</p>"
        )
    if run.funnel is not None:
        extra += f"<figure><figcaption>funnel</figcaption>{charts.funnel(run.funnel)}</figure>"
    gate = ""
    if run.waiting_report() is not None and run.pipeline == "expedition":
        gate = f' <a class="gate-link" href="/gate/{quote(run.thread)}">answer the Dig Report</a>'
    final = run.final
    outcome = ""
    if final is not None:
        first = str(final.get("body", "")).strip().splitlines()
        outcome = f'<p class="outcome">{e(first[0][:300] if first else "")}</p>'
    steps = "".join(_step(s) for s in run.steps)
    return (
        f'<section class="run {e(run.state)}" id="run-{thread}" data-thread="{thread}"><h2>'
        f'<span class="pipeline">{e(run.pipeline)}</span> <a href="/room?thread={quote(run.thread)}">'
        f'{thread}</a> <span class="state">{e(run.state)}</span> '
        f'<span class="where">{e(run.where)}</span> '
        f'{_took(run)}{gate} <a class="cost-link" href="/cost?thread={quote(run.thread)}">'
        "cost</a></h2>"
        f'<p class="calls">{run.calls} model call(s) · tokens '
        f"{e('-' if run.tokens is None else run.tokens)}</p>"
        f'<p class="asked">asked by {e(run.start.get("from"))}: {e(str(run.start.get("body", ""))[:200])}</p>'
        f"{_lineage(run)}"
        f'<ol class="timeline">{steps}</ol>{extra}{outcome}{_cancel_form(run, csrf)}</section>'
    )


def _thread_link(thread: str) -> str:
    return f'<a href="/room?thread={quote(thread)}">{e(thread)}</a>'


def _lineage(run: RunView) -> str:
    """A fork names its parent and the step it forked at; a parent lists its forks."""
    parts = []
    if run.forked_from is not None:
        parent, seq = run.forked_from
        parts.append(f'<p class="fork">fork of {_thread_link(parent)} at seq {seq}</p>')
    if run.forks:
        links = ", ".join(_thread_link(t) for t in run.forks)
        parts.append(f'<p class="forks">forked as {links}</p>')
    return "".join(parts)


def _took(run: RunView) -> str:
    """A finished run's duration; an open or waiting one counts on from its start (the
    page's script ticks it each second: no new line arrives while a run waits on a person)."""
    if run.state in ("open", "waiting"):
        started = str(run.start.get("ts") or "")
        try:
            since = datetime.fromisoformat(started.replace("Z", "+00:00"))
        except ValueError:
            return f'<span class="took">{_seconds(run.duration)}</span>'
        now = (datetime.now(UTC) - since).total_seconds()
        return f'<span class="took" data-since="{e(started)}">{_seconds(max(now, 0.0))}</span>'
    return f'<span class="took">{_seconds(run.duration)}</span>'


def runs(all_runs: list[RunView], csrf: str) -> str:
    body = "".join(_run(r, csrf) for r in all_runs) or "<p>No pipeline run in the room yet.</p>"
    return layout("Runs", "runs", f'<h1>Runs</h1><div id="runs" data-live="1">{body}</div>', csrf)


# -- The gate --------------------------------------------------------------------------


def gate(run: RunView, csrf: str, notice: str = "", posted: bool = False) -> str:
    thread = e(run.thread)
    parts = [f"<h1>Gate: {thread}</h1>"]
    if notice:
        parts.append(f'<p class="notice" id="notice">{e(notice)}</p>')
    report = run.waiting_report()
    if report is not None and not posted:
        rows = "".join(
            f'<li><label><input type="checkbox" name="keep" value="{e(row["id"])}" checked> '
            f"<code>{e(row['id'])}</code> {e(row['file'])} <em>{e(row['kind'])}</em> "
            f'<span class="why">{e(row["why"])}</span></label></li>'
            for row in candidates(report)
        )
        parts.append(
            f'<pre class="report">{e(report.get("body", ""))}</pre>'
            f'<form method="post" action="/gate/{quote(run.thread)}" id="gate-form">'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">'
            f'<input type="hidden" name="report" value="{e(report.get("id", ""))}">'
            "<p>Keep the checked candidates (unchecked ones are dropped):</p>"
            f'<ul class="candidates">{rows}</ul>'
            '<button name="action" value="confirm" id="confirm">confirm</button>'
            '<p><label>or redirect: <input name="redirect" id="redirect" size="40" '
            'placeholder="what to look for instead"></label> '
            '<button name="action" value="redirect" id="do-redirect">redirect</button></p></form>'
        )
    elif run.final is None:
        parts.append("<p>No Dig Report waits for an answer in this run now.</p>")
    shown = report.get("id", "") if report is not None and not posted else ""
    parts.append(
        "<h2>The run's news</h2>"
        f'<div id="log" class="log" data-query="thread={quote(run.thread)}&amp;from=foreman&amp;type=reply"'
        f' data-skip="{e(shown)}"><ol id="lines"></ol></div>'
    )
    return layout(f"Gate {run.thread}", "gate", "".join(parts), csrf)


# -- Society ---------------------------------------------------------------------------


def _member(m: Member) -> str:
    lessons = "".join(f"<li>{e(text)}</li>" for text in m.lessons)
    return (
        f'<tr data-nick="{e(m.nick)}"><td>{e(m.nick)}</td><td>{e(m.kind)}</td>'
        f"<td>{e(m.seat or '–')}</td><td>{'yes' if m.trusted else 'no'}</td>"
        f'<td>{e(m.privileged or "no")}</td><td class="alive">{e(m.alive)}</td>'
        f"<td>{e(m.trust_check)}</td><td><ul>{lessons}</ul></td></tr>"
    )


def _usage(by: str, rows: dict[str, Any]) -> str:
    body = "".join(
        f"<tr><td>{e(name)}</td><td>{row.calls}</td><td>{row.failed}</td>"
        f"<td>{row.tokens_in}</td><td>{row.tokens_out}</td></tr>"
        for name, row in sorted(rows.items())
    )
    return (
        f"<h3>by {e(by)}</h3><table><tr><th>{e(by)}</th><th>calls</th><th>failed</th>"
        f"<th>tokens in</th><th>tokens out</th></tr>{body}</table>"
    )


_GROUP_NAMES = {"thread": "run", "seat": "seat", "caller": "nick", "day": "day"}


def _cost_rows(by: str, rows: dict[str, Any]) -> str:
    def cost(row: Any) -> str:
        return f"{row.cost:.4f}" if row.priced else "–"

    def name(value: str) -> str:
        if by == "thread" and value != "-":
            return f'<a href="/cost?thread={quote(value)}">{e(value)}</a>'
        return e(value)

    body = "".join(
        f'<tr data-{e(by)}="{e(key)}"><td>{name(key)}</td><td>{row.calls}</td>'
        f"<td>{row.tokens_in}</td><td>{row.tokens_out}</td><td>{cost(row)}</td></tr>"
        for key, row in sorted(rows.items())
    )
    shown = _GROUP_NAMES.get(by, by)
    return (
        f'<h2>per {e(shown)}</h2><table class="cost" id="by-{e(by)}"><tr><th>{e(shown)}</th>'
        f"<th>calls</th><th>tokens in</th><th>tokens out</th><th>cost</th></tr>{body}</table>"
    )


def _budgets(use: list[dict[str, Any]]) -> str:
    if not use:
        return "<p>No budget is set ([gateway.budget], [gateway.callers], [budgets]).</p>"
    body = "".join(
        f'<tr class="{"near" if u["near"] else ""}"><td>{e(u["budget"])}</td>'
        f"<td>{u['used']:.6g}</td><td>{u['limit']:.6g}</td><td>{u['share']:.0%}</td></tr>"
        for u in use
    )
    return (
        '<table id="budgets"><tr><th>budget</th><th>used</th><th>limit</th><th>share</th></tr>'
        f"{body}</table>"
    )


def cost(view: Any, csrf: str) -> str:
    """The cost page: per run, seat, nick and day, a per-day chart, and the budgets' use."""
    if view is None:
        content = "<h1>Cost</h1><p>No [gateway] is configured: no model call is counted.</p>"
        return layout("Cost", "cost", content, csrf)
    title = f"Cost of {view.thread}" if view.thread else "Cost"
    days = view.rows.get("day", {})
    chart = charts.per_day([(d, r.tokens_in, r.tokens_out) for d, r in sorted(days.items())])
    content = f"<h1>{e(title)}</h1>"
    if view.thread:
        content += f'<p><a href="/room?thread={quote(view.thread)}">the run in the room</a></p>'
    if chart:
        content += f"<figure><figcaption>tokens per day</figcaption>{chart}</figure>"
    content += "<h2>budgets</h2>" + _budgets(view.budgets)
    content += "".join(_cost_rows(by, rows) for by, rows in view.rows.items())
    return layout(title, "cost", content, csrf)


def society(
    members: list[Member], usage: dict[str, Any] | None, csrf: str, near: list[str] | None = None
) -> str:
    rows = "".join(_member(m) for m in members)
    content = (
        '<h1>Society</h1><table id="members"><tr><th>nick</th><th>handler</th><th>seat</th>'
        "<th>trusted</th><th>privileged</th><th>lurker</th><th>last trust check</th>"
        f"<th>lessons</th></tr>{rows}</table>"
    )
    if near:
        items = "".join(f"<li>{e(line)}</li>" for line in near)
        content += f'<h2>Budgets close to their limit</h2><ul id="near-limit">{items}</ul>'
    if usage is not None:
        content += "<h2>Gateway usage</h2>" + "".join(_usage(by, r) for by, r in usage.items())
    return layout("Society", "society", content, csrf)
