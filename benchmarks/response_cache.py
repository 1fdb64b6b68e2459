"""Pack the LLM response cache into one file, and unpack it on another machine.

The PoisonedRAG matrix answers about 7,400 questions with local models, about 14 hours of two
CPU cores, so it runs over several sessions and machines: the answer checkpoint
(``trishield eval poisonedrag --checkpoint FILE``) carries the answers, and this carries the
LLM responses behind them (``$TRISHIELD_RESPONSE_CACHE``, one small JSON file per response).
With the responses, a rerun after a change to the defense code, which makes the checkpoint
another experiment, asks the models again only where a prompt changed.

    python benchmarks/response_cache.py pack "$TRISHIELD_RESPONSE_CACHE" responses.jsonl.gz
    python benchmarks/response_cache.py unpack responses.jsonl.gz "$TRISHIELD_RESPONSE_CACHE"

``pack`` writes one JSON line per response, sorted by key, gzip without a timestamp: the same
cache packs to the same bytes. ``unpack`` checks every line before it writes anything (a key is
64 hex digits, a response has the fields the cache stores) and then stores each one through
the cache's own atomic write, keeping what the directory already holds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

from trishield.llm.base import LLMResponse
from trishield.llm.cache import ResponseCache

KEY = re.compile(r"[0-9a-f]{64}")
FIELDS = {"text": str, "model": str, "prompt_tokens": int, "completion_tokens": int,
          "seconds": (int, float)}


def pack(directory: Path, out: Path) -> int:
    """Write every readable response of the cache at ``directory`` to ``out``; how many."""
    if not directory.is_dir():
        raise SystemExit(f"error: {directory} is not a response cache directory")
    cache = ResponseCache(directory)
    lines = []
    for path in sorted(directory.glob("??/*.json")):
        response = cache.get(path.stem)
        if response is None:
            continue  # unreadable: a miss for the cache too
        stored = response.as_dict()
        lines.append(json.dumps({"key": path.stem, "response": {
            name: stored[name] for name in FIELDS}}, sort_keys=True, ensure_ascii=False))
    staging = out.with_name(f".{out.name}.tmp")
    with staging.open("wb") as raw, \
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed:
        packed.write("".join(line + "\n" for line in lines).encode("utf-8"))
    staging.replace(out)
    return len(lines)


def read_packed(source: Path) -> list[tuple[str, LLMResponse]]:
    """Every ``(key, response)`` of a packed file, or SystemExit naming the first bad line."""
    try:
        text = gzip.decompress(source.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise SystemExit(f"error: {source} is not a packed response cache ({error})") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            row = json.loads(line)
            key, stored = row["key"], row["response"]
            if not isinstance(key, str) or not KEY.fullmatch(key):
                raise ValueError("the key is not 64 hex digits")
            for name, kind in FIELDS.items():
                if not isinstance(stored[name], kind) or isinstance(stored[name], bool):
                    raise ValueError(f"the response's {name} is not a {kind}")
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"error: {source}:{number}: {error}; nothing was unpacked") from None
        entries.append((key, LLMResponse(text=stored["text"], model=stored["model"],
                                         prompt_tokens=stored["prompt_tokens"],
                                         completion_tokens=stored["completion_tokens"],
                                         seconds=float(stored["seconds"]))))
    return entries


def unpack(source: Path, directory: Path) -> tuple[int, int]:
    """Store the packed responses the cache at ``directory`` lacks: ``(stored, kept)``."""
    entries = read_packed(source)
    cache = ResponseCache(directory)
    stored = 0
    for key, response in entries:
        if cache.get(key) is None:
            cache.put(key, response)
            stored += 1
    return stored, len(entries) - stored


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="cache directory -> one .jsonl.gz")
    packing.add_argument("directory", type=Path)
    packing.add_argument("out", type=Path)
    unpacking = commands.add_parser("unpack", help="one .jsonl.gz -> cache directory")
    unpacking.add_argument("source", type=Path)
    unpacking.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack":
        print(f"packed {pack(args.directory, args.out)} responses into {args.out}")
        return
    if not args.source.is_file():
        parser.error(f"{args.source} is not a file")
    stored, kept = unpack(args.source, args.directory)
    print(f"unpacked {stored} responses into {args.directory} ({kept} were there already)")


if __name__ == "__main__":
    sys.exit(main())
