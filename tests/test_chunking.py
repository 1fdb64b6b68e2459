"""Word-window chunking: offsets, window sizes, overlap, and configuration checks."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from trishield.errors import InputError
from trishield.kb.chunking import ChunkingConfig, chunk_document
from trishield.kb.documents import Chunk, Document

SEPARATORS = [" ", "  ", "\n", "\t", " \n\n ", "\r\n", "\u00a0", "\u2003"]


def numbered(count: int, *, seed: int = 0) -> Document:
    """``w0 w1 ...`` joined by irregular whitespace, with leading and trailing whitespace."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(count)]
    body = "".join(word + rng.choice(SEPARATORS) for word in words)
    return Document(id=f"doc-{count}-{seed}", text=rng.choice(["", "  ", "\n\t"]) + body)


def ranges(chunks: list[Chunk]) -> list[tuple[int, int]]:
    return [(chunk.word_start, chunk.word_end) for chunk in chunks]


def check_invariants(document: Document, config: ChunkingConfig, chunks: list[Chunk]) -> None:
    words = document.text.split()
    n = len(words)
    step = config.words - config.overlap
    if n == 0:
        assert chunks == []
        return
    expected_count = 1 + math.ceil(max(0, n - config.words) / step)
    assert len(chunks) == expected_count
    assert chunks[0].word_start == 0
    assert chunks[-1].word_end == n
    for number, chunk in enumerate(chunks):
        assert chunk.doc_id == document.id
        assert chunk.index == number
        assert chunk.id == f"{document.id}#{number}"
        assert chunk.text == document.text[chunk.char_start:chunk.char_end]
        assert chunk.text.split() == words[chunk.word_start:chunk.word_end]
        assert chunk.text == chunk.text.strip()
        size = chunk.word_end - chunk.word_start
        if number < len(chunks) - 1:
            assert size == config.words
        else:
            assert 1 <= size <= config.words
    for previous, current in itertools.pairwise(chunks):
        assert current.word_start == previous.word_start + step
        assert previous.word_end - current.word_start == config.overlap
        assert current.word_end > previous.word_end  # every window adds a new word
        assert previous.word_end < n  # nothing after a window that already reached the end
        assert current.char_start > previous.char_start
        assert current.char_end > previous.char_end


def test_hand_computed_example() -> None:
    document = Document(id="d", text=" ".join(f"w{i}" for i in range(10)))
    chunks = chunk_document(document, ChunkingConfig(words=4, overlap=1))
    assert ranges(chunks) == [(0, 4), (3, 7), (6, 10)]
    assert [c.text for c in chunks] == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 11), (9, 20), (18, 29)]
    assert [c.id for c in chunks] == ["d#0", "d#1", "d#2"]


@pytest.mark.parametrize(("count", "words", "overlap", "expected"), [
    (5, 4, 1, [(0, 4), (3, 5)]),
    (7, 4, 1, [(0, 4), (3, 7)]),
    (8, 4, 0, [(0, 4), (4, 8)]),
    (9, 4, 0, [(0, 4), (4, 8), (8, 9)]),
    (6, 4, 3, [(0, 4), (1, 5), (2, 6)]),
    (3, 1, 0, [(0, 1), (1, 2), (2, 3)]),
    (4, 4, 2, [(0, 4)]),
    (3, 120, 20, [(0, 3)]),
    (1, 1, 0, [(0, 1)]),
])
def test_word_ranges(count: int, words: int, overlap: int,
                     expected: list[tuple[int, int]]) -> None:
    document = numbered(count)
    config = ChunkingConfig(words=words, overlap=overlap)
    chunks = chunk_document(document, config)
    assert ranges(chunks) == expected
    check_invariants(document, config, chunks)


def test_invariants_over_many_configurations() -> None:
    for count in range(0, 26):
        for words in range(1, 8):
            for overlap in range(words):
                document = numbered(count, seed=count * 100 + words * 10 + overlap)
                config = ChunkingConfig(words=words, overlap=overlap, strategy="window")
                check_invariants(document, config, chunk_document(document, config))


def test_default_config_on_a_long_document() -> None:
    assert ChunkingConfig().as_dict() == {"words": 120, "overlap": 20, "strategy": "sections"}
    config = ChunkingConfig(strategy="window")
    assert config.as_dict() == {"words": 120, "overlap": 20}  # older KBs' record
    document = numbered(1000, seed=7)
    chunks = chunk_document(document, config)
    check_invariants(document, config, chunks)
    assert ranges(chunks)[:2] == [(0, 120), (100, 220)]
    assert ranges(chunks)[-1] == (900, 1000)


def test_document_shorter_than_window_is_one_chunk_of_the_stripped_text() -> None:
    document = Document(id="short", text="\n\n  Refunds are   issued\twithin 30 days.  \n")
    (chunk,) = chunk_document(document, ChunkingConfig(words=50, overlap=10))
    assert chunk.text == "Refunds are   issued\twithin 30 days."
    assert (chunk.word_start, chunk.word_end) == (0, 6)
    assert document.text[chunk.char_start:chunk.char_end] == chunk.text


def test_exact_window_and_one_word_more() -> None:
    config = ChunkingConfig(words=5, overlap=2)
    assert ranges(chunk_document(numbered(5), config)) == [(0, 5)]
    assert ranges(chunk_document(numbered(6), config)) == [(0, 5), (3, 6)]


def test_no_overlap_partitions_the_words() -> None:
    document = numbered(23, seed=3)
    chunks = chunk_document(document, ChunkingConfig(words=5, overlap=0))
    joined = [word for chunk in chunks for word in chunk.text.split()]
    assert joined == document.text.split()


def test_unicode_words_and_offsets() -> None:
    text = "Zürich  東京\u00a0naïve — café\n\U0001f600 end"
    document = Document(id="u", text=text)
    chunks = chunk_document(document, ChunkingConfig(words=3, overlap=1))
    check_invariants(document, ChunkingConfig(words=3, overlap=1), chunks)
    assert [c.text.split() for c in chunks] == [
        ["Zürich", "東京", "naïve"], ["naïve", "—", "café"], ["café", "\U0001f600", "end"]]


def test_whitespace_only_document_gives_no_chunks() -> None:
    assert chunk_document(Document(id="blank", text=" \n\t "), ChunkingConfig(4, 1)) == []


@pytest.mark.parametrize(("words", "overlap", "fragment"), [
    (0, 0, "at least 1 word, got 0"),
    (-3, 0, "at least 1 word, got -3"),
    (4, 4, "between 0 and chunk size - 1 (3), got 4"),
    (4, 9, "got 9"),
    (4, -1, "got -1"),
    (1, 1, "got 1"),
])
def test_invalid_configs(words: int, overlap: int, fragment: str) -> None:
    with pytest.raises(InputError, match="chunk") as caught:
        ChunkingConfig(words=words, overlap=overlap)
    assert fragment in str(caught.value)


def test_boundary_configs_are_valid() -> None:
    window = {"strategy": "window"}
    assert ChunkingConfig(words=1, overlap=0, **window).as_dict() == {"words": 1, "overlap": 0}
    assert ChunkingConfig(words=10, overlap=9, **window).as_dict() == {"words": 10,
                                                                        "overlap": 9}


# ---- sections: the document's own structure ------------------------------------------------

MAN_PAGE = """SSH(1)                    BSD General Commands Manual                   SSH(1)

NAME
     ssh - OpenSSH remote login client

DESCRIPTION
     ssh (SSH client) is a program for logging into a remote machine and for
     executing commands on a remote machine.

     The options are as follows:

     -o option
             Can be used to give options in the format used in the configuration
             file.

                   AddKeysToAgent
                   AddressFamily
                   BatchMode

     -p port
             Port to connect to on the remote host.  This can be specified on
             a per-host basis in the configuration file.

     -q      Quiet mode.  Causes most warning and diagnostic messages to be
             suppressed.  Only fatal errors are shown; the messages that a
             login banner or a host key change would print are not written to
             the terminal, and the exit status alone says whether the command
             succeeded.

EXIT STATUS
     ssh exits with the exit status of the remote command or with 255 if an
     error occurred.
"""

SECTIONS = ChunkingConfig(strategy="sections")


def test_sections_keep_an_option_entry_apart_and_carry_its_heading() -> None:
    document = Document(id="ssh", text=MAN_PAGE, title="ssh")
    chunks = chunk_document(document, SECTIONS)
    for chunk in chunks:  # offsets still point at the exact words
        assert document.text[chunk.char_start:chunk.char_end] == chunk.text
    port = [c for c in chunks if "Port to connect" in c.text]
    assert len(port) == 1
    assert port[0].text.startswith("-p port") and "AddKeysToAgent" not in port[0].text
    assert port[0].section == "ssh > DESCRIPTION"
    status = next(c for c in chunks if "255" in c.text)
    assert status.section == "ssh > EXIT STATUS" and status.text.startswith("EXIT STATUS")
    # no chunk crosses a heading
    assert not any("EXIT STATUS" in c.text and "Quiet mode" in c.text for c in chunks)


def test_sections_read_markdown_and_rst_headings() -> None:
    def body(last: str) -> str:
        return " ".join(["Some words of the section."] * 9) + f" {last}"

    text = (f"# Install\n\n{body('Run make install.')}\n\nConfiguration\n=============\n\n"
            f"{body('Set the port with --port.')}\n\n## Limits\n\n"
            f"{body('At most 20 connections.')}\n")
    chunks = chunk_document(Document(id="guide", text=text, title="Guide"), SECTIONS)
    assert [(c.section, c.text.split(". ")[-1]) for c in chunks] == [
        ("Guide > Install", "Run make install."),
        ("Guide > Configuration", "Set the port with --port."),
        ("Guide > Limits", "At most 20 connections.")]


def test_tiny_sections_are_packed_with_what_follows() -> None:
    """Headings over a line or two (a definition list read as headings, a table of contents)
    would make a chunk each: a section under a third of the size is packed with the next, and
    the chunk is named after the heading its text starts under."""
    terms = "".join(f"user{i}\n\nThe account user{i} runs service {i}.\n\n" for i in range(30))
    chunks = chunk_document(Document(id="d", text=f"Contents\n\nAccounts\n\n{terms}",
                                     title="Users"), SECTIONS)
    assert len(chunks) < 10
    assert all(c.word_end - c.word_start <= 120 for c in chunks)
    # headings over nothing yet (nested) name the chunk by the last of them
    assert chunks[0].section == "Users > user0" and chunks[0].text.startswith("Contents")
    assert chunks[1].section.startswith("Users > user")


def test_a_document_without_structure_is_cut_as_windows_are() -> None:
    for count in (5, 120, 121, 400):
        document = numbered(count, seed=count)
        single = Document(id=document.id, text=" ".join(document.text.split()))
        assert chunk_document(single, SECTIONS) == chunk_document(single, ChunkingConfig())


def test_a_long_section_is_cut_into_windows_within_it() -> None:
    body = " ".join(f"w{i}" for i in range(300))
    text = f"Overview\n\n{body}\n\nDetails\n\nshort text here"
    chunks = chunk_document(Document(id="d", text=text, title="T"), SECTIONS)
    assert all(c.word_end - c.word_start <= 120 for c in chunks)
    assert chunks[-1].section == "T > Details" and "w299" not in chunks[-1].text
    assert {c.section for c in chunks[:-1]} == {"T > Overview"}


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(InputError, match="chunking strategy must be one of window, sections"):
        ChunkingConfig(strategy="paragraphs")  # type: ignore[arg-type]
