#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium over the DevTools
protocol.

  dashboard_browser_test.py --server PATH --screenshots DIR
      Starts the test server (tests/support/dashboard_test_server_main.cc),
      loads the overview and a run page while the run is held, releases it
      and waits for the page to show it completed without a reload (once
      with server-sent events, once with the page polling), then
      clicks retry on a failed run without the token (refused, run
      unchanged) and with it (queued again). Saves screenshots in DIR.

  dashboard_browser_test.py --capture URL --run RUN_ID --screenshots DIR
      Screenshots of a running dashboard (docs/images/ from the demo).

Exits 77 (CTest's skip code) when Chromium is not installed.
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import websocket  # python3-websocket

SKIP = 77
DEADLINE_SECONDS = 20


class TestFailure(Exception):
    pass


def deadline_loop(what, seconds=DEADLINE_SECONDS):
    """Yields until the caller returns; fails after `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
        time.sleep(0.05)
    raise TestFailure(f"timed out after {seconds}s waiting for {what}")


class Browser:
    """A headless Chromium with one page, driven over its DevTools socket."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="sluice-chromium-")
        args = [chromium, "--headless=new", "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}", "--no-first-run",
                "--no-default-browser-check", "--disable-gpu",
                "--disable-dev-shm-usage", "--disable-extensions",
                "--hide-scrollbars", "--window-size=1280,900",
                "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        port = self._debugging_port()
        page = None
        for _ in deadline_loop("Chromium's page target"):
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/json/list") as response:
                targets = json.load(response)
            page = next((t for t in targets if t.get("type") == "page"), None)
            if page:
                break
        # No Origin header: Chromium refuses unknown origins on this socket.
        self.socket = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _debugging_port(self):
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        for _ in deadline_loop("Chromium's DevToolsActivePort"):
            if self.process.poll() is not None:
                raise TestFailure(
                    f"chromium exited with {self.process.returncode}")
            if os.path.exists(port_file):
                with open(port_file) as f:
                    first = f.readline().strip()
                if first:
                    return int(first)

    def call(self, method, **params):
        self.next_id += 1
        message_id = self.next_id
        self.socket.send(json.dumps(
            {"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") != message_id:
                continue  # an event, or an old answer
            if "error" in message:
                raise TestFailure(f"{method}: {message['error']}")
            return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise TestFailure(f"script failed: {expression}: "
                              f"{result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what, seconds=DEADLINE_SECONDS):
        for _ in deadline_loop(what, seconds):
            value = self.evaluate(expression)
            if value:
                return value

    def navigate(self, url):
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && "
                      "location.href === " + json.dumps(url), f"{url} to load")

    def screenshot(self, path):
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        clip = {"x": 0, "y": 0, "width": 1280,
                "height": min(int(size["height"]) + 1, 4000), "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", clip=clip,
                         captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"screenshot: {path}")

    def close(self):
        try:
            self.socket.close()
        except Exception:  # the browser may already be gone
            pass
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def text_of(selector):
    return ("(() => { const e = document.querySelector(" + json.dumps(selector)
            + "); return e ? e.textContent.trim() : null; })()")


def api_run_detail(base, run_id):
    with urllib.request.urlopen(f"{base}/api/runs/{run_id}") as response:
        return json.load(response)


def api_run(base, run_id):
    return api_run_detail(base, run_id)["run"]


def check(condition, message):
    if not condition:
        raise TestFailure(message)
    print(f"ok: {message}")


def test_overview(browser, base, out):
    browser.navigate(base + "/")
    browser.wait_for("document.querySelector('tr[data-queue]') !== null",
                     "the overview's queues")
    unserved = browser.evaluate(
        "[...document.querySelectorAll('tr.unserved')]"
        ".map(r => r.dataset.queue)")
    check(any("orphan" in q for q in unserved),
          f"the queue nobody serves is highlighted ({unserved})")
    browser.wait_for("document.querySelector('tr[data-worker]') !== null",
                     "the live workers")
    browser.screenshot(os.path.join(out, "overview.png"))


def release(server, run_id):
    server.stdin.write(f"release {run_id}\n")
    server.stdin.flush()


def test_run_completes_live(browser, base, server, held_run, out):
    browser.navigate(f"{base}/runs/{held_run}")
    browser.wait_for(
        "document.querySelector('svg.dag g[data-step=\"hold\"]"
        "[data-status=\"started\"]') !== null",
        "the graph with `hold` started")
    check(browser.evaluate(text_of("#run-status")) == "started",
          "the held run shows started")
    map_detail = browser.evaluate(text_of(
        "svg.dag g[data-step=\"render\"] .detail"))
    check(map_detail == "map · 3/3 done",
          f"the map step shows done/total ({map_detail})")
    check(browser.evaluate("document.querySelector('.truncated-marker') "
                           "!== null"),
          "the large input shows a truncation marker")
    browser.wait_for(text_of("#live") + " === 'live'",
                     "the page's event stream to connect")
    browser.screenshot(os.path.join(out, "run-in-flight.png"))
    # A marker that a reload would wipe.
    browser.evaluate("window.sluiceNoReload = true")
    release(server, held_run)
    browser.wait_for(text_of("#run-status") + " === 'completed'",
                     "the run page to show completed")
    check(browser.evaluate("window.sluiceNoReload === true"),
          "the run page showed completed without a reload")
    check(browser.evaluate(
        "document.querySelector('svg.dag g[data-step=\"publish\"]')"
        ".dataset.status") == "completed",
          "the graph shows the last step completed")
    browser.screenshot(os.path.join(out, "run-completed.png"))


def test_run_completes_by_polling(browser, base, server, held_run):
    """Without EventSource the page polls, and still follows the run."""
    script = browser.call("Page.addScriptToEvaluateOnNewDocument",
                          source="delete window.EventSource;")
    try:
        browser.navigate(f"{base}/runs/{held_run}")
        browser.wait_for(text_of("#run-status") + " === 'started'",
                         "the second held run's page")
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument",
                     identifier=script["identifier"])
    check(browser.evaluate(text_of("#live")) == "polling",
          "without server-sent events the page polls")
    browser.evaluate("window.sluiceNoReload = true")
    release(server, held_run)
    browser.wait_for(text_of("#run-status") + " === 'completed'",
                     "the polling page to show completed")
    check(browser.evaluate("window.sluiceNoReload === true"),
          "the polling page showed completed without a reload")


def test_lists(browser, base, ready):
    """The runs list with a status filter, and the flows page."""
    rows = "[...document.querySelectorAll('tr[data-run]')].map(r => r.dataset.run)"
    browser.navigate(f"{base}/runs")
    shown = browser.wait_for(f"(() => {{ const ids = {rows}; "
                             "return ids.length >= 4 ? ids : null; })()",
                             "the runs list")
    check(set(ready["held_runs"]) | {ready["failed_run"]} <= set(shown),
          f"the runs list shows every run ({len(shown)} rows)")
    browser.navigate(f"{base}/runs?status=failed")
    shown = browser.wait_for(f"(() => {{ const ids = {rows}; "
                             "return ids.length ? ids : null; })()",
                             "the failed runs")
    check(shown == [ready["failed_run"]],
          "the status filter shows only the failed run")
    check(browser.evaluate(
        "document.querySelector('input[name=status][value=failed]')"
        ".checked"), "the filter form shows the chosen status")
    browser.navigate(f"{base}/flows")
    flows = browser.wait_for(
        "(() => { const f = [...document.querySelectorAll("
        "'[data-flow]')].filter(e => e.querySelector('svg.dag'))"
        ".map(e => e.dataset.flow); return f.length === 3 ? f : null; })()",
        "the flows page's graphs")
    check(sorted(flows) == ["dashboard_flaky", "dashboard_held",
                            "dashboard_orphan"],
          f"the flows page draws every flow ({flows})")


def click_retry(browser, token):
    browser.evaluate("document.querySelector('[data-action=retry]').click()")
    browser.wait_for("document.querySelector('#token') !== null",
                     "the token form")
    browser.evaluate("(() => { const t = document.querySelector('#token'); "
                     f"t.value = {json.dumps(token)}; "
                     "document.querySelector('[data-confirm=retry]').click();"
                     " })()")


def test_retry_needs_token(browser, base, failed_run, token, out):
    browser.navigate(f"{base}/runs/{failed_run}")
    browser.wait_for(text_of("#run-status") + " === 'failed'",
                     "the failed run's page")
    before = api_run(base, failed_run)
    click_retry(browser, "")
    refusal = browser.wait_for(
        "(() => { const e = document.querySelector("
        "'[data-outcome=refused]'); return e && e.textContent; })()",
        "the refusal")
    check("401" in refusal, f"retry without the token is refused: {refusal}")
    after = api_run(base, failed_run)
    check(after["status"] == "failed" and after == before,
          "the refused retry changed nothing")
    browser.screenshot(os.path.join(out, "retry-refused.png"))

    click_retry(browser, "not-the-token")
    refusal = browser.wait_for(
        "(() => { const e = document.querySelector("
        "'[data-outcome=refused][data-status=\"403\"]'); "
        "return e && e.textContent; })()",
        "the refusal of a wrong token")
    check(api_run(base, failed_run) == before,
          f"retry with a wrong token is refused ({refusal}), run unchanged")

    click_retry(browser, token)
    browser.wait_for("document.querySelector('[data-outcome=ok]') !== null",
                     "the retry to be accepted")
    status = api_run(base, failed_run)["status"]
    check(status in ("started", "completed"),
          f"the retried run is queued again ({status})")
    browser.wait_for(text_of("#run-status") + " === 'completed'",
                     "the retried run to complete on the page")
    outcomes = [a["outcome"] for a in
                api_run_detail(base, failed_run)["attempts"]]
    check(outcomes == ["failed", "completed"],
          f"the ledger holds the failed attempt and the retried one "
          f"({outcomes})")
    browser.screenshot(os.path.join(out, "retry-accepted.png"))


def run_test(args, chromium):
    os.makedirs(args.screenshots, exist_ok=True)
    server = subprocess.Popen([args.server], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    browser = None
    try:
        line = server.stdout.readline()
        if not line:
            raise TestFailure(f"the test server exited ({server.wait()})")
        ready = json.loads(line)
        base = ready["url"]
        browser = Browser(chromium)
        test_overview(browser, base, args.screenshots)
        test_run_completes_live(browser, base, server,
                                ready["held_runs"][0], args.screenshots)
        test_run_completes_by_polling(browser, base, server,
                                      ready["held_runs"][1])
        test_lists(browser, base, ready)
        test_retry_needs_token(browser, base, ready["failed_run"],
                               ready["token"], args.screenshots)
    finally:
        if browser:
            browser.close()
        server.stdin.close()
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            raise TestFailure("the test server did not stop")
    if code != 0:
        raise TestFailure(f"the test server exited with {code}")


def capture(args, chromium):
    """Screenshots of a running dashboard, for docs/images/."""
    os.makedirs(args.screenshots, exist_ok=True)
    browser = Browser(chromium)
    try:
        browser.navigate(args.capture.rstrip("/") + "/")
        browser.wait_for("document.querySelector('tr[data-queue]') !== null",
                         "the overview's queues")
        browser.screenshot(os.path.join(args.screenshots,
                                        "dashboard-overview.png"))
        browser.navigate(args.capture.rstrip("/") + f"/runs/{args.run}")
        browser.wait_for("document.querySelector('svg.dag g') !== null",
                         "the run's graph")
        browser.screenshot(os.path.join(args.screenshots,
                                        "dashboard-run.png"))
    finally:
        browser.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", help="the dashboard test server binary")
    parser.add_argument("--capture", help="the URL of a running dashboard")
    parser.add_argument("--run", help="with --capture: the run to show")
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skipped: chromium is not installed (scripts/bootstrap.sh)")
        return SKIP
    try:
        if args.capture:
            capture(args, chromium)
        else:
            run_test(args, chromium)
    except (TestFailure, urllib.error.URLError, OSError) as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    print("dashboard browser test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
