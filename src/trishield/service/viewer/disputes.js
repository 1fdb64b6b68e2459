// TriShield disputes page (admins): the conflicts between writers TriShield met, and settling
// one. Needs viewer.js (el, table, badge, status, api, renderPassage, setUpKeyForm). Every
// string from the server is put on the page as text, never as HTML.
"use strict";

function disputePath(id) {
  return "/v1/disputes/" + encodeURIComponent(id);
}

function focusedDispute() {
  const match = /^#id=(\d+)$/.exec(window.location.hash);
  return match ? Number(match[1]) : null;
}

function subject(d) {
  return d.origin === "question" ? d.question : "(at ingest) " + d.reason;
}

function stood(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  return seconds >= 86400 ? num(seconds / 86400, 1) + " d" : num(seconds / 3600, 1) + " h";
}

async function loadDisputes() {
  const state = document.getElementById("state-filter").value;
  const listing = await api("GET", "/v1/disputes?state=" + encodeURIComponent(state));
  const focus = focusedDispute();
  const rows = listing.disputes.map((d) => {
    const open = el("button", { type: "button" }, "Show");
    open.setAttribute("data-show", String(d.id));
    open.addEventListener("click", () => {
      window.location.hash = "id=" + d.id;
    });
    return { cls: d.id === focus ? "focus" : "", cells: [String(d.id), subject(d),
      d.writers.join(", "), badge(d.outcome, d.outcome === "conflict" ? "warn" : "neutral"),
      d.decision || "(refused)", d.occurrences + "x", new Date(d.last_seen * 1000).toISOString(),
      d.state, open] };
  });
  document.getElementById("disputes").replaceChildren(table("disputes-table",
    ["id", "question", "writers", "outcome", "decision", "met", "last met", "state", ""], rows));
  document.body.setAttribute("data-state", "loaded");
}

function sideColumn(dispute, side, number) {
  // a conflict: both amber; decided ("stands"): the first side is the one that stood
  const cls = dispute.outcome === "conflict" ? "contested"
    : dispute.outcome === "stands" ? (number === 1 ? "winner" : "loser") : "";
  const box = el("div", { class: "side " + cls });
  box.setAttribute("data-side", String(number));
  box.append(el("h4", {}, "side " + number + ": \u201c" + side.claim + "\u201d"));
  box.append(el("div", { class: "muted" }, "weight " + num(side.weight, 2) + ", top tier " + (side.top_tier || "-")));
  for (const source of side.sources) {
    box.append(el("div", { class: "muted" }, "source " + source.writers.join("+") + " (" +
      source.tier + ", weight " + num(source.weight, 2) + ", stood " + stood(source.stood_s) +
      (source.established ? ", established" : "") + ")"));
    for (const passage of source.passages) {
      const body = el("div", { class: "passage-body" });
      if (passage.text === null) body.textContent = "(no longer in the knowledge base)";
      else renderPassage(body, passage.text, [{ quote: side.claim, cls: "hl-claim", title: "the claim" }]);
      const details = el("details", { class: "passage", open: true },
        el("summary", {}, passage.id + " ", badge(passage.state, passage.state === "stored" ? "neutral" : "warn")), body);
      details.setAttribute("data-passage", passage.id);
      box.append(details);
    }
  }
  if (dispute.state === "open") {
    for (const [action, label] of [["quarantine", "Quarantine this side"], ["trust", "Trust this side"]]) {
      const button = el("button", { type: "button" }, label);
      button.setAttribute("data-action", action);
      button.addEventListener("click", () => resolveDispute(dispute.id, action, number));
      box.append(" ", button);
    }
  }
  return box;
}

async function showDispute(id) {
  const dispute = await api("GET", disputePath(id));
  const section = document.getElementById("dispute");
  section.hidden = false;
  section.setAttribute("data-dispute", String(dispute.id));
  document.getElementById("dispute-title").textContent = "Dispute " + dispute.id + " (" +
    dispute.state + ", met " + dispute.occurrences + "x): " + subject(dispute);
  document.getElementById("dispute-reason").replaceChildren(
    badge(dispute.outcome, dispute.outcome === "conflict" ? "warn" : "neutral"), " " + dispute.reason,
    el("div", { class: "muted" }, "decision: " + (dispute.decision || "(refused or held back)")));
  const grid = el("div", { class: "sides", id: "dispute-grid" });
  dispute.sides.forEach((side, index) => grid.append(sideColumn(dispute, side, index + 1)));
  document.getElementById("dispute-sides").replaceChildren(grid);
  document.getElementById("resolve-form").hidden = dispute.state !== "open";
  const resolution = dispute.resolution || {};
  document.getElementById("dispute-closed").textContent = dispute.state === "open" ? "" :
    dispute.state + " by " + dispute.closed_by + ": " + resolution.action +
    (resolution.side ? " side " + resolution.side : "") +
    (resolution.documents && resolution.documents.length ? " (" + resolution.documents.join(", ") + ")" : "") +
    (resolution.note ? " \u2014 " + resolution.note : "");
  document.body.setAttribute("data-dispute-state", dispute.state);
  section.scrollIntoView({ block: "start" });
}

async function resolveDispute(id, action, side) {
  const body = { action, note: document.getElementById("resolve-note").value };
  if (side) body.side = side;
  try {
    const done = await api("POST", disputePath(id) + "/resolve", body);
    status("dispute " + done.dispute + " " + done.state + (done.documents.length ? ": " +
      action + " " + done.documents.join(", ") : "") + "; audited as " + done.by);
    await loadDisputes();
    await showDispute(id);
  } catch (error) {
    status(error.message, true);
  }
}

function showFocused() {
  const id = focusedDispute();
  if (id !== null) showDispute(id).catch((error) => status(error.message, true));
}

function setUpDisputesPage() {
  document.getElementById("dismiss-button").addEventListener("click", () => {
    const section = document.getElementById("dispute");
    resolveDispute(Number(section.getAttribute("data-dispute")), "dismiss", null);
  });
  document.getElementById("state-filter").addEventListener("change", () =>
    loadDisputes().catch((error) => status(error.message, true)));
  window.addEventListener("hashchange", showFocused);
  setUpKeyForm((me) => {
    if (me.role !== "admin") { status("disputes are for admins; this key is " + me.role, true); return; }
    status("");
    loadDisputes().then(showFocused).catch((error) => status(error.message, true));
  });
}
