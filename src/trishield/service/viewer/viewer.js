// TriShield trace viewer. Every string from the server (documents are attacker-writable) is
// put on the page with textContent, never as HTML; the page's CSP forbids inline script too.
"use strict";

const KEY_STORAGE = "trishield-api-key";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function num(value, digits) {
  return value === null || value === undefined ? "-" : Number(value).toFixed(digits);
}

function table(id, headers, rows) {
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  const body = rows.length
    ? rows.map((r) => el("tr", { class: r.cls || "" }, ...r.cells.map((c) => el("td", {}, c))))
    : [el("tr", {}, el("td", { colSpan: headers.length, class: "muted" }, "(none)"))];
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, ...body));
}

function badge(text, cls) {
  return el("span", { class: "badge " + cls }, text);
}

function status(message, isError) {
  const node = document.getElementById("status");
  node.textContent = message || "";
  node.className = "status" + (isError ? " error" : "");
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + apiKey() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const payload = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) {
    throw new Error(response.status + ": " + (payload.error || "request failed"));
  }
  return payload;
}

async function identify() {
  const who = document.getElementById("whoami");
  if (!apiKey()) { who.textContent = "no key"; return null; }
  try {
    const me = await api("GET", "/v1/whoami");
    who.textContent = me.name + " (" + me.role + ", " + me.tier + ")";
    document.getElementById("quarantine-link").hidden = me.role !== "admin";
    return me;
  } catch (error) {
    who.textContent = "key refused: " + error.message;
    return null;
  }
}

function setUpKeyForm(onReady) {
  const form = document.getElementById("key-form");
  const input = document.getElementById("api-key");
  input.value = apiKey();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_STORAGE, input.value.trim());
    const me = await identify();
    if (me) onReady(me);
  });
  identify().then((me) => { if (me) onReady(me); });
}

// -- ask page -------------------------------------------------------------------------------
async function loadPanel() {
  const box = document.getElementById("panel");
  const info = await api("GET", "/v1/panel");
  box.replaceChildren(el("legend", {}, "Panel"));
  for (const name of info.allowed) {
    const input = el("input", { type: "checkbox", value: name, checked: info.default.includes(name) });
    input.setAttribute("data-member", name);
    box.append(el("label", { class: "member" }, input, " " + name));
  }
}

function chosenPanel() {
  return [...document.querySelectorAll("#panel input:checked")].map((i) => i.value);
}

function renderAnswer(result) {
  const trace = result.trace;
  const answer = document.getElementById("answer");
  if (result.refused) {
    answer.className = "answer refused";
    answer.replaceChildren(el("strong", {}, "Refused: "), result.reason);
  } else {
    answer.className = "answer answered";
    answer.replaceChildren(el("strong", {}, "Answer: "), result.answer,
      el("div", { class: "muted" }, "citations: " + (result.citations.join(", ") || "none") +
        " \u2014 " + result.reason));
  }
  document.getElementById("summary").textContent =
    "defense " + trace.defense + ", " + trace.backend + " retrieval, pool " + trace.pool +
    ", k " + trace.k + "; LLM calls " + trace.llm_calls + " (+" + trace.llm_calls_cached +
    " cached); " + num(trace.timings_s.total, 2) + " s";

  const ring1 = trace.ring1 ? Object.fromEntries(trace.ring1.verdicts.map((v) => [v.id, v])) : {};
  const ring2 = trace.ring2 ? Object.fromEntries(trace.ring2.ranked.map((r) => [r.chunk_id, r])) : {};
  document.getElementById("candidates").replaceChildren(table("candidates-table",
    ["#", "passage", "score", "tier", "writer", "provenance", "outcome"],
    trace.candidates.map((c) => {
      let outcome = "-";
      let cls = "";
      if (ring1[c.chunk_id] && ring1[c.chunk_id].blocked) { outcome = "blocked by Ring 1"; cls = "blocked"; }
      else if (ring2[c.chunk_id]) {
        outcome = ring2[c.chunk_id].in_context ? "in context" : "dropped by Ring 2";
        cls = ring2[c.chunk_id].in_context ? "kept" : "dropped";
      } else if (trace.context.some((p) => p.id === c.chunk_id)) { outcome = "in context"; cls = "kept"; }
      return { cls, cells: [c.rank, c.chunk_id, num(c.score, 4), badge(c.tier, c.tier), c.writer,
        c.provenance || "-", outcome] };
    })));

  const ring1Box = document.getElementById("ring1");
  if (trace.ring1) {
    document.getElementById("ring1-title").textContent =
      "Ring 1 \u00b7 Ingest Guard (query-aware): block at C \u2265 " + trace.ring1.config.theta +
      " \u2014 " + trace.ring1.blocked.length + " blocked, " + trace.ring1.flagged.length + " flagged";
    ring1Box.replaceChildren(table("ring1-table",
      ["passage", "S_perp", "S_pat", "S_out", "C", "verdict", "why"],
      trace.ring1.verdicts.map((v) => ({
        cls: v.blocked ? "blocked" : (v.flagged ? "flagged" : ""),
        cells: [v.id, num(v.s_perp, 2), num(v.s_pat, 2), num(v.s_out, 2), num(v.c, 3),
          v.blocked ? badge("blocked", "bad") : (v.flagged ? badge("flagged", "warn") : "pass"),
          v.reasons.join("; ") || "-"],
      }))));
  } else {
    ring1Box.replaceChildren(el("p", { class: "muted" }, "Ring 1 did not run (defense " + trace.defense + ")."));
  }

  const ring2Box = document.getElementById("ring2");
  if (trace.ring2) {
    const parts = [table("ring2-table",
      ["trust #", "passage", "tier", "w_prov", "s_rel", "S_ev", "T", "decision"],
      trace.ring2.ranked.map((r) => ({
        cls: r.in_context ? "kept" : "dropped",
        cells: [r.trust_rank, r.chunk_id, badge(r.tier, r.tier), num(r.w_prov, 2), num(r.s_rel, 2),
          num(r.s_con, 2), num(r.trust, 3), r.in_context ? "in context" : "dropped"],
      })))];
    for (const c of trace.ring2.conflicts) {
      parts.push(el("p", { class: "conflict" }, "conflict: " + c.a + " says " + c.a_value +
        ", " + c.b + " says " + c.b_value));
    }
    if (trace.ring2.relevance_floor && !trace.ring2.relevance_floor.passed) {
      parts.push(el("p", { class: "conflict" }, "no passage above the relevance floor"));
    }
    ring2Box.replaceChildren(...parts);
  } else {
    ring2Box.replaceChildren(el("p", { class: "muted" }, "Ring 2 did not run (defense " + trace.defense + ")."));
  }

  document.getElementById("context").replaceChildren(table("context-table",
    ["passage", "tier", "trust", "text"],
    trace.context.map((p) => ({ cells: [p.id, badge(p.tier, p.tier), num(p.trust, 3),
      p.text.length > 220 ? p.text.slice(0, 217) + "..." : p.text] }))));

  const gateBox = document.getElementById("gate-info");
  const ring3Box = document.getElementById("ring3");
  if (trace.ring3) {
    gateBox.replaceChildren(el("p", {}, "Gate (" + trace.gate.mode + "): panel " +
      (trace.gate.use_panel ? "convened" : "not convened") + " \u2014 " + trace.gate.reasons.join("; ")));
    const parts = [];
    trace.ring3.rounds.forEach((round, index) => {
      const what = trace.ring3.retried && index > 0 ? " (retry without the least-trusted third)"
        : trace.ring3.rounds.length > 1 ? " (one source: " + round.context.join(", ") + ")" : "";
      parts.push(el("h3", {}, "Round " + (index + 1) + what +
        ": agreement " + num(round.agreement, 2) + (round.winner ? ", winner \u201c" + round.winner + "\u201d" : ", no winner")));
      parts.push(table("votes-round-" + (index + 1), ["member", "vendor", "answer", "vote", "cached", "seconds"],
        round.votes.map((v) => ({
          cls: v.refused ? "dropped" : "",
          cells: [v.member, v.vendor, v.answer || "-", v.refused ? "declined" : "answered",
            v.llm ? (v.cached ? "yes" : "no") : "n/a", num(v.seconds, 2)],
        }))));
    });
    parts.push(el("p", {}, (trace.ring3.retried ? "Retried once. " : "No retry. ") +
      "Outcome: " + trace.ring3.reason));
    const verdicts = trace.evidence ? (trace.evidence.verdicts || []) : [];
    if (verdicts.length) {
      parts.push(el("h3", {}, "Evidence: the claims the sources gave, weighed"));
      const rows = [];
      for (const v of verdicts) {
        const sides = [["best", v.support]].concat(v.opposition ? [["runner-up", v.opposition]] : []);
        for (const [side, claim] of sides) {
          rows.push({ cls: side === "best" && v.outcome !== "conflict" ? "kept" : "dropped",
            cells: [v.outcome, side, claim.claim, claim.top_tier || "-", num(claim.weight, 2),
              claim.sources.map((s) => s.writers.join("+") + " (" + s.tier + ", " + s.passages.length +
                " passage(s), weight " + num(s.weight, 2) + (s.established ? ", established" : "") + ")").join("; ")] });
        }
      }
      parts.push(table("evidence-table", ["outcome", "side", "claim", "top tier", "weight", "independent sources"], rows));
      parts.push(el("p", {}, verdicts[verdicts.length - 1].reason));
    }
    ring3Box.replaceChildren(...parts);
  } else {
    gateBox.replaceChildren();
    const vote = trace.reader;
    ring3Box.replaceChildren(el("p", { class: "muted" }, "Ring 3 did not run; one reader answered" +
      (vote ? " (" + vote.member + "): " + (vote.answer || "declined") : ".")));
  }
  document.getElementById("raw").textContent = JSON.stringify(result, null, 2);
  document.getElementById("result").hidden = false;
}

function setUpAskPage() {
  setUpKeyForm(() => loadPanel().catch((error) => status(error.message, true)));
  document.getElementById("ask-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { question: document.getElementById("question").value,
      defense: document.getElementById("defense").value };
    const backend = document.getElementById("backend").value;
    const gate = document.getElementById("gate").value;
    if (backend) body.backend = backend;
    if (gate) body.gate = gate;
    const panel = chosenPanel();
    if (panel.length) body.panel = panel;
    const button = document.getElementById("ask-button");
    button.disabled = true;
    status("asking...");
    try {
      renderAnswer(await api("POST", "/v1/ask", body));
      status("");
      document.body.setAttribute("data-state", "answered");
    } catch (error) {
      status(error.message, true);
      document.body.setAttribute("data-state", "error");
    } finally {
      button.disabled = false;
    }
  });
}

// -- quarantine page ------------------------------------------------------------------------
async function loadQuarantine() {
  const box = document.getElementById("quarantine");
  const listing = await api("GET", "/v1/quarantine");
  const rows = listing.documents.map((d) => {
    const button = el("button", { type: "button" }, "Release");
    button.setAttribute("data-release", d.id);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const done = await api("POST", "/v1/quarantine/" + encodeURI(d.id) + "/release");
        status("released " + done.id + " (" + done.chunks_added + " chunks), audited as " + done.released_by);
        await loadQuarantine();
      } catch (error) {
        status(error.message, true);
        button.disabled = false;
      }
    });
    const text = el("details", {}, el("summary", {}, d.title || "text"), el("pre", {}, d.text));
    return { cells: [d.id, d.writer, badge(d.tier, d.tier), num(d.verdict.c, 3),
      d.verdict.reasons.join("; "), d.provenance || "-", text, button] };
  });
  box.replaceChildren(table("quarantine-table",
    ["document", "writer", "tier", "C", "why Ring 1 blocked it", "provenance", "text", ""], rows));
  document.body.setAttribute("data-state", "loaded");
}

function setUpQuarantinePage() {
  setUpKeyForm((me) => {
    if (me.role !== "admin") { status("the quarantine is for admins; this key is " + me.role, true); return; }
    status("");
    loadQuarantine().catch((error) => status(error.message, true));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "quarantine") setUpQuarantinePage();
  else setUpAskPage();
});
