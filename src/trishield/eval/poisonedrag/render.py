"""HTML pages of the PoisonedRAG benchmark: the deterministic report and the timing page."""

from __future__ import annotations

from typing import Any

from trishield.eval import report as rep
from trishield.eval.poisonedrag.defenses import DEFENSES
from trishield.eval.poisonedrag.schedules import TIMED_SETTINGS
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


def _ci(result: dict[str, Any] | None, key: str) -> str:
    """`` [low, high]`` for a cell whose result has the interval ``key``, else nothing."""
    interval = (result or {}).get(key)
    return "" if not interval else f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def _with_ci(block: dict[str, Any], result: dict[str, Any] | None, key: str) -> str:
    text = _short(block, result, key)
    if result is None or not result.get("answered"):
        return text
    return text + _ci(result, f"{key}_ci95" if key != "accuracy_under_attack"
                      else "accuracy_ci95")


def _writers(block: dict[str, Any]) -> str:
    return (block["condition"] or {}).get("writers", "attacker")


def headline_blocks(blocks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The attack-family blocks of each headline condition: ``all-neutral`` (named by the
    family alone) and ``sybil`` (every poison its own writer); the rest are other rows."""
    neutral = [b for b in blocks if b["condition"] and b["name"] == b["condition"]["family"]]
    sybil = [b for b in blocks if b["condition"] and _writers(b) == "sybil"]
    return {"all-neutral": neutral, "sybil": sybil}


def render_markdown(payload: dict[str, Any]) -> str:
    """The headline tables in Markdown: docs/results.md quotes this file, not retyped figures.

    Per headline condition, rows are defenses and the attack families are columns (ASR with
    its Wilson 95% interval); then accuracy under attack beside the same defense's clean
    accuracy on the same targets, the benign sets (accuracy, false refusals, LLM calls per
    query), and the provenance, sweep and forged-tag rows."""
    blocks = payload["blocks"]
    conditions = headline_blocks(blocks)
    headline = [b for group in conditions.values() for b in group]
    benign = [b for b in blocks if not b["condition"]]
    others = [b for b in blocks if b["condition"] and b not in headline]
    defenses = _defenses(payload)
    results = payload["results"]
    parts = [f"# TriShield PoisonedRAG benchmark{_status(payload)}\n",
             f"Scoring version `{payload['scoring_version']}`, KB profile "
             f"`{payload['configuration']['kb_profile']}`, k={payload['configuration']['k']}, "
             f"seed {payload['configuration']['seed']}. Intervals are Wilson score 95% "
             "intervals. `n=20`: the defense answered the first 20 questions of the block's "
             "seeded order; `(3/5)`: answered so far; `not run`: outside this defense's "
             "plan.\n"]
    for condition, group in conditions.items():
        if not group:
            continue
        shown = [d for d in defenses if any(d in results[b["name"]] for b in group)]
        parts += [f"## Answer-level ASR per attack family: {condition} condition\n",
                  rep.markdown_table(
                      ["defense", *[b["condition"]["family"] for b in group]],
                      [[d, *[_with_ci(b, results[b["name"]].get(d), "asr") for b in group]]
                       for d in shown])]
    if benign:
        parts += ["## Benign questions: accuracy (contains-answer), false refusals, LLM "
                  "calls per query\n", rep.markdown_table(
                      ["set", "defense", "accuracy", "false refusals", "LLM calls per query"],
                      [[b["name"], d, _with_ci(b, r, "accuracy"),
                        f"{r['false_refusals']}/{r['answered']}"
                        f"{_ci(r, 'false_refusal_ci95')}",
                        _two(r["cost"]["llm_calls_per_query"])]
                       for b in benign for d, r in results[b["name"]].items()
                       if r.get("answered")])]
    timed = [b for b in others if b["condition"].get("writers") in TIMED_SETTINGS]
    rows = []
    for block in headline + timed:
        for defense, r in results[block["name"]].items():
            if not r.get("answered"):
                continue
            clean = r.get("clean_accuracy_same_targets")
            rows.append([block["name"], defense, f"{r['answered']}/{r['asked']}",
                         r["applicable"], _with_ci(block, r, "asr"),
                         _with_ci(block, r, "accuracy_under_attack"),
                         "-" if clean is None else
                         f"{_two(clean)}{_ci(r, 'clean_accuracy_ci95')}",
                         _two(r.get("clean_wrong_same_targets")),
                         r["refusals"], _two(r["cost"]["llm_calls_per_query"])])
    if rows:
        parts += ["## Accuracy under attack beside clean accuracy on the same targets\n",
                  "Clean accuracy: the same defense's answers to the same target questions "
                  "with no poison in the KB (block `benign-targets`). Wrong without poisons: "
                  "how often those clean answers already hold the target's wrong answer, "
                  "the floor under the ASR (no attack needed).\n",
                  rep.markdown_table(["block", "defense", "answered", "applicable", "ASR",
                                      "accuracy under attack", "clean accuracy",
                                      "wrong without poisons", "refusals",
                                      "LLM calls per query"], rows)]
    if others:
        shown = [d for d in defenses if any(d in results[b["name"]] for b in others)]
        parts += ["## Provenance, poison-fraction sweep and forged tags: answer-level ASR\n",
                  rep.markdown_table(["block", *shown],
                                     [[b["name"], *[_with_ci(b, results[b["name"]].get(d),
                                                             "asr") for d in shown]]
                                      for b in others])]
    parts += _disputes_section(blocks, results)
    return "\n".join(parts)


def _side(side: dict[str, Any]) -> str:
    stood = side["stood_s"]
    shown = "new" if not stood else f"stood {stood / 86_400:.1f} d"
    writers = side["writers"]
    named = "+".join(writers) if len(writers) <= 2 else f"{len(writers)} writers"
    return f"{side['claim'][:60]!r} ({named}, {shown}, weight {side['weight']:.2f})"


def _disputes_section(blocks: list[dict[str, Any]], results: dict[str, Any]) -> list[str]:
    """Every dispute weighed in the blocks that list them (the truth written after the
    poisons): what the product would put in a knowledge base's disputes queue."""
    rows = []
    for block in blocks:
        for defense, r in results[block["name"]].items():
            for found in r.get("disputes", []):
                winner, other = found["sides"]
                rows.append([block["name"], defense, found["question"], found["outcome"],
                             "refused" if found["decision"] is None
                             else repr(found["decision"][:60]),
                             "yes" if found["lie"] else "no", _side(winner), _side(other)])
    if not rows:
        return []
    return ["## Disputes weighed where the truth was written after the poisons\n",
            "Each answer that set claims of different writers against each other: the "
            "product records these in the knowledge base's disputes queue (the benchmark "
            "only reads its KBs, so they are listed here). The first side is the one the "
            "weighing put first.\n",
            rep.markdown_table(["block", "defense", "question", "weighing", "answer", "lie",
                                "first side", "other side"], rows)]


def render_html(payload: dict[str, Any]) -> str:
    headers, rows = headline_rows(payload)
    status = _status(payload)
    sections = [("Headline: answer-level ASR per attack block, benign accuracy (contains) "
                 f"per benign set{status}; Wilson 95% intervals in the tables below",
                 rep.table(headers, rows))]
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
                           r["accuracy_ci95"], r.get("clean_accuracy_same_targets"),
                           r.get("clean_accuracy_ci95"), r.get("clean_wrong_same_targets"),
                           r["refusals"],
                           r["cost"]["llm_calls_per_query"]])
    sections.append(("Attacked blocks (evaded = a poison reached the context but not the "
                     "answer: exposure, never a defense success)", rep.table(
        ["block", "defense", "answered", "applicable", "ASR", "ASR 95% CI",
         "ASR held-out half", "retrieval ASR", "poison in context", "poisons in top-k",
         "blocked", "succeeded", "evaded", "accuracy under attack", "accuracy 95% CI",
         "clean accuracy (same targets)", "clean 95% CI", "wrong without poisons",
         "refusals", "LLM calls/query"],
        detail)))
    benign_rows = [[b["name"], d, f"{r['answered']}/{r['asked']}", r["accuracy"],
                    r["accuracy_ci95"], r["em"], r["f1"], r["f1_sentence"],
                    r["false_refusals"], r.get("false_refusal_ci95"),
                    r["cost"]["llm_calls_per_query"]]
                   for b in payload["blocks"] if not b["condition"]
                   for d, r in payload["results"][b["name"]].items() if r.get("answered")]
    sections.append(("Benign questions (contains-answer and SQuAD scores, never mixed)",
                     rep.table(["set", "defense", "answered", "contains", "95% CI", "strict EM",
                                "token F1", "F1 best sentence", "false refusals",
                                "false refusal 95% CI", "LLM calls/query"], benign_rows)))
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
    sections.append(("Ring 1 at ingest (poisons written by the untrusted attacker in one "
                     "batch, or, for family/sybil, each by its own neutral writer in its own "
                     "batch; precision "
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
