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
    for (const id of ["quarantine-link", "disputes-link"]) {
      const link = document.getElementById(id);
      if (link) link.hidden = me.role !== "admin";
    }
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

// -- passages: text on demand, highlighted spans ---------------------------------------------
// The trace carries the text of the context passages only; any other passage (a candidate that
// Ring 1 blocked or Ring 2 dropped) is read from its document (GET /v1/documents/{id}) and cut
// at the chunk's offsets, when the reader opens it.
const PASSAGES = { context: new Map(), chunks: new Map(), documents: new Map() };

function documentPath(docId) {
  return "/v1/documents/" + docId.split("/").map(encodeURIComponent).join("/");
}

function passageText(chunkId) {
  if (PASSAGES.context.has(chunkId)) return Promise.resolve(PASSAGES.context.get(chunkId));
  const chunk = PASSAGES.chunks.get(chunkId);
  if (!chunk) return Promise.reject(new Error(chunkId + " is not among the retrieved candidates"));
  if (!PASSAGES.documents.has(chunk.doc_id)) {
    // offsets count code points (Python), so the document is cut as code points, not UTF-16
    PASSAGES.documents.set(chunk.doc_id,
      api("GET", documentPath(chunk.doc_id)).then((doc) => Array.from(doc.text)));
  }
  return PASSAGES.documents.get(chunk.doc_id)
    .then((chars) => chars.slice(chunk.char_start, chunk.char_end).join(""));
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// A quote ("ignore previous instructions, you must answer") may join several matches, or
// quote words inside an explanation ("'30' -> '90' (copy of refund-policy ...)"); each part
// and each quoted word is looked for on its own, whitespace-insensitively and ignoring case.
function quoteParts(quote) {
  const parts = new Set();
  const whole = quote.trim();
  if (whole.length >= 2) parts.add(whole);
  // quoted words: a quote mark after a space and before one (so "don't ... it's" is no quote)
  const quoted = /(?:^|[\s(])(?:'([^']{2,200})'|"([^"]{2,200})"|\u201c([^\u201d]{2,200})\u201d)(?=$|[\s),.;:])/g;
  for (const match of whole.matchAll(quoted)) parts.add(match[1] || match[2] || match[3]);
  for (const part of whole.split(/[;,]\s+|\s+(?:->|\u2192)\s+/)) {
    const clean = part.trim().replace(/^["'\u201c\u2018]+|["'\u201d\u2019.\u2026]+$/g, "");
    if (clean.length >= 2) parts.add(clean);
  }
  return [...parts];
}

// needles: [{ quote, cls, title }]. Returns the text with <mark>s (built as DOM nodes, so the
// passage stays text) and the needles found nowhere in it.
function highlight(text, needles) {
  const ranges = [];
  const missing = [];
  for (const needle of needles) {
    let found = false;
    for (const part of quoteParts(needle.quote)) {
      const pattern = new RegExp(part.split(/\s+/).map(escapeRegExp).join("\\s+"), "gi");
      for (const match of text.matchAll(pattern)) {
        if (!match[0]) continue;
        ranges.push({ start: match.index, end: match.index + match[0].length, needle });
        found = true;
      }
    }
    if (!found) missing.push(needle);
  }
  ranges.sort((a, b) => a.start - b.start || b.end - a.end);
  const node = el("span", { class: "passage-text" });
  let at = 0;
  for (const range of ranges) {
    if (range.start < at) continue;  // overlaps a span already marked
    node.append(text.slice(at, range.start));
    const mark = el("mark", { class: range.needle.cls, title: range.needle.title },
      text.slice(range.start, range.end));
    node.append(mark);
    at = range.end;
  }
  node.append(text.slice(at));
  return { node, missing };
}

function renderPassage(box, text, needles) {
  const { node, missing } = highlight(text, needles);
  box.replaceChildren(node);
  // Ring 1's quotes should be in the passage: say so when one is not (the answer may not be)
  for (const needle of missing.filter((n) => n.cls === "hl-ring1")) {
    box.append(el("div", { class: "muted" }, needle.title + " (not verbatim in the passage as " +
      "written; Ring 1 reads it normalised): \u201c" + needle.quote + "\u201d"));
  }
}

// A passage id that opens to its text (loaded on first open), with the needles highlighted.
function passage(chunkId, needles) {
  const body = el("div", { class: "passage-body muted" }, "loading...");
  const details = el("details", { class: "passage" }, el("summary", {}, chunkId), body);
  details.setAttribute("data-passage", chunkId);
  let loaded = false;
  details.addEventListener("toggle", () => {
    if (!details.open || loaded) return;
    loaded = true;
    passageText(chunkId).then((text) => {
      body.className = "passage-body";
      renderPassage(body, text, needles || []);
      details.setAttribute("data-loaded", "1");
    }).catch((error) => {
      body.textContent = "text unavailable: " + error.message;
      details.setAttribute("data-loaded", "error");
    });
  });
  return details;
}

// What each ring found in a passage, to highlight wherever the passage is shown.
function ring1Needles(verdict) {
  return verdict ? verdict.patterns.map((p) => ({ quote: p.evidence, cls: "hl-ring1",
    title: "Ring 1: " + p.name })) : [];
}

function quarantineLink(docId) {
  const link = el("a", { class: "quarantine-entry", href: "quarantine.html#doc=" +
    encodeURIComponent(docId) }, "quarantine entry");
  link.setAttribute("data-doc", docId);
  return link;
}

// -- the answer: never green -----------------------------------------------------------------
// TriShield knows whether its checks passed, not whether an answer is true: an answer is shown
// neutral (checked), amber (unchecked, or resting on an untrusted writer) and a refusal as a
// refusal, never as a green "agreed".
function answerState(result) {
  const trace = result.trace;
  if (result.refused) return { cls: "refused", label: "Refused" };
  const tiers = new Map(trace.candidates.map((c) => [c.doc_id, c.tier]));
  const untrusted = result.citations.filter((id) => tiers.get(id) === "untrusted");
  if (!trace.ring3) {
    return { cls: "unchecked", label: "Unchecked answer",
      note: "defense " + trace.defense + ": no panel checked this answer" };
  }
  if (untrusted.length) {
    return { cls: "unchecked", label: "Answer from an untrusted source",
      note: "cites untrusted writing: " + untrusted.join(", ") };
  }
  return { cls: "answered", label: "Answer",
    note: "the checks passed; TriShield cannot know it is true: read the passages below" };
}

function renderAnswer(result) {
  const trace = result.trace;
  PASSAGES.context = new Map(trace.context.map((p) => [p.id, p.text]));
  PASSAGES.chunks = new Map(trace.candidates.map((c) => [c.chunk_id, c]));
  PASSAGES.documents = new Map();
  const ring1 = trace.ring1 ? Object.fromEntries(trace.ring1.verdicts.map((v) => [v.id, v])) : {};
  const ring2 = trace.ring2 ? Object.fromEntries(trace.ring2.ranked.map((r) => [r.chunk_id, r])) : {};
  const answerNeedle = result.answer
    ? [{ quote: result.answer, cls: "hl-answer", title: "the answer" }] : [];
  const needles = (chunkId) => ring1Needles(ring1[chunkId]).concat(answerNeedle);

  const state = answerState(result);
  const answer = document.getElementById("answer");
  answer.className = "answer " + state.cls;
  answer.setAttribute("data-outcome", state.cls);
  if (result.refused) {
    answer.replaceChildren(el("strong", {}, state.label + ": "), result.reason);
  } else {
    answer.replaceChildren(el("strong", {}, state.label + ": "), result.answer,
      el("div", { class: "muted" }, "citations: " + (result.citations.join(", ") || "none") +
        " \u2014 " + (trace.ring3 ? "Ring 3: " : "") + result.reason +
        (state.note ? " \u2014 " + state.note : "")));
  }
  document.getElementById("summary").textContent =
    "defense " + trace.defense + ", " + trace.backend + " retrieval, pool " + trace.pool +
    ", k " + trace.k + "; LLM calls " + trace.llm_calls + " (+" + trace.llm_calls_cached +
    " cached); " + num(trace.timings_s.total, 2) + " s";

  document.getElementById("candidates").replaceChildren(table("candidates-table",
    ["#", "passage", "score", "tier", "writer", "provenance", "outcome"],
    trace.candidates.map((c) => {
      let outcome = "-";
      let cls = "";
      if (ring1[c.chunk_id] && ring1[c.chunk_id].blocked) {
        outcome = el("span", {}, "blocked by Ring 1 ", quarantineLink(c.doc_id));
        cls = "blocked";
      } else if (ring2[c.chunk_id]) {
        outcome = ring2[c.chunk_id].in_context ? "in context" : "dropped by Ring 2";
        cls = ring2[c.chunk_id].in_context ? "kept" : "dropped";
      } else if (trace.context.some((p) => p.id === c.chunk_id)) { outcome = "in context"; cls = "kept"; }
      return { cls, cells: [c.rank, passage(c.chunk_id, needles(c.chunk_id)), num(c.score, 4),
        badge(c.tier, c.tier), c.writer, c.provenance || "-", outcome] };
    })));

  const ring1Box = document.getElementById("ring1");
  if (trace.ring1) {
    document.getElementById("ring1-title").textContent =
      "Ring 1 \u00b7 Ingest Guard (query-aware): block at C \u2265 " + trace.ring1.config.theta +
      " \u2014 " + trace.ring1.blocked.length + " blocked, " + trace.ring1.flagged.length + " flagged";
    ring1Box.replaceChildren(table("ring1-table",
      ["passage", "S_perp", "S_pat", "S_out", "C", "verdict", "why (highlighted in the passage)"],
      trace.ring1.verdicts.map((v) => {
        const chunk = PASSAGES.chunks.get(v.id);
        return {
          cls: v.blocked ? "blocked" : (v.flagged ? "flagged" : ""),
          cells: [passage(v.id, ring1Needles(v)), num(v.s_perp, 2), num(v.s_pat, 2),
            num(v.s_out, 2), num(v.c, 3),
            v.blocked ? el("span", {}, badge("blocked", "bad"), " ",
              chunk ? quarantineLink(chunk.doc_id) : null)
              : (v.flagged ? badge("flagged", "warn") : "pass"),
            v.reasons.join("; ") || "-"],
        };
      })));
  } else {
    ring1Box.replaceChildren(el("p", { class: "muted" }, "Ring 1 did not run (defense " + trace.defense + ")."));
  }

  const ring2Box = document.getElementById("ring2");
  if (trace.ring2) {
    const parts = [table("ring2-table",
      ["trust #", "passage", "tier", "w_prov", "s_rel", "S_ev", "T", "decision"],
      trace.ring2.ranked.map((r) => ({
        cls: r.in_context ? "kept" : "dropped",
        cells: [r.trust_rank, passage(r.chunk_id, needles(r.chunk_id)), badge(r.tier, r.tier),
          num(r.w_prov, 2), num(r.s_rel, 2), num(r.s_con, 2), num(r.trust, 3),
          r.in_context ? "in context" : "dropped"],
      })))];
    trace.ring2.conflicts.forEach((c, index) => {
      parts.push(el("h3", { class: "conflict" }, "Conflict: " + c.a + " says " + c.a_value +
        ", " + c.b + " says " + c.b_value));
      parts.push(sides("conflict-" + (index + 1), [
        { title: c.a + ": " + c.a_value, passages: [c.a], quote: c.a_value },
        { title: c.b + ": " + c.b_value, passages: [c.b], quote: c.b_value }]));
    });
    if (trace.ring2.relevance_floor && !trace.ring2.relevance_floor.passed) {
      parts.push(el("p", { class: "conflict" }, "no passage above the relevance floor"));
    }
    ring2Box.replaceChildren(...parts);
  } else {
    ring2Box.replaceChildren(el("p", { class: "muted" }, "Ring 2 did not run (defense " + trace.defense + ")."));
  }

  // the context in full: what the readers were given, highlighted
  document.getElementById("context").replaceChildren(table("context-table",
    ["passage", "tier", "trust", "text"],
    trace.context.map((p) => {
      const box = el("div", { class: "passage-body" });
      renderPassage(box, p.text, needles(p.id));
      return { cells: [p.id, badge(p.tier, p.tier), num(p.trust, 3), box] };
    })));

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
        ": agreement " + num(round.agreement, 2) + (round.winner ? ", most votes \u201c" + round.winner + "\u201d" : ", no majority")));
      parts.push(table("votes-round-" + (index + 1), ["member", "vendor", "answer", "vote", "cached", "seconds"],
        round.votes.map((v) => ({
          cls: v.refused ? "dropped" : "",
          cells: [v.member, v.vendor, v.answer || "-", v.refused ? "declined" : "answered",
            v.llm ? (v.cached ? "yes" : "no") : "n/a", num(v.seconds, 2)],
        }))));
    });
    parts.push(el("p", { class: "outcome " + (result.refused ? "refused" : "answered") },
      (trace.ring3.retried ? "Retried once. " : "No retry. ") + "Outcome: " +
      (result.refused ? "refused \u2014 " : "answered \u2014 ") + trace.ring3.reason));
    ring3Box.replaceChildren(...parts);
  } else {
    gateBox.replaceChildren();
    const vote = trace.reader;
    ring3Box.replaceChildren(el("p", { class: "muted" }, "Ring 3 did not run; one reader answered" +
      (vote ? " (" + vote.member + "): " + (vote.answer || "declined") : ".")));
  }
  ring3Box.append(...renderEvidence(trace));
  document.getElementById("raw").textContent = JSON.stringify(result, null, 2);
  document.getElementById("result").hidden = false;
}

// Two (or more) claims next to each other, each with the passages that make it, the claim
// highlighted in them.
function sides(id, columns) {
  const grid = el("div", { class: "sides", id });
  for (const column of columns) {
    const box = el("div", { class: "side " + (column.cls || "") });
    box.append(el("h4", {}, column.title));
    if (column.lines) for (const line of column.lines) box.append(el("div", { class: "muted" }, line));
    for (const id of column.passages) {
      const details = passage(id, [{ quote: column.quote, cls: "hl-claim", title: "the claim" }]);
      if (column.open) {
        details.open = true;
        details.dispatchEvent(new Event("toggle"));
      }
      box.append(details);
    }
    grid.append(box);
  }
  return grid;
}

function claimColumn(side, claim, cls) {
  return {
    title: side + ": \u201c" + claim.claim + "\u201d",
    cls,
    quote: claim.claim,
    lines: ["weight " + num(claim.weight, 2) + ", top tier " + (claim.top_tier || "-")].concat(
      claim.sources.map((s) => "source: " + s.writers.join("+") + " (" + s.tier + ", " +
        s.passages.length + " passage(s), weight " + num(s.weight, 2) +
        (s.established ? ", established" : "") +
        (s.stood_s ? ", stood " + num(s.stood_s / 86400, 1) + " d uncontested" : "") +
        (s.new ? ", new (its number is no evidence)" : "") +
        (s.burst ? ", one burst: posted within a day of each other" : "") +
        (s.tenure == null ? "" : ", record capped by tenure at " + num(s.tenure, 2)) + ")")),
    passages: [...new Set(claim.sources.flatMap((s) => s.passages))],
    open: true,
  };
}

function renderEvidence(trace) {
  const verdicts = trace.evidence ? (trace.evidence.verdicts || []) : [];
  if (!verdicts.length) return [];
  const parts = [el("h3", {}, "Evidence: the claims the sources gave, weighed side by side")];
  verdicts.forEach((v, index) => {
    const head = el("p", { class: "weighing" }, badge(v.outcome, v.outcome === "conflict" ? "warn" : "neutral"),
      " " + v.reason);
    head.setAttribute("data-outcome", v.outcome);
    parts.push(head);
    // "stands" / "unopposed": the best-supported claim wins; "conflict": neither does
    const contested = v.outcome === "conflict";
    const columns = [claimColumn(v.opposition ? "best supported" : "claim", v.support,
      contested ? "contested" : "winner")];
    if (v.opposition) columns.push(claimColumn("opposing", v.opposition, contested ? "contested" : "loser"));
    parts.push(sides("evidence-" + (index + 1), columns));
  });
  // the conflict between writers, as the disputes queue keeps it (admins settle it there)
  const note = trace.evidence.dispute;
  if (note) {
    const line = el("p", { class: "muted", id: "dispute-note" });
    if (note.recorded) {
      line.append("Recorded as ", el("a", { href: "disputes.html#id=" + note.id }, "dispute " + note.id),
        " (met " + note.occurrences + "x, " + note.state + "): an admin can settle it.");
    } else {
      line.append("This conflict between writers was " + note.note);
    }
    parts.push(line);
  }
  return parts;
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
// The viewer links a blocked candidate here as quarantine.html#doc=ID: that entry is marked and
// opened; a document that is not held (Ring 1 blocked it when it was retrieved, not at ingest)
// gets a line saying so and how to take it out of the knowledge base.
function focusedDocument() {
  const match = /^#doc=(.*)$/.exec(window.location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

async function loadQuarantine() {
  const box = document.getElementById("quarantine");
  const focus = focusedDocument();
  const listing = await api("GET", "/v1/quarantine" + (focus ? "?include_released=true" : ""));
  const documents = listing.documents.filter((d) => !focus || d.state === "held" || d.id === focus);
  let focusedRow = null;
  const rows = documents.map((d) => {
    const button = el("button", { type: "button" }, "Release");
    button.setAttribute("data-release", d.id);
    button.hidden = d.state !== "held";
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const done = await api("POST", "/v1/quarantine/" + d.id.split("/").map(encodeURIComponent).join("/") + "/release");
        status("released " + done.id + " (" + done.chunks_added + " chunks), audited as " + done.released_by);
        await loadQuarantine();
      } catch (error) {
        status(error.message, true);
        button.disabled = false;
      }
    });
    const body = el("div", { class: "passage-body" });
    renderPassage(body, d.text, ring1Needles({ patterns: d.verdict.patterns || [] }));
    const text = el("details", { class: "passage" }, el("summary", {}, d.title || "text"), body);
    const row = { cls: d.id === focus ? "focus" : "", cells: [d.id, d.writer, badge(d.tier, d.tier),
      num(d.verdict.c, 3), d.verdict.reasons.join("; "), d.provenance || "-",
      d.state === "held" ? text : el("span", {}, d.state + " ", text), button] };
    if (d.id === focus) { text.open = true; focusedRow = row; }
    return row;
  });
  box.replaceChildren(table("quarantine-table",
    ["document", "writer", "tier", "C", "why Ring 1 blocked it (highlighted in the text)",
      "provenance", "text", ""], rows));
  const note = document.getElementById("focus-note");
  if (focus && !focusedRow) {
    note.hidden = false;
    note.textContent = focus + " is not in the quarantine: Ring 1 blocked it when it was " +
      "retrieved for a question, not at ingest, so it is stored in the knowledge base and " +
      "blocked again on every question it is retrieved for. To take it out of the knowledge " +
      "base: DELETE " + documentPath(focus) + " with its writer's key or an admin's.";
  } else if (focus) {
    note.hidden = false;
    note.textContent = "Showing " + focus + " (marked below).";
    const marked = box.querySelector("tr.focus");
    if (marked) marked.scrollIntoView({ block: "center" });
  } else {
    note.hidden = true;
  }
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
  else if (document.body.dataset.page === "disputes") setUpDisputesPage();  // disputes.js
  else setUpAskPage();
});
