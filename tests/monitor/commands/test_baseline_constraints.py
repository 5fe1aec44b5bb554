"""``driftloop baseline-constraints`` on a real champion (PyTorch, MLflow on SQLite), and the daemon's
checks holding live traffic to the file it wrote: each violation in the check, ``driftloop check``,
``GET /v1/status`` and /metrics; a person's edit (a wider range) clears its violation; a malformed file is
reported by the check, which still completes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.cli import main
from monitor.daemon.runtime.views import public_status, render_status
from tests.monitor.daemon.conftest import baseline_home, clock, make_config, make_daemon  # noqa: F401  (fixtures)
from trainer.synthetic import make_dataset

BROKEN = {("x0", "range_check"), ("region", "categorical_values_check"), ("x1", "completeness_check"),
          ("device", "missing_column_check")}


@pytest.fixture
def daemon(make_daemon, tmp_path, monkeypatch):  # noqa: F811
    for name in [k for k in os.environ if k.startswith("DRIFTLOOP_")]:
        monkeypatch.delenv(name)
    made, _ = make_daemon()
    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump(made.cfg.model_dump(mode="json")))
    return made, str(config)


def send(daemon, n: int, seed: int) -> None:
    """What the model service sends: rows scored by the champion, then 5 % of x0 far out of range,
    3 % of region an unknown category, 10 % of x1 missing and device no longer sent at all."""
    import trainer
    rows = make_dataset(n, seed=seed)
    rows["score"] = trainer.load_champion(daemon.cfg).predict_proba(rows)
    rows["id"] = [f"r-{seed}-{i}" for i in range(n)]
    rows["ts"] = daemon.clock() - 3600 + np.arange(n) * 0.5
    rows.loc[: n // 20 - 1, "x0"] = 40.0
    rows.loc[n // 2: n // 2 + 3 * n // 100 - 1, "region"] = "mars"
    rows.loc[n // 4: n // 4 + n // 10 - 1, "x1"] = np.nan
    rows["device"] = None
    daemon.store.add_predictions(rows.drop(columns=["label"]))
    daemon.store.add_labels(rows[["id", "label", "ts"]])


def violations(block: dict) -> set[tuple[str, str]]:
    return {(v["column"], v["check"]) for v in block["violations"]}


def metrics(daemon) -> dict:
    text = generate_latest(daemon.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if "constraint" in s.name}


def test_the_file_is_the_champions_baseline_and_the_checks_hold_traffic_to_it(daemon, capsys):
    import trainer
    daemon, config = daemon
    cfg = daemon.cfg
    assert main(["--config", config, "baseline-constraints"]) == 0
    said = capsys.readouterr().out
    assert str(cfg.constraints_path) in said and "from the next one on" in said
    body = json.loads(cfg.constraints_path.read_text())
    champion = trainer.load_champion(cfg)
    ref = champion.baseline.reference
    assert (body["version"], body["model"], body["champion_version"]) == (1, "demo", str(champion.version))
    assert body["baseline_rows"] == len(ref)
    columns = body["columns"]
    assert list(columns) == [*cfg.model.feature_names, "score", "prediction", "label"]
    for name in [*cfg.model.numeric_features, "score"]:
        assert (columns[name]["min"], columns[name]["max"]) == (ref[name].min(), ref[name].max()), name
        assert columns[name]["completeness"] == 1.0 and columns[name]["inferred_type"] == "fractional"
    for name in cfg.model.categorical_features:
        assert columns[name]["categories"] == sorted(ref[name].unique()), name
    assert columns["prediction"]["categories"] == columns["label"]["categories"] == ["0", "1"]
    # A second run keeps a file a person may have edited; --out - prints it instead.
    assert main(["--config", config, "baseline-constraints"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["--config", config, "baseline-constraints", "--out", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["columns"].keys() == columns.keys()

    # The daemon's check: each violation, in the result, /v1/status and /metrics.
    send(daemon, 1500, seed=40)
    outcome = daemon.run_check_now().outcome
    assert outcome.status == "ok"
    block = outcome.result.to_dict()["constraints"]
    assert block["valid"] and violations(block) == BROKEN
    by = {v["column"]: v for v in block["violations"]}
    assert by["x0"]["rows"] >= 75 and by["x0"]["example_values"][0] == 40.0
    assert (by["region"]["rows"], by["region"]["example_values"]) == (45, ["mars"])
    assert by["x1"]["rows"] == 150 and by["device"]["rows"] == 1500
    status = daemon.status()
    assert violations(status["last_check"]["constraints"]) == BROKEN
    public = public_status(status)["last_check"]["constraints"]
    assert public["file"] == "hidden" and {v["column"] for v in public["violations"]} >= {"x0", "region"}
    assert "mars" not in json.dumps(public)  # values that broke a constraint are data: hidden without the token
    assert "region  categorical_values_check" in render_status(status)
    got = metrics(daemon)
    m = ("model", "demo")
    assert got[("driftloop_model_constraints_valid", (m,))] == 1
    assert got[("driftloop_model_constraint_violations", (("check", "range_check"), m))] == 1
    assert got[("driftloop_model_constraint_violation_ratio", (("check", "categorical_values_check"),
                                                               ("column", "region"), m))] == 0.03

    # `driftloop check` says the same, in JSON and in its text.
    assert main(["--config", config, "check", "--json", "--no-report"]) == 0
    assert violations(json.loads(capsys.readouterr().out)["result"]["constraints"]) == BROKEN
    assert main(["--config", config, "check", "--no-report"]) == 0
    text = capsys.readouterr().out
    assert "constraints  4 violation(s) in 13 column(s)" in text and "x0  range_check" in text

    # A person widens x0's range: that violation goes, the others stay.
    body["columns"]["x0"]["max"] = 100.0
    cfg.constraints_path.write_text(json.dumps(body, indent=2))
    block = daemon.run_check_now().outcome.result.to_dict()["constraints"]
    assert violations(block) == BROKEN - {("x0", "range_check")}

    # A malformed file: the check completes and says which column and field.
    body["columns"]["x0"]["min"] = "low"
    cfg.constraints_path.write_text(json.dumps(body, indent=2))
    outcome = daemon.run_check_now().outcome
    assert outcome.status == "ok" and outcome.result.features
    block = outcome.result.to_dict()["constraints"]
    assert not block["valid"] and "columns.x0.min" in block["problem"] and block["violations"] == []
    assert metrics(daemon)[("driftloop_model_constraints_valid", (m,))] == 0
    assert "NOT CHECKED" in render_status(daemon.status())
