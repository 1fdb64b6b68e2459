"""What another writer's copy of stored text costs to ingest, against new text (same run).

A chunk whose section and text the KB already stores (a stored document with the same
content, whoever wrote it) takes the stored vector instead of being embedded again
(``kb/writing.py``, ``_embeddings_of``; docs/speed.md, "A text the KB holds is not embedded
again"). This times, on one fresh KB with the real MiniLM encoder and Ring 1 at ingest:

* *original*: writer A stores N paragraphs;
* *copies*: writer B stores the same N texts under its own ids (the farming condition's
  shape, and a mirror's);
* *new text*: writer C stores N other paragraphs (the baseline: what a write costs when
  nothing is known).

It prints seconds, chunks a second and the copies/new-text ratio, with the load average
before and after. The paragraphs are the ``squadshifts-new-wiki`` corpus's first 2N (public
data under ``../shared/data``).

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ingest_copies.py --documents 200
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from trishield.kb import Document, KnowledgeBase
from trishield.kb.datasets import DATASETS
from trishield.rings.ingest_guard import GuardConfig, IngestGuard


def _timed(kb: KnowledgeBase, documents: list[Document], writer: str,
           guard: IngestGuard) -> tuple[float, int]:
    started = time.perf_counter()
    report = kb.ingest(documents, tier="neutral", writer=writer, guard=guard)
    return time.perf_counter() - started, report.chunks_added


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=200, help="paragraphs per writer")
    args = parser.parse_args(argv)
    if args.documents < 1:
        parser.error("--documents must be at least 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    corpus = list(DATASETS["squadshifts-new-wiki"].documents())[:2 * args.documents]
    if len(corpus) < 2 * args.documents:
        parser.error(f"the corpus holds {len(corpus)} paragraphs, fewer than 2 x --documents")
    first, other = corpus[:args.documents], corpus[args.documents:]
    load = os.getloadavg()
    guard = IngestGuard(GuardConfig())
    with tempfile.TemporaryDirectory() as folder, \
            KnowledgeBase.open(Path(folder) / "kb", create=True) as kb:
        kb.embedder  # noqa: B018 (loading the model is not ingest time)
        rows = [("original", *_timed(kb, [Document(id=f"a:{n}", text=d.text, title=d.title)
                                          for n, d in enumerate(first)], "writer-a", guard)),
                ("copies", *_timed(kb, [Document(id=f"b:{n}", text=d.text, title=d.title)
                                        for n, d in enumerate(first)], "writer-b", guard)),
                ("new text", *_timed(kb, [Document(id=f"c:{n}", text=d.text, title=d.title)
                                          for n, d in enumerate(other)], "writer-c", guard))]
    after = os.getloadavg()
    print(f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")
    for name, seconds, chunks in rows:
        print(f"{name:9s} {args.documents} documents, {chunks} chunks: {seconds:6.1f} s "
              f"({chunks / seconds:6.1f} chunks/s)")
    copies, new = rows[1][1], rows[2][1]
    print(f"copies / new text: {copies / new:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
