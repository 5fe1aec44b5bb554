"""``driftloop check`` and ``driftloop status`` against a real store and registry."""
from __future__ import annotations

import json

import yaml

from monitor.cli import main
from monitor.store import PredictionStore
from tests.monitor.daemon.conftest import Traffic


def config_file(cfg, tmp_path):
    path = tmp_path / "driftloop.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    return str(path)


def test_check_prints_a_table_and_json(make_config, tmp_path, capsys):
    cfg = make_config()
    path = config_file(cfg, tmp_path)
    assert main(["--config", path, "check"]) == 0
    assert "status empty" in capsys.readouterr().out
    with PredictionStore.from_config(cfg) as store:
        Traffic(cfg, store).send(1500, 100, concept=1.0)
    assert main(["--config", path, "check", "--fail-on-breach"]) == 3
    out = capsys.readouterr().out
    assert "champion v1" in out and "1500 rows, 1500 labelled" in out
    assert "BREACH (drop >= 0.03)" in out and "region" in out
    assert main(["--config", path, "check", "--json", "--no-report"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["status"] == "ok" and body["breaches"][0] == "accuracy" and body["report_html"] is None
    assert body["result"]["accuracy"] < body["result"]["baseline_accuracy"] - 0.03
    # check only looks: nothing was recorded, no incident opened.
    assert main(["--config", path, "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["last_check"] is None and status["open_incidents"] == []


def test_check_without_champion_is_a_one_line_error(make_config, tmp_path, capsys):
    cfg = make_config(with_champion=False)
    assert main(["--config", config_file(cfg, tmp_path), "check"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("Error: no champion model") and "driftloop train" in last


def test_status_reads_the_store_or_asks_the_daemon(live_daemon, tmp_path, capsys):
    daemon, url = live_daemon()
    daemon.retrain_now("manual", "because")
    assert daemon.wait_for_retrain(60)
    path = config_file(daemon.cfg, tmp_path)
    assert main(["--config", path, "status"]) == 0
    local = capsys.readouterr().out
    assert "champion     v1" in local and "promoted" in local and "manual" in local
    assert main(["--config", path, "status", "--url", url, "--json"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote["recent_retrains"][0]["status"] == "promoted" and remote["daemon"]["running"]
    assert main(["--config", path, "status", "--url", "http://127.0.0.1:1"]) == 2
    assert "cannot reach the daemon" in capsys.readouterr().err
    # A resolved incident stays visible, and its whole trail is one command away.
    incident = remote["recent_incidents"][0]
    assert incident["state"] == "resolved" and incident["id"] not in {i["id"] for i in remote["open_incidents"]}
    assert "recent closed" in local and incident["id"] in local
    assert main(["status", "--incident", incident["id"], "--config", path]) == 0
    trail = capsys.readouterr().out
    assert trail.startswith(f"incident     {incident['id']}  resolved")
    kinds = [line.split()[1] for line in trail.split("events\n")[1].split("retrains\n")[0].splitlines()]
    assert kinds[0] == "opened" and "resolved" in " ".join(kinds) and "promoted" in trail.split("retrains\n")[1]
    assert main(["status", "--incident", "nope", "--config", path]) == 2
    assert "no incident 'nope'" in capsys.readouterr().err


def test_check_judges_against_the_daemons_bar_the_reference_level(make_config, tmp_path, capsys):
    """After a concept change the loop keeps the reference level above a retrained champion's own
    baseline; `driftloop check` must judge the window against that bar, as the daemon does, and
    read the level without setting it."""
    from monitor.daemon.runtime.controller import observation
    from monitor.daemon.state.levels import ReferenceLevels
    from monitor.daemon.decisions.policy import AlertPolicy

    cfg = make_config()
    path = config_file(cfg, tmp_path)
    with PredictionStore.from_config(cfg) as store:
        Traffic(cfg, store).send(1500, 7)  # the concept the champion learnt: no drop from its baseline
    assert main(["--config", path, "check", "--json", "--no-report", "--fail-on-breach"]) == 0
    body = json.loads(capsys.readouterr().out)
    own = body["result"]["baseline_accuracy"]
    assert body["breaches"] == [] and body["result"]["accuracy"] > own - cfg.alerts.accuracy_drop
    with PredictionStore.from_config(cfg) as store:
        levels = ReferenceLevels(store.engine, cfg.model.name)
        assert levels.read() is None  # check set nothing
        # What the daemon keeps for this champion after its predecessor's level (the loop promoted it).
        levels.write(body["champion_version"], own + 0.1, body["result"]["baseline_roc_auc"])
        stored = levels.read()

    assert main(["--config", path, "check", "--no-report", "--fail-on-breach"]) == 3
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("accuracy"))
    assert f"{own + 0.1:.4f}*" in row and "BREACH (drop >= 0.03)" in row
    assert "* the reference level, the daemon's bar: stricter than champion v1's own baseline (accuracy " \
           f"{own:.4f})" in out
    assert main(["--config", path, "check", "--json", "--no-report"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["breaches"] == ["accuracy"] and body["reference_level"]["accuracy"] == own + 0.1

    # The daemon's verdict on the same window: the same breaches (it would also write the level; it is there).
    from monitor.daemon.runtime.checks import CheckJob
    from monitor.daemon.runtime.wiring import default_champion
    from monitor.drift import evaluate_window
    with PredictionStore.from_config(cfg) as store:
        outcome = CheckJob(cfg, store, default_champion(cfg), evaluate_window, lambda r, t: (None, None),
                           __import__("time").time).run()
        levels = ReferenceLevels(store.engine, cfg.model.name)
        daemon = AlertPolicy(cfg.alerts, cfg.drift.min_labels).performance_breaches(
            observation(outcome, levels.current(outcome)))
        assert levels.read() == stored
    assert [b.key for b in daemon] == body["breaches"]
