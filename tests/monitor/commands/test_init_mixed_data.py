"""``driftloop init`` on a user's messy CSV: codes with leading zeros, numbers with a few bad values,
and column names a shell splits (the hints printed must work when copied)."""
from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import pandas as pd

from monitor.cli import main
from monitor.config import load_config


def init(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", "--output", str(tmp_path / "driftloop.yaml"), "--force", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def mixed(n: int = 1500, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"zip": [f"{z:05d}" for z in rng.choice([1001, 2002, 7501, 13008, 69001], n)],
                          "amount": rng.normal(50, 10, n).round(2).astype(str), "x": rng.normal(0, 1, n)})
    frame.loc[[40, 700, 1200], "amount"] = ["12,5", "n.a.", "12,5"]
    frame["y"] = rng.choice(["yes", "no"], n)
    return frame


def test_zip_codes_with_leading_zeros_are_a_category_as_written(tmp_path, capsys):
    mixed().drop(columns="amount").to_csv(tmp_path / "mixed.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "mixed.csv"), "--target", "y")
    assert code == 0, err
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})
    assert cfg.model.categorical_features == ["zip"] and cfg.model.numeric_features == ["x"]
    assert "# text, 5 value(s): 01001, 02002, 07501, 13008, 69001" in (tmp_path / "driftloop.yaml").read_text()


def test_numbers_with_a_few_bad_values_are_named_not_called_free_text(tmp_path, capsys):
    mixed().to_csv(tmp_path / "mixed2.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "mixed2.csv"), "--target", "y")
    assert code == 2
    assert ("column 'amount' is numeric except 3 of its 1500 values, such as '12,5', 'n.a.' (first at row 40): "
            "fix them in the data") in err
    assert "--ignore amount" in err and "--id amount" not in err and "free text" not in err
    # Fixed (the bad values emptied): a numeric feature with gaps.
    fixed = mixed()
    fixed.loc[[40, 700, 1200], "amount"] = None
    fixed.to_csv(tmp_path / "fixed.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "fixed.csv"), "--target", "y")
    assert code == 0, err
    assert "amount" in load_config(tmp_path / "driftloop.yaml", environ={}).model.numeric_features


def test_hints_quote_column_names_a_shell_would_split(tmp_path, capsys):
    rng = np.random.default_rng(4)
    n = 200
    frame = pd.DataFrame({"session token": [f"s-{i}-{rng.integers(1000)}" for i in range(n)],
                          "event time": pd.date_range("2026-01-01", periods=n, freq="h").astype(str),
                          "montant €": rng.normal(size=n), "température": rng.normal(size=n),
                          "churn": rng.integers(0, 2, n)})
    frame.to_csv(tmp_path / "names.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "names.csv"), "--target", "churn")
    assert code == 2
    assert "pass --id 'session token' if it is the record id, or --ignore 'session token'" in err
    assert "pass --ignore 'event time', or derive" in err
    assert "rename it or pass --ignore 'montant €'" in err
    assert "température" not in err  # accented letters are letters: a usable name
    # The hints, copied into a shell, run: init with those flags writes a config.
    args = ["--ignore", "session token", "--ignore", "event time", "--ignore", "montant €"]
    assert shlex.split(" ".join(shlex.quote(a) for a in args)) == args
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "names.csv"), "--target", "churn", *args)
    assert code == 0, err
    assert load_config(tmp_path / "driftloop.yaml", environ={}).model.feature_names == ["température"]


def test_left_out_hints_quote_the_column(tmp_path, capsys):
    rng = np.random.default_rng(5)
    n = 200
    # Saved with pandas' index: a column "Unnamed: 0" counting up, left out as a record id.
    pd.DataFrame({"key": [f"k{i}" for i in range(n)], "x": rng.normal(size=n),
                  "y": rng.integers(0, 2, n)}).to_csv(tmp_path / "saved.csv")
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "saved.csv"), "--target", "y", "--id", "key")
    assert code == 0, err
    assert "To use it as a feature, pass --keep 'Unnamed: 0'" in err
    assert "--keep 'Unnamed: 0' to use it as a feature" in (tmp_path / "driftloop.yaml").read_text()
