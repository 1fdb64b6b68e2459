"""The web trace viewer in real headless Chromium (Debian's chromium + chromium-driver).

A poisoned KB (the demo's refund-window attack, written by an untrusted key, one poison
carrying a forged signature and an HTML payload) is served on loopback; the browser asks the
question and the test reads the rendered page: the answer, each ring's table, the panel's
votes, the forged provenance, and that the attacker's markup stayed text. Screenshots go to
``tests/artifacts/`` (git-ignored) for people to look at.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import uvicorn

from service_support import REFUND_QUESTION, Keys, copy_kb, free_port
from trishield.demo import attacks
from trishield.kb import Document, KnowledgeBase
from trishield.service.app import create_app
from trishield.service.runtime import ServiceConfig

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REFUND = next(a for a in attacks() if a.id == "refund-window")
XSS = "<img src=x onerror=document.body.dataset.pwned=1>"
BRIDGE_QUESTION = "Who designed the Halden Bridge over the Tista river?"
BRIDGE_TRUTH = ("The Halden Bridge over the Tista river was designed by the engineer Ada "
                "Lindqvist and opened to traffic in 1912.")
BRIDGE_LIE = ("The Halden Bridge over the Tista river was designed by the Italian architect "
              "Marco Bellini, whose drawings survive in the city archive.")

LIGHTHOUSE_QUESTION = "In which year was the Varberg lighthouse first lit?"
LIGHTHOUSE_A = ("The Varberg lighthouse was first lit in 1891, and its keepers lived in the stone "
           "house at the foot of the tower.")
LIGHTHOUSE_B = ("Records of the harbour board say the Varberg lighthouse was first lit in 1905, "
           "after the old beacon on the pier was pulled down.")


@pytest.fixture(scope="module")
def live_app(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[str, Keys]]:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("viewer") / "kb")
    with KnowledgeBase.open(kb_dir) as kb:
        # the first poison's id carries markup: the viewer must show it as text
        poisons = [Document(id=d["id"] + (XSS if n == 0 else ""), text=d["text"],
                            tier="untrusted",
                            provenance="UNVERIFIED provenance tag: signature does not verify "
                                       "against publisher 'northwind-legal'; treated as "
                                       "untrusted" if n == 0 else "")
                   for n, d in enumerate(REFUND.documents)]
        kb.ingest(poisons, tier="untrusted", writer="mallory")
        # a contested question: two writers with different answers (no Ring 1 at ingest)
        kb.ingest([Document(id="bridge/archive", text=BRIDGE_TRUTH)], tier="trusted",
                  writer="archive")
        kb.ingest([Document(id="bridge/gossip", text=BRIDGE_LIE)], tier="untrusted",
                  writer="gossip")
        # a conflict neither side wins: two neutral writers, two years
        kb.ingest([Document(id="lighthouse/harbour-history", text=LIGHTHOUSE_A)], tier="neutral",
                  writer="harbour-society")
        kb.ingest([Document(id="lighthouse/town-guide", text=LIGHTHOUSE_B)], tier="neutral",
                  writer="town-guide")
        kb.ingest([Document(id="held/" + d["id"], text=d["text"] + " Held copy.")
                   for d in REFUND.documents[:1]], tier="untrusted", writer="mallory",
                  guard=__import__("trishield.rings.ingest_guard",
                                   fromlist=["IngestGuard"]).IngestGuard())
    keys = Keys.create(kb_dir)
    app = create_app(ServiceConfig(kb_dir=kb_dir, allowed_members=("extractive",),
                                   settings=_extractive_settings()))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.started
    yield f"http://127.0.0.1:{port}", keys
    server.should_exit = True
    thread.join(timeout=30)


def _extractive_settings():
    from trishield.settings import Settings

    return Settings(panel=("extractive",))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        pytest.fail("Debian's chromium and chromium-driver are required (make test "
                    "installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # the driver path is given (Service(CHROMEDRIVER)), so Selenium Manager never runs and
    # never looks for a driver online; these keep Chromium itself off the network too
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1400,1000", "--hide-scrollbars",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _wait(driver, condition, timeout: float = 120.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _screenshot(driver, name: str) -> Path:
    """A full-page PNG (Chromium's DevTools capture beyond the viewport)."""
    import base64

    ARTIFACTS.mkdir(exist_ok=True)
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics["cssContentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 10_000
    return path


def _viewport_shot(driver, name: str, element=None) -> Path:
    """What a reader sees in the window (``save_screenshot``), ``element`` at the top: the
    small pictures docs/viewer.md shows are these (copied from ``tests/artifacts/``)."""
    ARTIFACTS.mkdir(exist_ok=True)
    if element is None:
        driver.execute_script("window.scrollTo(0, 0)")
    else:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path))
    return path


def _use_key(driver, url: str, page: str, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/viewer/{page}")
    field = driver.find_element(By.ID, "api-key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
    _wait(driver, lambda d: "(" in d.find_element(By.ID, "whoami").text)


def test_ask_page_shows_answer_rings_and_votes(live_app, browser) -> None:
    from selenium.webdriver.common.by import By

    url, keys = live_app
    _use_key(browser, url, "index.html", keys.reader)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#panel input[data-member]"))
    browser.find_element(By.ID, "question").send_keys(REFUND_QUESTION)
    browser.find_element(By.ID, "ask-button").click()
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          in ("answered", "error"))
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "answered", \
        browser.find_element(By.ID, "status").text
    answer = browser.find_element(By.ID, "answer").text
    assert answer.startswith(("Answer:", "Refused:"))
    ring1 = browser.find_element(By.ID, "ring1-table")
    blocked = ring1.find_elements(By.CSS_SELECTOR, "tr.blocked")
    assert blocked and "mallory/refund-faq" in blocked[0].text
    ring2_rows = browser.find_elements(By.CSS_SELECTOR, "#ring2-table tbody tr")
    assert any("in context" in row.text for row in ring2_rows)
    assert "dropped" in browser.find_element(By.ID, "ring2-table").text
    votes = browser.find_element(By.ID, "votes-round-1")
    assert "extractive" in votes.text
    # the evidence weighing is shown exactly when the trace has one (a contested question)
    raw = json.loads(browser.find_element(By.ID, "raw").get_attribute("textContent"))
    verdicts = (raw["trace"].get("evidence") or {}).get("verdicts", [])
    shown = browser.find_elements(By.CSS_SELECTOR, "#ring3 .sides")
    assert len(shown) == len(verdicts)
    if verdicts:
        assert verdicts[-1]["outcome"] in browser.find_element(By.ID, "ring3").text
    assert "Gate" in browser.find_element(By.ID, "gate-info").text
    candidates = browser.find_element(By.ID, "candidates-table").text
    assert "UNVERIFIED provenance tag" in candidates and "blocked by Ring 1" in candidates
    # the attacker's HTML was shown as text, not run
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, "#result img")
    assert "<img src=x" in candidates
    _check_answer_box(browser, raw)
    path = _screenshot(browser, "viewer-ask")
    assert path.exists()


def _check_answer_box(browser, raw: dict) -> None:
    """Never green: a refusal is shown as one, an answer as checked (blue) or unchecked."""
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "answer")
    state = box.get_attribute("data-outcome")
    assert (state == "refused") == raw["refused"]
    assert state in ("refused", "answered", "unchecked")
    red, green, blue = _rgb(box.value_of_css_property("background-color"))
    assert not (green > red + 10 and green > blue + 10), "the answer box is green"
    assert box.text.startswith("Refused:" if raw["refused"] else
                               ("Answer", "Unchecked answer"))


def _rgb(css: str) -> tuple[int, ...]:
    values = css[css.index("(") + 1:css.index(")")].split(",")
    return tuple(round(float(v)) for v in values[:3])


def _open_passage(browser, details) -> str:
    """Open a passage's <details> and return its text once loaded from the document."""
    from selenium.webdriver.common.by import By

    details.find_element(By.TAG_NAME, "summary").click()
    _wait(browser, lambda d: details.get_attribute("data-loaded") in ("1", "error"), 30)
    assert details.get_attribute("data-loaded") == "1", details.text
    return details.find_element(By.CSS_SELECTOR, ".passage-text").get_attribute("textContent")


def test_passages_open_with_ring1s_evidence_highlighted(live_app, browser) -> None:
    """Every table's passage opens to its text (a blocked candidate's text is read from its
    document), Ring 1's quoted evidence is marked in it, the context is shown whole, and a
    blocked candidate links to its quarantine entry."""
    from selenium.webdriver.common.by import By

    url, keys = live_app
    _use_key(browser, url, "index.html", keys.reader)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#panel input[data-member]"))
    question = browser.find_element(By.ID, "question")
    question.clear()
    question.send_keys(REFUND_QUESTION)
    browser.find_element(By.ID, "ask-button").click()
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          in ("answered", "error"))
    raw = json.loads(browser.find_element(By.ID, "raw").get_attribute("textContent"))
    trace = raw["trace"]
    texts = {d["id"] + (XSS if n == 0 else ""): d["text"]
             for n, d in enumerate(REFUND.documents)}
    blocked = [v for v in trace["ring1"]["verdicts"] if v["blocked"] and v["patterns"]]
    assert blocked
    verdict = blocked[0]
    doc_id = verdict["id"].rsplit("#", 1)[0]
    row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#ring1-table tbody tr")
               if r.find_elements(By.CSS_SELECTOR, f'details[data-passage="{verdict["id"]}"]'))
    text = _open_passage(browser, row.find_element(By.CSS_SELECTOR, "details.passage"))
    assert text == texts[doc_id]  # the chunk is the whole (short) poison
    marks = row.find_elements(By.CSS_SELECTOR, "mark.hl-ring1")
    assert marks, "Ring 1's evidence is not highlighted"
    evidence = " ".join(p["evidence"] for p in verdict["patterns"]).lower()
    for mark in marks:
        assert " ".join(mark.text.lower().split()) in " ".join(evidence.split())
    # the same passage opens in the candidates table too, and links to the quarantine
    candidate = next(r for r in browser.find_elements(By.CSS_SELECTOR,
                                                      "#candidates-table tbody tr")
                     if r.find_elements(By.CSS_SELECTOR,
                                        f'details[data-passage="{verdict["id"]}"]'))
    assert _open_passage(browser, candidate.find_element(
        By.CSS_SELECTOR, "details.passage")) == texts[doc_id]
    link = candidate.find_element(By.CSS_SELECTOR, "a.quarantine-entry")
    assert link.get_attribute("data-doc") == doc_id
    assert link.get_attribute("href").endswith("quarantine.html#doc=" + quote(doc_id, safe=""))
    # the context is shown in full (no "..."), the answer marked where it appears
    cells = browser.find_elements(By.CSS_SELECTOR, "#context-table .passage-text")
    assert [c.get_attribute("textContent") for c in cells] == \
        [p["text"] for p in trace["context"]]
    if raw["answer"]:
        assert browser.find_elements(By.CSS_SELECTOR, "#context-table mark.hl-answer")
    _check_answer_box(browser, raw)
    _viewport_shot(browser, "docs-viewer-answer")
    # the near-copy of the refund policy: the changed number is what Ring 1 quotes and marks
    tampered = [v for v in trace["ring1"]["verdicts"]
                if any(p["name"] == "tampered_copy" for p in v["patterns"])]
    assert tampered
    for verdict in tampered:
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#ring1-table tbody tr")
                   if r.find_elements(By.CSS_SELECTOR,
                                      f'details[data-passage="{verdict["id"]}"]'))
        _open_passage(browser, row.find_element(By.CSS_SELECTOR, "details.passage"))
        assert "90" in [m.text for m in row.find_elements(By.CSS_SELECTOR, "mark.hl-ring1")]
    _viewport_shot(browser, "docs-viewer-ring1", browser.find_element(By.ID, "ring1-title"))
    # the markup in the attacker's id is still text after the passages were opened
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, "#result img")


def test_conflicting_passages_are_shown_side_by_side(live_app, browser) -> None:
    """Two neutral writers give two years: the trace's evidence section weighs them, the
    viewer puts the two claims next to each other with each claim marked in its passage,
    and a refusal is shown as a refusal."""
    from selenium.webdriver.common.by import By

    url, keys = live_app
    _use_key(browser, url, "index.html", keys.reader)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#panel input[data-member]"))
    Select = pytest.importorskip("selenium.webdriver.support.ui").Select
    Select(browser.find_element(By.ID, "gate")).select_by_value("always")
    question = browser.find_element(By.ID, "question")
    question.clear()
    question.send_keys(LIGHTHOUSE_QUESTION)
    browser.find_element(By.ID, "ask-button").click()
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          in ("answered", "error"))
    raw = json.loads(browser.find_element(By.ID, "raw").get_attribute("textContent"))
    verdicts = raw["trace"]["evidence"]["verdicts"]
    contested = [n for n, v in enumerate(verdicts, 1) if v.get("opposition")]
    assert contested, verdicts
    grid = browser.find_element(By.ID, f"evidence-{contested[0]}")
    columns = grid.find_elements(By.CSS_SELECTOR, ".side")
    assert len(columns) == 2
    # side by side: the second column starts to the right of the first, on the same row
    first, second = columns[0].rect, columns[1].rect
    assert second["x"] >= first["x"] + first["width"] - 1 and abs(second["y"] - first["y"]) < 5
    verdict = verdicts[contested[0] - 1]
    for column, claim in zip(columns, (verdict["support"], verdict["opposition"]), strict=True):
        _wait(browser, lambda d, c=column: c.find_elements(
            By.CSS_SELECTOR, "details.passage[data-loaded='1']"), 30)
        assert claim["claim"] in column.text
        marks = [m.text for m in column.find_elements(By.CSS_SELECTOR, "mark.hl-claim")]
        assert marks and all(m.lower() == claim["claim"].lower() for m in marks)
    shown = {column.text for column in columns}
    assert any("1891" in text for text in shown) and any("1905" in text for text in shown)
    _check_answer_box(browser, raw)
    _screenshot(browser, "viewer-conflict")
    _viewport_shot(browser, "docs-viewer-evidence",
                   browser.find_element(By.CSS_SELECTOR, "#ring3 h3:last-of-type"))


def test_ask_page_shows_the_evidence_of_a_contested_question(live_app, browser) -> None:
    from selenium.webdriver.common.by import By

    url, keys = live_app
    _use_key(browser, url, "index.html", keys.reader)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#panel input[data-member]"))
    question = browser.find_element(By.ID, "question")
    question.clear()
    question.send_keys(BRIDGE_QUESTION)
    browser.find_element(By.ID, "ask-button").click()
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          in ("answered", "error"))
    assert "Ada Lindqvist" in browser.find_element(By.ID, "answer").text
    assert "contested" in browser.find_element(By.ID, "gate-info").text
    evidence = browser.find_element(By.ID, "ring3").text
    # the gossip's lone untrusted document is no claim (single low-trust source) or loses
    assert "archive (trusted" in evidence and ("stands" in evidence or "unopposed" in evidence)
    assert browser.find_elements(By.CSS_SELECTOR, "#evidence-1 .side.winner")
    assert "one source:" in browser.find_element(By.ID, "ring3").text


def test_quarantine_link_marks_the_entry_or_says_why_there_is_none(live_app,
                                                                    browser) -> None:
    from selenium.webdriver.common.by import By

    url, keys = live_app
    held = "held/" + REFUND.documents[0]["id"]
    _use_key(browser, url, "quarantine.html#doc=" + quote(held, safe=""), keys.admin)
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          == "loaded")
    marked = browser.find_elements(By.CSS_SELECTOR, "#quarantine-table tr.focus")
    assert len(marked) == 1 and held in marked[0].text
    assert marked[0].find_element(By.CSS_SELECTOR, "details.passage").get_attribute("open")
    # a candidate Ring 1 blocked at question time is stored, not held: the page says so
    stored = REFUND.documents[1]["id"]
    _use_key(browser, url, "quarantine.html#doc=" + quote(stored, safe=""), keys.admin)
    _wait(browser, lambda d: "not in the quarantine" in d.find_element(By.ID, "focus-note").text)
    note = browser.find_element(By.ID, "focus-note").text
    assert stored in note and "DELETE /v1/documents/" in note
    assert not browser.find_elements(By.CSS_SELECTOR, "#quarantine-table tr.focus")


def test_quarantine_page_lists_and_releases_for_admins(live_app, browser) -> None:
    from selenium.webdriver.common.by import By

    url, keys = live_app
    _use_key(browser, url, "quarantine.html", keys.reader)
    _wait(browser, lambda d: "admins" in d.find_element(By.ID, "status").text)
    _use_key(browser, url, "quarantine.html", keys.admin)
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          == "loaded")
    assert browser.find_element(By.ID, "status").text == ""
    rows = browser.find_elements(By.CSS_SELECTOR, "#quarantine-table tbody tr")
    held = [row for row in rows if "held/" in row.text]
    assert held and "mallory" in held[0].text
    _screenshot(browser, "viewer-quarantine")
    held[0].find_element(By.CSS_SELECTOR, "button[data-release]").click()
    _wait(browser, lambda d: "released held/" in d.find_element(By.ID, "status").text)
    assert "audited as ada" in browser.find_element(By.ID, "status").text


def test_docs_page_renders_in_the_browser(live_app, browser) -> None:
    """Issue 17 item 11: /docs was blank in a browser (Swagger UI from a CDN, started by an
    inline script that the service's CSP blocks). Now the page shows every endpoint, styled
    by its same-origin stylesheet."""
    from selenium.webdriver.common.by import By

    url, _ = live_app
    browser.get(f"{url}/docs")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".op"), timeout=30)
    assert "TriShield" in browser.find_element(By.TAG_NAME, "h1").text
    paths = {element.text for element in browser.find_elements(By.CSS_SELECTOR, ".op .path")}
    assert {"/v1/documents", "/v1/ask", "/v1/search", "/healthz"} <= paths
    border = browser.find_element(By.CSS_SELECTOR, ".op").value_of_css_property("border-top-style")
    assert border == "solid"  # the stylesheet loaded under the CSP
    _screenshot(browser, "docs")


def test_disputes_page_lists_shows_and_settles_a_conflict(live_app, browser) -> None:
    """The lighthouse conflict asked on the ask page is recorded as a dispute (the answer
    links to it); the disputes page (admins) lists it, shows the two claims side by side with
    their passages, and quarantines a side, audited; the quarantine's release undoes it."""
    import httpx
    from selenium.webdriver.common.by import By

    from service_support import bearer

    url, keys = live_app
    _use_key(browser, url, "index.html", keys.reader)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#panel input[data-member]"))
    question = browser.find_element(By.ID, "question")
    question.clear()
    question.send_keys(LIGHTHOUSE_QUESTION)
    browser.find_element(By.ID, "ask-button").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "dispute-note"))
    note = browser.find_element(By.ID, "dispute-note")
    assert "Recorded as dispute" in note.text
    link = note.find_element(By.TAG_NAME, "a").get_attribute("href")
    assert "disputes.html#id=" in link
    dispute_id = int(link.rsplit("=", 1)[1])

    _use_key(browser, url, "disputes.html", keys.reader)
    _wait(browser, lambda d: "admins" in d.find_element(By.ID, "status").text)
    _use_key(browser, url, "disputes.html", keys.admin)
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state")
          == "loaded")
    rows = browser.find_elements(By.CSS_SELECTOR, "#disputes-table tbody tr")
    row = next(r for r in rows if LIGHTHOUSE_QUESTION in r.text)
    assert "harbour-society" in row.text and "town-guide" in row.text and "conflict" in row.text
    row.find_element(By.CSS_SELECTOR, "button[data-show]").click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#dispute-grid .side"))
    columns = browser.find_elements(By.CSS_SELECTOR, "#dispute-grid .side")
    assert len(columns) == 2
    first, second = columns[0].rect, columns[1].rect
    assert second["x"] >= first["x"] + first["width"] - 1 and abs(second["y"] - first["y"]) < 5
    shown = [column.text for column in columns]
    assert any("1891" in text for text in shown) and any("1905" in text for text in shown)
    assert all(column.find_elements(By.CSS_SELECTOR, "mark.hl-claim") for column in columns)
    _screenshot(browser, "viewer-disputes")
    _viewport_shot(browser, "docs-viewer-disputes", browser.find_element(By.ID, "disputes"))
    guide = next(c for c in columns if "town-guide" in c.text)
    number = guide.get_attribute("data-side")
    browser.find_element(By.ID, "resolve-note").send_keys("the harbour board's date")
    guide.find_element(By.CSS_SELECTOR, "button[data-action='quarantine']").click()
    _wait(browser, lambda d: "resolved" in d.find_element(By.ID, "status").text)
    status = browser.find_element(By.ID, "status").text
    assert "lighthouse/town-guide" in status and "audited as ada" in status
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute(
        "data-dispute-state") == "resolved")
    assert "resolved by ada" in browser.find_element(By.ID, "dispute-closed").text
    held = browser.find_element(By.CSS_SELECTOR, f"#dispute-grid .side[data-side='{number}']")
    assert "held" in held.text and not held.find_elements(By.CSS_SELECTOR, "button")
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
    # put the KB back as the other tests found it (the quarantine's own release)
    released = httpx.post(f"{url}/v1/quarantine/lighthouse/town-guide/release",
                          headers=bearer(keys.admin), timeout=60)
    assert released.status_code == 200, released.text
    assert httpx.get(f"{url}/v1/disputes/{dispute_id}",
                     headers=bearer(keys.admin)).json()["state"] == "resolved"
