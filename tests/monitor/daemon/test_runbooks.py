"""The daemon serves the alerts' runbooks: every rule's runbook_url, rendered with the scraped
instance as Prometheus renders it, opens the alert's page on a running daemon, without a token."""
from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from monitor.daemon.runtime.runbooks import RunbooksMissing, render, runbook_page
from scripts import docs_gen


def test_every_rules_runbook_url_opens_on_a_running_daemon(live_daemon):
    _, base = live_daemon(token="a-token-of-at-least-32-characters-x")  # the pages need none
    instance = urlsplit(base).netloc
    for alert in docs_gen.alerts():
        url = docs_gen.runbook_url(alert["alert"], instance=instance)
        if alert["alert"] in docs_gen.SITE_ONLY:  # its target is down: the docs site's link instead
            assert url.startswith(docs_gen.site_url())
            url = f"{base}/runbooks/{alert['alert'].lower()}/"
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
            assert response.status == 200 and response.headers["content-type"].startswith("text/html")
        assert f"<h1>{alert['alert']}</h1>" in page and "<h2>Mitigation</h2>" in page, alert["alert"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/runbooks/driftloopnosuchalert/", timeout=10)
    assert missing.value.code == 404
    with urllib.request.urlopen(f"{base}/runbooks/", timeout=10) as response:
        assert response.read().decode().count("<li>") == len(docs_gen.alerts())


def test_rendering_escapes_and_keeps_only_safe_links():
    html = render("# T <x>\n\nSee [a](driftloopdown.md), [b](https://e.org/), [c](javascript:alert(1)) and "
                  "`<b>` **bold**.\n\n- one\n  more\n- two\n\n```bash\necho '<hi>'\n```\n")
    assert "<h1>T &lt;x&gt;</h1>" in html
    assert '<a href="/runbooks/driftloopdown/">a</a>' in html and '<a href="https://e.org/">b</a>' in html
    assert "javascript" not in html and "<code>&lt;b&gt;</code>" in html and "<strong>bold</strong>" in html
    assert "<ul><li>one more</li><li>two</li></ul>" in html
    assert "<pre><code>echo &#x27;&lt;hi&gt;&#x27;</code></pre>" in html


def test_names_outside_the_runbooks_and_a_missing_folder(tmp_path):
    (tmp_path / "driftloopdown.md").write_text("# DriftloopDown\n")
    assert runbook_page("../../etc/passwd", tmp_path) is None and runbook_page("nosuch", tmp_path) is None
    assert "<h1>DriftloopDown</h1>" in runbook_page("driftloopdown", tmp_path)
    with pytest.raises(RunbooksMissing, match="--set-site-url"):
        runbook_page("driftloopdown", tmp_path / "absent")
