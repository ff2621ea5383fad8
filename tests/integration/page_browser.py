"""The status page in headless Chromium, against the daemon it_page.sh
started. Prints "ok - ..." and "not ok - ..." lines for the shell to count.

  VD_BASE=http://127.0.0.1:PORT VD_STORE=DIR VD_SHOT=FILE.png VD_HOSTILE_COPY=NAME \
  VD_HOSTILE_RUN=NAME VD_TAMPERED=HASH VD_DRIVER=chromedriver VD_SIGN="lensemble-verify \
  sign-roundclose --key KEY" [VD_SLOW=N] page_browser.py

Every wait is a bounded wait for a condition of the page (WebDriverWait),
never a fixed sleep.
"""
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

E = os.environ
BASE, STORE, SHOT = E["VD_BASE"], E["VD_STORE"], E["VD_SHOT"]
HOSTILE_COPY, HOSTILE_RUN, TAMPERED = E["VD_HOSTILE_COPY"], E["VD_HOSTILE_RUN"], E["VD_TAMPERED"]
DRIVER, SIGN = E["VD_DRIVER"], shlex.split(E["VD_SIGN"])
WAIT = 20 * int(E.get("VD_SLOW", "1"))   # longer with the daemon under valgrind
failed = 0


def ok(cond, desc, why=""):
    global failed
    if cond:
        print("ok - " + desc)
    else:
        failed += 1
        print("not ok - " + desc + (": " + why if why else ""))
    sys.stdout.flush()


def get(path):
    with urllib.request.urlopen(BASE + path, timeout=30) as r:
        return json.load(r)


def metric(name):
    with urllib.request.urlopen(BASE + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("lensemble_verifyd_" + name + " "):
                return float(line.split()[-1])
    return 0.0


def wait_for(driver, what, cond):
    try:
        WebDriverWait(driver, WAIT).until(lambda d: cond(d))
        return True
    except TimeoutException:
        ok(False, "the page shows " + what, "not within %d s" % WAIT)
        return False


def js(driver, script, *args):
    return driver.execute_script(script, *args)


def expected_state(a):
    if a["trusted"]:
        return "trusted"
    if a["state"] in ("failed", "verified"):
        return a["state"]
    return "pending"


def start():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1800", "--no-first-run", "--disable-extensions"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=o)


def run_section(d, name):
    return js(d, "var n = arguments[0]; return Array.from(document.querySelectorAll('section.run'))"
                 ".find(function (s) { return s.getAttribute('data-run') === n; }) || null", name)


def check_runs(d, chain):
    """The runs and heads the page shows are those of /chain; each mark is
    an artifact (or pruned link) of the run's page, in its state."""
    for r in chain["runs"]:
        name = r["run"]
        sec = run_section(d, name)
        ok(sec is not None, "run %r has its section" % name)
        if sec is None:
            continue
        ok(name in sec.find_element(By.CSS_SELECTOR, ".runname").text,
           "run %r is named verbatim in its heading" % name)
        trusted = sec.find_element(By.CSS_SELECTOR, 'dd[data-fact="trusted"]')
        head = r["committed_head"]
        if head is None:
            ok(trusted.text == "none", "run %r: no trusted head, as /chain says" % name, trusted.text)
        else:
            title = trusted.find_element(By.CSS_SELECTOR, "code").get_attribute("title")
            ok("round %d" % head["round_index"] in trusted.text and title == head["content_hash"],
               "run %r: trusted head round %d %s.. as /chain says" % (name, head["round_index"], head["content_hash"][:8]),
               trusted.text + " " + str(title))
        page = get("/chain?run=" + urllib.request.quote(name, safe="") + "&limit=500")
        want = sorted((a["round_index"], a["content_hash"], expected_state(a)) for a in page["artifacts"])
        want += [(p["round_index"], p["content_hash"], "pruned") for p in page["pruned"]]
        got = js(d, "return Array.from(arguments[0].querySelectorAll('.mark')).map(function (m) {"
                    " return [Number(m.dataset.round), m.dataset.hash, m.dataset.state, m.dataset.run]; })", sec)
        ok(sorted(tuple(g[:3]) for g in got) == sorted(want),
           "run %r: one mark per round with its hash and state, as /chain?run= says" % name,
           "page %s, /chain %s" % (sorted(got), sorted(want)))
        ok(all(g[3] == name for g in got), "run %r: every mark carries its run" % name)


def main():
    global failed
    chain0 = metric('http_requests_total{route="/chain",code="200"}')
    summary0 = metric('http_requests_total{route="/summary",code="200"}')
    d = start()
    try:
        t0 = time.monotonic()
        d.get(BASE + "/")
        loaded = wait_for(d, "its data and a live event stream",
                          lambda d: js(d, "return document.body.dataset.loaded === '1' && document.body.dataset.live === '1'"
                                          " && document.querySelectorAll('section.run').length > 0 &&"
                                          " Array.from(document.querySelectorAll('section.run')).every(function (s) {"
                                          " return s.hasAttribute('data-rendered-ms'); })"))
        if not loaded:
            return
        ms = js(d, "return Math.max.apply(null, Array.from(document.querySelectorAll('section.run'))"
                   ".map(function (s) { return Number(s.getAttribute('data-rendered-ms')); }))")
        print("# every run drawn %.0f ms after navigation (%.2f s with the browser's start)" % (ms, time.monotonic() - t0))
        chain = get("/chain")
        runs = len(chain["runs"])
        chain1 = metric('http_requests_total{route="/chain",code="200"}')
        summary1 = metric('http_requests_total{route="/summary",code="200"}')
        # The metric is asked for after the page's reads: counted by then.
        ok(chain1 - chain0 - 1 <= 1 + runs and summary1 - summary0 == 1,
           "a page view costs one /summary, one /chain and one page per run (%d runs)" % runs,
           "/chain %d, /summary %d" % (chain1 - chain0 - 1, summary1 - summary0))

        # --- the daemon's facts ---
        s = get("/summary")
        ok(d.find_element(By.ID, "version").text == s["version"], "the version is shown")
        ok(d.find_element(By.ID, "policy").text == s["commitment_policy"] == "signed", "the commitment policy is shown")
        keys = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#trusted-keys code")]
        ok(keys == s["trusted_keys"] and len(keys) == 1, "the trusted key ids are shown", str(keys))
        ok(d.find_element(By.ID, "ready").text == "ready", "readiness is shown")

        check_runs(d, chain)

        # --- a run committed by OMS bundles: the source is named as the others ---
        sec = run_section(d, "oms-run")
        committed = sec.find_element(By.CSS_SELECTOR, 'dd[data-fact="committed"]').text
        ok(committed.startswith("round 1 ") and committed.endswith("(OMS bundle)"),
           "run oms-run: its committed head names the OMS bundle that commits it", committed)
        sec.find_element(By.CSS_SELECTOR, 'li.round[data-round="1"] .mark').click()
        shown = wait_for(d, "oms-run round 1's commitment", lambda d: "OMS bundle (oms), signed" in
                         d.find_element(By.CSS_SELECTOR, "#details section.commitment").text)
        ok(shown, "its round 1's details give the commitment's source: OMS bundle (oms), signed")
        sec.find_element(By.CSS_SELECTOR, 'li.round[data-round="0"] .mark').click()
        shown = wait_for(d, "oms-run round 0's commitment", lambda d: "none (the genesis)" in
                         d.find_element(By.CSS_SELECTOR, "#details section.commitment").text)
        ok(shown, "its round 0's commitment is of the genesis round, not a pin")
        d.find_element(By.ID, "details-close").click()

        # --- hostile names are text ---
        alerts = [e.text for e in d.find_elements(By.CSS_SELECTOR, 'li.alert[data-kind="artifact_failed"] .subject')]
        ok(HOSTILE_COPY in alerts, "the copy named %s is listed verbatim in the alerts" % HOSTILE_COPY, str(alerts))
        ok(js(d, "return document.querySelectorAll('img, script:not([src])').length") == 0,
           "no element was made from a name in the store")

        # --- the tampered round: failed, with its reason ---
        mark = d.find_element(By.CSS_SELECTOR, '.mark[data-hash="%s"]' % TAMPERED)
        ok(mark.get_attribute("data-state") == "failed", "the tampered round's mark is failed")
        mark.click()
        wait_for(d, "the tampered round's status", lambda d: d.find_element(By.ID, "details").get_attribute("data-hash") == TAMPERED)
        det = d.find_element(By.ID, "details")
        text = det.text
        ok("checkpoint_integrity" in text, "its details give the reason: checkpoint_integrity")
        paths = [e.text for e in det.find_elements(By.CSS_SELECTOR, "code.path")]
        ok(HOSTILE_COPY in paths, "its copy's path is shown verbatim", str(paths))
        ok(len(det.find_elements(By.CSS_SELECTOR, ".remediation")) == 1, "its remediation is shown")
        link = det.find_element(By.CSS_SELECTOR, 'a[data-link="attestation"]').get_attribute("href")
        ok(link == BASE + "/artifact/%s/attestation" % TAMPERED, "it links to its attestation", link)

        # --- the keyboard: arrows move between rounds, Enter opens one ---
        d.find_element(By.ID, "details-close").click()
        root = run_section(d, ".")
        first = root.find_element(By.CSS_SELECTOR, '.mark[tabindex="0"]')
        js(d, "arguments[0].focus()", first)
        first.send_keys(Keys.HOME)
        first_round = js(d, "return document.activeElement.dataset.round")
        d.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
        nxt = d.switch_to.active_element
        ok(first_round == "0" and nxt.get_attribute("data-round") == "1",
           "Home and the right arrow move the focus from round 0 to round 1",
           "%s then %s" % (first_round, nxt.get_attribute("data-round")))
        nxt.send_keys(Keys.ENTER)
        h1 = nxt.get_attribute("data-hash")
        wait_for(d, "round 1's status after Enter",
                 lambda d: d.find_element(By.ID, "details").get_attribute("data-hash") == h1)
        ok(d.switch_to.active_element.get_attribute("id") == "details-h", "the details take the focus")
        d.switch_to.active_element.send_keys(Keys.ESCAPE)
        ok(d.switch_to.active_element.get_attribute("data-hash") == h1, "Escape closes them and gives the focus back")

        # --- the hostile run: its name is text, its chain drawn ---
        names = [e.text for e in d.find_elements(By.CSS_SELECTOR, "section.run .runname")]
        ok(HOSTILE_RUN in names, "the run named %s is shown verbatim" % HOSTILE_RUN, str(names))

        # --- a ledger rewritten: the alert comes without a reload ---
        js(d, "window.vdNotReloaded = true")
        ledger = STORE + "/ledger.jsonl"
        with open(ledger) as f:
            lines = f.read().split("\n")
        rec = json.loads(lines[1])
        other = json.loads(lines[2])["global_model_hash"]
        lines[1] = lines[1].replace(rec["global_model_hash"], other)
        with open(ledger, "w") as f:
            f.write("\n".join(lines))
        wait_for(d, "ledger_rewritten in the alerts, live",
                 lambda d: len(d.find_elements(By.CSS_SELECTOR, 'li.alert[data-kind="ledger_rewritten"]')) > 0)
        ok(js(d, "return window.vdNotReloaded === true"), "the alert came without a reload")
        ok("REWRITTEN" in d.find_element(By.ID, "ledger-rows").text, "the ledger's row says it was rewritten")
        wait_for(d, "the ledger's chain broken, live",
                 lambda d: "broken" in d.find_element(By.ID, "ledger-rows").text)

        # --- a key signs a second hash for round 3: an equivocation, live ---
        os.makedirs(STORE + "/commitments", exist_ok=True)
        subprocess.run(SIGN + ["--run", ".", "--round", "3", "--hash", "ab" * 32,
                               "-o", STORE + "/commitments/round-3-again.json"], check=True, stdout=subprocess.DEVNULL)
        os.chmod(STORE + "/commitments/round-3-again.json", 0o644)
        seen = wait_for(d, "an equivocation at round 4", lambda d: len(root.find_elements(
            By.CSS_SELECTOR, 'li.round[data-round="4"] .t-equivocation')) > 0)
        seen = seen and wait_for(d, "round 4 no longer trusted", lambda d: root.find_element(
            By.CSS_SELECTOR, 'li.round[data-round="4"] .mark').get_attribute("data-state") == "verified")
        seen = seen and wait_for(d, "the trusted head back at round 3", lambda d: root.find_element(
            By.CSS_SELECTOR, 'dd[data-fact="trusted"]').text.startswith("round 3 "))
        ok(seen, "a second signed hash for round 3 draws round 4 as an equivocation, untrusted, live")
        committed = root.find_element(By.CSS_SELECTOR, 'dd[data-fact="committed"]').text
        ok("equivocation" in committed, "the committed head says two hashes are committed", committed)
        root.find_element(By.CSS_SELECTOR, 'li.round[data-round="4"] .mark').click()
        wait_for(d, "round 4's breaks", lambda d: len(d.find_elements(By.CSS_SELECTOR, '#details li[data-reason]')) > 0)
        reasons = [e.get_attribute("data-reason") for e in d.find_elements(By.CSS_SELECTOR, "#details li[data-reason]")]
        ok("commitment_mismatch" in reasons, "round 4's details list its chain break with the reason", str(reasons))
        d.save_screenshot(SHOT.replace(".png", "-details.png"))
        print("# screenshot with a round's details: " + SHOT.replace(".png", "-details.png"))
        d.find_element(By.ID, "details-close").click()

        # --- nothing ran, nothing complained ---
        try:
            d.switch_to.alert
            ok(False, "no alert dialog was opened")
        except NoAlertPresentException:
            ok(True, "no alert dialog was opened")
        logs = d.get_log("browser")
        bad = [l for l in logs if l["level"] in ("SEVERE", "WARNING")]
        ok(not bad, "the browser's console has no error or warning", str(bad))
        for l in logs:
            print("# console: %s %s" % (l["level"], l["message"]))

        js(d, "window.scrollTo(0, 0)")
        d.save_screenshot(SHOT)
        print("# screenshot: " + SHOT)
    finally:
        d.quit()


main()
sys.exit(1 if failed else 0)
