"""What the wiki5k benchmarks share: their command-line options, the benchmark's wiki5k base
KB, its seeded question set, and the pipeline configuration with a given pool.

``benchmarks/ring_latency.py`` and ``benchmarks/studies/ring2_memo.py`` both time ``ring12``
over the same SQuAD + NQ questions on the same KB; one definition keeps their figures comparable (a
change to how one picks questions would otherwise silently measure something else).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # TriShield is imported by the functions that use it: a script parses its
    # options and sets HF_HUB_OFFLINE before anything loads a model library
    from trishield.eval.poisonedrag.questions import Question
    from trishield.kb import KnowledgeBase
    from trishield.settings import PipelineConfig


def question_arguments(parser: argparse.ArgumentParser, *, questions: int
                       ) -> argparse.Namespace:
    """The command line of a wiki5k benchmark: ``parser`` (holding the script's own options)
    with the ones they all take added (``--work-dir``, ``--questions``, defaulting to
    ``questions``, ``--seed``), parsed; a question count below one is refused."""
    parser.add_argument("--work-dir", type=Path, default=Path(".trishield/eval/poisonedrag"))
    parser.add_argument("--questions", type=int, default=questions)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.questions < 1:
        parser.error("--questions must be at least 1")
    return args


def wiki5k_base(work_dir: Path) -> Path:
    """The benchmark's wiki5k base KB under ``work_dir`` (built by ``trishield eval
    poisonedrag``, else here: about five minutes)."""
    from trishield.eval.poisonedrag import knowledge_bases as kbs
    from trishield.eval.poisonedrag.attacks import load_targets

    targets = load_targets()
    return kbs.build_base(work_dir, "wiki5k", kbs.profile_documents("wiki5k", targets, 0))


def seeded_question_records(kb: KnowledgeBase, count: int, seed: int) -> list[Question]:
    """``count`` questions about documents ``kb`` stores, with their gold answers: the first
    half (rounded up) from SQuAD, the rest from NQ, drawn with ``seed``."""
    from trishield.eval.poisonedrag.questions import nq_questions, squad_questions

    if count < 1:
        raise ValueError(f"the question count must be at least 1, got {count}")
    stored = set(kb.document_ids())
    half = count // 2
    return squad_questions(stored, count - half, seed) + nq_questions(stored, half, seed)


def seeded_questions(kb: KnowledgeBase, count: int, seed: int) -> list[str]:
    """The texts of :func:`seeded_question_records`."""
    return [q.text for q in seeded_question_records(kb, count, seed)]


def pooled_configs(parser: argparse.ArgumentParser, config: PipelineConfig, pools: list[int]
                   ) -> dict[int, PipelineConfig]:
    """``config`` with each of ``pools`` as Ring 2's pool, by pool; a pool given twice, or one
    the configuration refuses (smaller than the context), is a usage error naming it."""
    from dataclasses import replace

    from pydantic import ValidationError

    if len(set(pools)) < len(pools):
        parser.error("give each pool once")
    configs = {}
    for pool in pools:
        try:
            configs[pool] = replace(config, scorer=replace(config.scorer, pool=pool))
        except ValidationError as error:
            parser.error(f"pool {pool}: {error}")
    return configs
