// bullpen web: the live log. Every room line is built with textContent, never innerHTML:
// a body full of <script> is shown as the text it is.
"use strict";
(function () {
  const MAX_ROWS = 5000;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function row(line) {
    const li = el("li", "line " + (line.type || ""));
    li.dataset.seq = line.seq;
    li.id = "seq-" + line.seq;
    const head = el("div", "head");
    head.append(
      el("span", "seq", line.seq),
      el("time", "ts", (line.ts || "").replace("T", " ").replace("Z", "")),
      el("span", "from", line.from),
      el("span", "arrow", "→"),
      el("span", "to", line.to),
      el("span", "type", line.type)
    );
    if (line.thread) head.append(el("span", "thread", line.thread));
    head.append(
      line.verified === true
        ? el("span", "verified", "✓ verified")
        : el("span", "unverified", "unverified")
    );
    li.append(head, el("pre", "body", line.body));
    if (line.data && Object.keys(line.data).length) {
      const details = el("details", "data");
      details.append(el("summary", null, "data"), el("pre", null, JSON.stringify(line.data, null, 1)));
      li.append(details);
    }
    return li;
  }

  function chainText(box, s) {
    box.className = "chain";
    let text = s.connected ? "hub connected" : "hub unreachable: retrying";
    if (!s.connected) box.classList.add("down");
    text += " · chain audited to seq " + s.audited + " of " + s.head;
    if (s.broken) {
      box.classList.add("broken");
      text += " · CHAIN BROKEN at seq " + s.broken.seq + ": " + s.broken.reason;
    }
    const cp = s.checkpoint;
    if (cp) {
      if (cp.seq !== undefined) {
        const when = new Date(cp.ts * 1000).toISOString().replace("T", " ").slice(0, 19);
        text += " · last signed checkpoint seq " + cp.seq + " (" + when + "): " + cp.state;
      } else {
        text += " · checkpoint: " + cp.text;
      }
      if (cp.state === "bad") box.classList.add("broken");
    }
    if (s.problem) {
      box.classList.add("broken");
      text += " · " + s.problem;
    }
    box.textContent = text;
  }

  function live(log) {
    const list = document.getElementById("lines");
    const chain = document.getElementById("chain");
    const older = document.getElementById("older");
    const query = log.dataset.query || "";
    const skip = log.dataset.skip || ""; // a line the page already shows (the gate's report)
    // Lines the server rendered into the page: the stream's backlog starts after them.
    let newest = 0;
    let oldest = null;
    list.querySelectorAll("li[data-seq]").forEach(function (li) {
      const seq = Number(li.dataset.seq);
      newest = Math.max(newest, seq);
      oldest = oldest === null ? seq : Math.min(oldest, seq);
    });
    const es = new EventSource("/events" + (query ? "?" + query : ""));
    // The backlog goes into one fragment and into the page at once when the stream says
    // "ready": one layout for the first paint, not one per line.
    let backlog = document.createDocumentFragment();
    es.addEventListener("line", function (ev) {
      const line = JSON.parse(ev.data);
      if (line.seq <= newest) return;
      if (skip && line.id === skip) return;
      newest = line.seq;
      if (oldest === null) oldest = line.seq;
      if (backlog) {
        backlog.append(row(line));
        return;
      }
      const stick = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
      list.append(row(line));
      while (list.childElementCount > MAX_ROWS) {
        list.firstElementChild.remove();
        oldest = Number(list.firstElementChild.dataset.seq);
      }
      if (stick && document.body.dataset.page === "room") {
        window.scrollTo(0, document.body.scrollHeight);
      }
    });
    es.addEventListener("status", function (ev) {
      if (chain) chainText(chain, JSON.parse(ev.data));
    });
    es.addEventListener("ready", function () {
      if (backlog) {
        list.append(backlog);
        backlog = null;
      }
      log.dataset.ready = "1";
      if (!performance.getEntriesByName("lines-shown").length) performance.mark("lines-shown");
      if (document.body.dataset.page === "room") window.scrollTo(0, document.body.scrollHeight);
    });
    if (older) {
      older.addEventListener("click", function () {
        const before = oldest === null ? newest + 1 : oldest;
        fetch("/api/lines?before=" + before + (query ? "&" + query : ""), { credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (answer) {
            const lines = answer.lines || [];
            if (!lines.length) { older.textContent = "no older lines"; older.disabled = true; return; }
            const frag = document.createDocumentFragment();
            lines.forEach(function (line) { frag.append(row(line)); });
            list.prepend(frag);
            oldest = lines[0].seq;
          });
      });
    }
  }

  function liveRuns(box) {
    let timer = null;
    const es = new EventSource("/events?n=0");
    es.addEventListener("line", function () {
      if (timer) return;
      timer = setTimeout(function () {
        timer = null;
        fetch("/runs", { credentials: "same-origin" })
          .then(function (r) { return r.text(); })
          .then(function (html) {
            const doc = new DOMParser().parseFromString(html, "text/html");
            const fresh = doc.getElementById("runs");
            if (fresh) box.replaceChildren(...fresh.childNodes);
          });
      }, 300);
    });
  }

  // An open or waiting run's duration counts on, though no new line comes while it waits.
  function tick() {
    document.querySelectorAll(".took[data-since]").forEach(function (span) {
      const s = Math.max(0, (Date.now() - Date.parse(span.dataset.since)) / 1000);
      span.textContent = s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(1) + " s";
    });
  }
  setInterval(tick, 1000);

  const log = document.getElementById("log");
  if (log) live(log);
  const runs = document.querySelector("#runs[data-live]");
  if (runs) liveRuns(runs);
})();
