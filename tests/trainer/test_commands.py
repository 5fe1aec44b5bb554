"""`driftloop train`, `retrain` and `rollback` through the real CLI entry point (in-process)."""
import json

from monitor.cli import main
from trainer.synthetic import make_dataset


def test_train_retrain_rollback_on_files(home, tmp_path, capsys):
    make_dataset(1500, seed=1).to_csv(tmp_path / "train.csv", index=False)
    make_dataset(1200, seed=21, concept_shift=1.0).to_parquet(tmp_path / "recent.parquet")

    assert main(["train", "--data", "train.csv", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Registered driftloop-demo v1 (champion): test accuracy 0.")

    assert main(["retrain", "--data", "recent.parquet", "--trigger", "alert", "--incident-id", "3", "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["outcome"] == "promoted" and outcome["champion_version"] == "2"
    # Each run's datasets name the file they were read from, absolute (trainer/run_data.py).
    from mlflow import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    for version, name in (("1", "train.csv"), ("2", "recent.parquet")):
        run = client.get_run(client.get_model_version("driftloop-demo", version).run_id)
        sources = {json.loads(d.dataset.source)["uri"] for d in run.inputs.dataset_inputs}
        assert sources == {str((tmp_path / name).resolve())}

    assert main(["rollback"]) == 0
    assert capsys.readouterr().out.strip() == "Champion of driftloop-demo: v2 -> v1"
    assert main(["rollback"]) == 2
    assert "Error: registered model 'driftloop-demo': champion v1 has no previous champion" in capsys.readouterr().err


def test_user_mistakes_are_one_line_errors(home, tmp_path, capsys):
    assert main(["train", "--data", "missing.csv"]) == 2
    assert capsys.readouterr().err.strip() == "Error: data file not found: missing.csv"
    make_dataset(300).drop(columns="x1").to_csv(tmp_path / "d.csv", index=False)
    # Configured features are the contract: a file without one of them is refused (unconfigured,
    # train would infer the schema from the file instead).
    from monitor.config import ModelConfig
    features = [f.model_dump() for f in ModelConfig().features]
    (tmp_path / "driftloop.yaml").write_text(json.dumps({"model": {"features": features}}))
    assert main(["train", "--data", "d.csv", "--target", "label"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: training data: missing column(s) x1") and "Traceback" not in err
    assert main(["retrain", "--data", "d.csv", "--last-n", "5"]) == 2
    assert "give --data or --last-n, not both" in capsys.readouterr().err
