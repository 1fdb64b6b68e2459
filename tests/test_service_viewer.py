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
        pytest.fail("Debian's chromium and chromium-driver are required (make install "
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
    shown = browser.find_elements(By.ID, "evidence-table")
    assert bool(shown) == bool(verdicts)
    if verdicts:
        assert verdicts[-1]["outcome"] in shown[0].text
    assert "Gate" in browser.find_element(By.ID, "gate-info").text
    candidates = browser.find_element(By.ID, "candidates-table").text
    assert "UNVERIFIED provenance tag" in candidates and "blocked by Ring 1" in candidates
    # the attacker's HTML was shown as text, not run
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, "#result img")
    assert "<img src=x" in candidates
    path = _screenshot(browser, "viewer-ask")
    assert path.exists()


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
    evidence = browser.find_element(By.ID, "evidence-table").text
    # the gossip's lone untrusted document is no claim (single low-trust source) or loses
    assert "archive (trusted" in evidence and ("stands" in evidence or "unopposed" in evidence)
    assert "one source:" in browser.find_element(By.ID, "ring3").text


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
