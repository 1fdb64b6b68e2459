"""HTML pages of the PoisonedRAG benchmark: the deterministic report and the timing page."""

from __future__ import annotations

from typing import Any

from trishield.eval import report as rep
from trishield.eval.poisonedrag.defenses import DEFENSES
from trishield.eval.poisonedrag.scoring import STAGES


def _defenses(payload: dict[str, Any]) -> list[str]:
    seen = {d for block in payload["results"].values() for d in block}
    return [d for d in DEFENSES if d in seen]


def headline_rows(payload: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Defense x block: ASR for attacked blocks, accuracy for benign ones."""
    blocks = payload["blocks"]
    headers = ["defense"] + [
        f"{b['name']} {'ASR' if b['condition'] else 'accuracy'}" for b in blocks]
    rows = []
    for defense in _defenses(payload):
        rows.append([defense, *[_short(block, payload["results"][block["name"]].get(defense),
                                       "asr" if block["condition"] else "accuracy")
                                for block in blocks]])
    return headers, rows


def _status(payload: dict[str, Any]) -> str:
    answers = payload["answers"]
    if answers["complete"]:
        return ""
    return f" (partial: {answers['checkpointed']:,} of {answers['planned']:,} answers so far)"


def _two(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _short(block: dict[str, Any], result: dict[str, Any] | None, key: str) -> str:
    """A cell that says on how many questions it stands when that is not the whole block."""
    if result is None:
        return "not run"
    if not result.get("answered"):
        return ""
    text = _two(result[key])
    if not result["complete"]:
        return f"{text} ({result['answered']}/{result['asked']})"
    return text if result["asked"] == block["size"] else f"{text} (n={result['asked']})"


def render_markdown(payload: dict[str, Any]) -> str:
    """The headline tables in Markdown: the README quotes this file instead of retyped figures.

    Rows are defenses; the attack families (each with its own row group in the plan) are
    columns, then benign accuracy, so a defense's price in accuracy sits beside what it buys."""
    blocks = payload["blocks"]
    families = [b for b in blocks if b["condition"] and b["name"] == b["condition"]["family"]]
    benign = [b for b in blocks if not b["condition"]]
    others = [b for b in blocks if b["condition"] and b not in families]
    defenses = _defenses(payload)
    results = payload["results"]
    headline = rep.markdown_table(
        ["defense", *[f"{b['name']} ASR" for b in families],
         *[f"{b['name']} accuracy" for b in benign]],
        [[d, *[_short(b, results[b["name"]].get(d), "asr") for b in families],
          *[_short(b, results[b["name"]].get(d), "accuracy") for b in benign]]
         for d in defenses])
    parts = [f"# TriShield PoisonedRAG benchmark{_status(payload)}\n",
             f"Scoring version `{payload['scoring_version']}`, KB profile "
             f"`{payload['configuration']['kb_profile']}`, k={payload['configuration']['k']}, "
             f"seed {payload['configuration']['seed']}.\n",
             "## Headline: answer-level ASR per attack family, benign accuracy "
             "(contains-answer)\n",
             "`n=20`: a defense that costs several LLM calls per question answered the first "
             "20 questions of the block's seeded order; `(3/5)`: answered so far; `not run`: "
             "outside this defense's plan.\n", headline]
    published = next((b for b in families if b["name"] == "published"), None)
    if published is not None:
        rows = []
        for defense, r in results["published"].items():
            if not r.get("answered"):
                continue
            low, high = r["asr_ci95"] if r["asr_ci95"] else (None, None)
            ci = "" if low is None else f" [{low:.2f}, {high:.2f}]"
            outcomes = r["outcomes"]
            rows.append([defense, f"{r['answered']}/{r['asked']}",
                         f"{_short(published, r, 'asr')}{ci}",
                         f"{outcomes['blocked']} / {outcomes['succeeded']} / {outcomes['evaded']}",
                         _two(r["accuracy_under_attack"]), r["refusals"],
                         _two(r["cost"]["llm_calls_per_query"])])
        parts += ["## Published poisons: ASR with bootstrap 95% CI\n", rep.markdown_table(
            ["defense", "answered", "ASR", "blocked / succeeded / evaded",
             "accuracy under attack", "refusals", "LLM calls per query"], rows)]
    if others:
        shown = [d for d in defenses if any(d in results[b["name"]] for b in others)]
        parts += ["## Provenance, poison-fraction sweep and forged tags: answer-level ASR\n",
                  rep.markdown_table(["block", *shown],
                                     [[b["name"], *[_short(b, results[b["name"]].get(d), "asr")
                                                    for d in shown]] for b in others])]
    return "\n".join(parts)


def render_html(payload: dict[str, Any]) -> str:
    headers, rows = headline_rows(payload)
    status = _status(payload)
    sections = [("Headline: answer-level ASR per attack block, benign accuracy (contains) "
                 f"per benign set{status}", rep.table(headers, rows))]
    published = payload["results"].get("published", {})
    charts = [rep.bar_chart("published poisons: answer-level ASR by defense",
                            [(d, r["asr"] or 0.0) for d, r in published.items()
                             if r.get("answered")], colour="#b03a2e"),
              rep.bar_chart("published poisons: accuracy under attack by defense",
                            [(d, r["accuracy_under_attack"] or 0.0)
                             for d, r in published.items() if r.get("answered")])]
    benign = payload["results"].get("benign-targets", {})
    charts.append(rep.bar_chart("target questions without poisons: accuracy by defense",
                                [(d, r["accuracy"] or 0.0) for d, r in benign.items()
                                 if r.get("answered")], colour="#2e7d32"))
    costs = [(d, r["cost"]["llm_calls_per_query"] or 0.0) for d, r in published.items()
             if r.get("answered")]
    charts.append(rep.bar_chart("published poisons: LLM calls per query",
                                costs, maximum=max([c for _, c in costs] or [1.0]),
                                colour="#6a1b9a"))
    sections.append(("Charts", "".join(charts)))
    detail = []
    for block in payload["blocks"]:
        name = block["name"]
        for defense, r in payload["results"][name].items():
            if not r.get("answered") or not block["condition"]:
                continue
            detail.append([name, defense, f"{r['answered']}/{r['asked']}", r["applicable"],
                           r["asr"], r["asr_ci95"], r["asr_heldout"], r["retrieval_asr"],
                           r["context_exposure"], r["mean_poisons_in_top_k"],
                           r["outcomes"]["blocked"], r["outcomes"]["succeeded"],
                           r["outcomes"]["evaded"], r["accuracy_under_attack"],
                           r["refusals"], r["cost"]["llm_calls_per_query"]])
    sections.append(("Attacked blocks (evaded = a poison reached the context but not the "
                     "answer: exposure, never a defense success)", rep.table(
        ["block", "defense", "answered", "applicable", "ASR", "ASR 95% CI",
         "ASR held-out half", "retrieval ASR", "poison in context", "poisons in top-k",
         "blocked", "succeeded", "evaded", "accuracy under attack", "refusals",
         "LLM calls/query"], detail)))
    benign_rows = [[b["name"], d, f"{r['answered']}/{r['asked']}", r["accuracy"],
                    r["accuracy_ci95"], r["em"], r["f1"], r["f1_sentence"],
                    r["false_refusals"], r["cost"]["llm_calls_per_query"]]
                   for b in payload["blocks"] if not b["condition"]
                   for d, r in payload["results"][b["name"]].items() if r.get("answered")]
    sections.append(("Benign questions (contains-answer and SQuAD scores, never mixed)",
                     rep.table(["set", "defense", "answered", "contains", "95% CI", "strict EM",
                                "token F1", "F1 best sentence", "false refusals",
                                "LLM calls/query"], benign_rows)))
    detection = [[b, d, stage, s["removed"], s["poisons_removed"], s["poisons_seen"],
                  s["precision"], s["recall"], s["f1"]]
                 for b, by in payload["results"].items() for d, r in by.items()
                 for stage, s in r.get("detection", {}).items() if stage in STAGES]
    sections.append(("Detection per stage (against the known poison ids)", rep.table(
        ["block", "defense", "stage", "removed", "poisons removed", "poisons seen",
         "precision", "recall", "F1"], detection)))
    ingest = [[f, v["poisons"], v["quarantined"], v["recall"], v["precision_vs_clean_base"]]
              for f, v in payload["ring1_at_ingest"].items()]
    clean = payload["ring1_clean_screening"]
    sections.append(("Ring 1 at ingest (poisons written by the untrusted attacker; precision "
                     f"counts the {clean['would_quarantine']} of {clean['screened']} clean "
                     "base passages Ring 1 would quarantine, FPR "
                     f"{clean['false_positive_rate']:.4f})",
                     rep.table(["family", "poisons", "quarantined", "recall", "precision"],
                               ingest)))
    sections.append(("Configuration and data", rep.table(
        ["item", "value"],
        [["scoring version", payload["scoring_version"]],
         *[[k, v] for k, v in payload["configuration"].items()],
         *[[f"sha256 {k}", v] for k, v in payload["datasets"].items()],
         ["base KB", payload["base_kb"]]])))
    sections.append(("Wall-clock figures", '<p>Latency and wall time differ from run to run, '
                     'so they are kept out of this page: see <a href="timing.html">'
                     'timing.html</a> and timing.json.</p>'))
    return rep.page("TriShield PoisonedRAG benchmark", sections)


def render_timing(timings: dict[str, Any]) -> str:
    rows = [[d, v["answers"], v["p50_s"], v["p95_s"], v["cold_answers"], v["cold_p50_s"],
             v["cold_p95_s"], v["compute_seconds"]]
            for d, v in timings["latency_by_defense"].items()]
    return rep.page("TriShield PoisonedRAG benchmark: timing", [
        ("Latency per defense (seconds; cold = no cached LLM response)", rep.table(
            ["defense", "answers", "p50", "p95", "cold answers", "cold p50", "cold p95",
             "compute seconds"], rows)),
        ("This run", rep.table(["item", "value"], [
            ["wall seconds", timings["wall_seconds_this_run"]],
            ["answers computed", timings["answers_computed_this_run"]],
            ["compute seconds of every checkpointed answer",
             timings["total_compute_seconds"]]]))])
