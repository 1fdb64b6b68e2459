"""Hostile input files, written on demand (no binary is committed): what an attacker hands
``trishield ingest`` to read the host, hang it, or exhaust its memory (issue 49).

Every maker writes one file (or link) under a folder and returns its path; sizes are
parameters, so a test can use a small variant of a mechanism and the benchmark
(``benchmarks/hostile_files.py``) the sizes the issue measured. Used by
``tests/test_hostile_files.py`` and the benchmark.
"""

from __future__ import annotations

import io
import os
import socket
import zipfile
from pathlib import Path

MIB = 1024 * 1024


# -- links and special files ----------------------------------------------------------------
def host_links(folder: Path) -> dict[str, Path]:
    """``passwd.txt -> /etc/passwd``, ``status.txt -> /proc/self/status``, ``mounts.md ->
    /proc/self/mountinfo``, ``null.txt -> /dev/null`` and a folder link out of the root: the
    host, read through the ingested folder."""
    links = {"passwd.txt": "/etc/passwd", "status.txt": "/proc/self/status",
             "mounts.md": "/proc/self/mountinfo", "null.txt": "/dev/null", "etc": "/etc"}
    made = {}
    for name, target in links.items():
        (folder / name).symlink_to(target)
        made[name] = folder / name
    return made


def odd_entries(folder: Path) -> dict[str, Path]:
    """A named pipe (opening it would block), a socket, a dangling link and a loop of
    links."""
    os.mkfifo(folder / "pipe.txt")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "socket.md"))  # the socket file stays after close
    (folder / "gone.md").symlink_to(folder / "no-such-file.md")
    (folder / "loop-a.md").symlink_to(folder / "loop-b.md")
    (folder / "loop-b.md").symlink_to(folder / "loop-a.md")
    return {"pipe.txt": folder / "pipe.txt", "socket.md": folder / "socket.md",
            "gone.md": folder / "gone.md",
            "loop-a.md": folder / "loop-a.md", "loop-b.md": folder / "loop-b.md"}


# -- DOCX ------------------------------------------------------------------------------------
def docx_bomb(path: Path, xml_bytes: int, paragraph_chars: int = 4000) -> Path:
    """A valid DOCX whose ``word/document.xml`` is ``xml_bytes`` of paragraphs of
    ``paragraph_chars`` letters (deflate packs it about 1000 to 1): 800 MB of XML in about
    1 MB. Short paragraphs make an XML tree of many small elements (memory and time for
    the parser). The member is streamed into the zip, never held in memory."""
    import docx

    template = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("template")
    document.save(template)
    paragraph = b"<w:p><w:r><w:t>" + b"a" * paragraph_chars + b"</w:t></w:r></w:p>"
    head = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w='
            b'"http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
    tail = b"</w:body></w:document>"
    with zipfile.ZipFile(template) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                target.writestr(item, source.read(item.filename))
        with target.open("word/document.xml", "w", force_zip64=True) as member:
            member.write(head)
            block = paragraph * 256
            written = len(head) + len(tail)
            while written + len(block) <= xml_bytes:
                member.write(block)
                written += len(block)
            while written + len(paragraph) <= xml_bytes:
                member.write(paragraph)
                written += len(paragraph)
            member.write(tail)
    return path


# -- HTML ------------------------------------------------------------------------------------
def nested_divs(path: Path, levels: int) -> Path:
    """``levels`` nested ``<div>`` s with a word in each (5 bytes a level each way)."""
    path.write_text("<html><body>" + "<div>x" * levels + "</div>" * levels + "</body></html>",
                    encoding="utf-8")
    return path


def flat_html(path: Path, size: int) -> Path:
    """About ``size`` bytes of short paragraphs: a large but ordinary-looking page."""
    paragraph = "<p>Parcels leave the depot every Tuesday at nine.</p>\n"
    path.write_text("<html><body>" + paragraph * (size // len(paragraph)) + "</body></html>",
                    encoding="utf-8")
    return path


def element_flood(path: Path, elements: int) -> Path:
    """``elements`` empty ``<b></b>`` tags (7 bytes each) after a paragraph: every tag is an
    object of the parser's tree, so memory grows far faster than the file."""
    path.write_text("<html><body><p>Tags.</p>" + "<b></b>" * elements + "</body></html>",
                    encoding="utf-8")
    return path


def doctype_subset(path: Path) -> Path:
    """An HTML page with a DOCTYPE internal subset (HTML has none; parsers leave ``]>``)."""
    path.write_text('<!DOCTYPE html [ <!ENTITY secret "internal"> <!ELEMENT x ANY> ]>\n'
                    "<html><head><title>Depot hours</title></head><body><p>The depot opens "
                    "at eight.</p></body></html>", encoding="utf-8")
    return path


# -- PDF -------------------------------------------------------------------------------------
def pdf_bytes(bodies: list[str], trailer: str = "") -> bytes:
    """A PDF of the object bodies given (object 1 is the catalog), with a correct xref;
    ``trailer``: more trailer entries (`` /Info 9 0 R``)."""
    out, offsets = "%PDF-1.4\n", []
    for number, body in enumerate(bodies, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(bodies) + 1}\n0000000000 65535 f \n"
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets)
    out += (f"trailer\n<< /Size {len(bodies) + 1} /Root 1 0 R{trailer} >>\nstartxref\n{xref}"
            "\n%%EOF\n")
    return out.encode("latin-1")


_PAGE = ("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 "
         "{font} 0 R >> >> /Contents {contents} 0 R >>")


def shared_page_tree(path: Path, levels: int, fanout: int) -> Path:
    """A page tree whose every level lists the level below ``fanout`` times: ``levels`` of
    them give ``fanout ** levels`` pages from one page object (10 levels of 2: 1,024 pages
    in about 900 bytes; 4 of 16: 65,536 pages, the "64,000 pages" claim)."""
    # 1 catalog, 2 root /Pages, 3 font, 4 contents, 5 the page, 6.. the levels below the root
    text = "BT /F1 12 Tf 72 720 Td (A page of a hostile tree.) Tj ET"
    bodies = ["<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 "
              "/BaseFont /Helvetica >>", f"<< /Length {len(text)} >>\nstream\n{text}\n"
              "endstream", _PAGE.format(font=3, contents=4)]
    below = 5  # the object each level lists
    for _ in range(levels - 1):
        bodies.append(f"<< /Type /Pages /Kids [{' '.join([f'{below} 0 R'] * fanout)}] "
                      f"/Count {fanout ** (len(bodies) - 4)} >>")
        below = len(bodies)
    bodies[1] = (f"<< /Type /Pages /Kids [{' '.join([f'{below} 0 R'] * fanout)}] "
                 f"/Count {fanout ** levels} >>")
    path.write_bytes(pdf_bytes(bodies))
    return path


def looping_page_tree(path: Path) -> Path:
    """A page tree whose ``/Kids`` is an array object that holds a node listing that same
    array: no page node repeats, the array does, and the tree never ends."""
    bodies = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids 3 0 R /Count 1 >>",
              "[ << /Type /Pages /Kids 3 0 R /Count 1 >> ]"]
    path.write_bytes(pdf_bytes(bodies))
    return path


def many_pages(path: Path, pages: int) -> Path:
    """A genuine page tree of ``pages`` distinct pages (a short line of text on each)."""
    bodies = ["<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 "
              "/BaseFont /Helvetica >>"]
    kids = []
    for number in range(pages):
        text = f"BT /F1 12 Tf 72 720 Td (Page {number}.) Tj ET"
        bodies.append(f"<< /Length {len(text)} >>\nstream\n{text}\nendstream")
        bodies.append(_PAGE.format(font=3, contents=len(bodies)))
        kids.append(f"{len(bodies)} 0 R")
    bodies[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {pages} >>"
    path.write_bytes(pdf_bytes(bodies))
    return path


# -- text ------------------------------------------------------------------------------------
def yaml_alias_bomb(path: Path, value_bytes: int, repeats: int) -> Path:
    """Front matter that names one ``value_bytes`` string and lists it ``repeats`` times by
    alias: ``value_bytes + 4 * repeats`` bytes written, ``value_bytes * repeats`` expanded
    (20 KB and 10,000: a 60 KB file standing for 200 MB)."""
    aliases = ", ".join(["*a"] * repeats)
    path.write_text(f"---\ntitle: Aliases\nanchor: &a {'x' * value_bytes}\ntags: [{aliases}]\n"
                    "---\nThe body of a file with a large front matter.\n", encoding="utf-8")
    return path


def form_feeds(path: Path) -> Path:
    """A UTF-8 text file with a form feed between its pages and a vertical tab."""
    path.write_text("Invoices are sent on the first day of the month.\n\f\nPayment is due "
                    "within thirty days.\vLate payments pay a fee.\n", encoding="utf-8")
    return path
