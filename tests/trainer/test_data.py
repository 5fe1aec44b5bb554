import numpy as np
import pandas as pd
import pytest

from monitor.errors import DataError, UserInputError
from trainer.data import check_frame, fingerprint, read_table, split
from trainer.synthetic import make_dataset


@pytest.fixture
def rows():
    return make_dataset(300, seed=0)


def test_clean_frame_passes_and_store_columns_are_dropped(config, rows):
    window = rows.assign(id=[f"r{i}" for i in range(len(rows))], ts=pd.Timestamp("2026-01-01", tz="UTC"),
                         score=0.5, prediction=1, label_ts=pd.NaT)
    out = check_frame(window, config.model)
    assert list(out.columns) == config.model.feature_names + ["label"]
    assert out["label"].dtype == np.int64 and out["region"].dtype == object
    pd.testing.assert_frame_equal(out, check_frame(rows, config.model))


@pytest.mark.parametrize("mutate, message", [
    (lambda df: df.iloc[0:0], "empty"),
    (lambda df: df.drop(columns=["x3", "device"]), "missing column(s) x3, device"),
    (lambda df: df.drop(columns=["label"]), "missing column(s) label"),
    (lambda df: df.assign(customer="a"), "column(s) customer not in the model's features"),
    (lambda df: df.assign(x2=np.nan), "feature column(s) x2 have no values (all missing)"),
    (lambda df: df.assign(x5=np.where(df.index == 3, np.inf, df["x5"])), "'x5' has 1 non-numeric or infinite"),
    (lambda df: df.assign(x0=df["x0"].astype(object).where(df.index != 5, "abc")),
     "first at row 5: 'abc'); did its type change?"),
    (lambda df: df.assign(label=df["label"].where(df.index != 4, 2)), "not 0 or 1 (first at row 4: 2)"),
    (lambda df: df.assign(label=df["label"].astype(float).where(df.index != 8)), "not 0 or 1 (first at row 8"),
    (lambda df: df.assign(label=1), "single class (1)"),
    (lambda df: df.iloc[:50], "50 rows, need at least 100"),
])
def test_bad_data_is_a_clear_error(config, rows, mutate, message):
    with pytest.raises(DataError) as err:
        check_frame(mutate(rows), config.model, what="recent window", min_rows=100)
    assert message in str(err.value)
    assert str(err.value).startswith("recent window")


def test_not_a_dataframe(config):
    with pytest.raises(DataError, match="expected a pandas DataFrame, got list"):
        check_frame([{"x0": 1}], config.model)


def test_split_is_stratified_and_refuses_a_one_class_side(config, rows):
    clean = check_frame(rows, config.model)
    rest, held = split(clean, 0.3, "label", seed=1)
    assert len(rest) + len(held) == len(clean)
    assert abs(held["label"].mean() - clean["label"].mean()) < 0.02
    rest2, held2 = split(clean, 0.3, "label", seed=1)
    assert held.equals(held2)
    tiny = pd.concat([clean[clean.label == 0].head(20), clean[clean.label == 1].head(1)])
    with pytest.raises(DataError, match="too few rows to hold out a holdout set: class 1 has 1 row"):
        split(tiny, 0.3, "label", seed=1, what="recent window", part="holdout")
    with pytest.raises(DataError, match="class churned has 1 row"):   # named as the user names it
        split(tiny, 0.3, "label", seed=1, classes=["stayed", "churned"])


def test_read_table_csv_and_parquet(tmp_path, rows):
    rows.to_csv(tmp_path / "d.csv", index=False)
    rows.to_parquet(tmp_path / "d.parquet")
    pd.testing.assert_frame_equal(read_table(tmp_path / "d.parquet"), rows)
    assert read_table(tmp_path / "d.csv").shape == rows.shape
    with pytest.raises(UserInputError, match="not found"):
        read_table(tmp_path / "nope.csv")
    (tmp_path / "d.xlsx").write_text("x")
    with pytest.raises(UserInputError, match="unsupported file type"):
        read_table(tmp_path / "d.xlsx")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="cannot read"):
        read_table(tmp_path / "bad.parquet")


def test_fingerprint_changes_with_content(rows):
    assert fingerprint(rows) == fingerprint(rows.copy())
    changed = rows.copy()
    changed.loc[0, "x0"] += 1e-9
    assert fingerprint(rows) != fingerprint(changed)


def test_missing_feature_values_are_kept_and_id_and_ignored_columns_dropped(config, rows):
    from monitor.config import load_config
    cfg = load_config(path=None, environ={}, overrides={"model": {"id": "customer_id", "ignore": ["notes"]}})
    data = rows.assign(customer_id=[f"c{i}" for i in range(len(rows))], notes="x",
                       x2=rows["x2"].where(rows.index != 17), region=rows["region"].where(rows.index != 9))
    out = check_frame(data, cfg.model, min_rows=100)
    assert list(out.columns) == [*cfg.model.feature_names, "label"]
    assert (np.isnan(out.loc[17, "x2"]) and out.loc[9, "region"] is None
            and out.loc[8, "region"] == rows.loc[8, "region"])


def test_read_table_keeps_codes_with_leading_zeros_and_configured_text_as_written(tmp_path):
    (tmp_path / "codes.csv").write_text("zip,plan,gap_zip,zero,half,n,flag\n"
                                        "01001,7,,0,0.5,1,True\n"
                                        "69001,+44,02002,1,1.5,2,False\n"
                                        "13008,1e3,13008,0,2.0,3,\n")
    df = read_table(tmp_path / "codes.csv")
    assert df["zip"].tolist() == ["01001", "69001", "13008"]  # codes, not the integers 1001, 69001, 13008
    assert df["gap_zip"].tolist()[1:] == ["02002", "13008"] and pd.isna(df["gap_zip"].iloc[0])
    # Numbers without leading zeros stay numbers ("0" and "0.5" are no codes).
    assert df["zero"].dtype == np.int64 and df["half"].dtype == np.float64 and df["n"].dtype == np.int64
    assert df["plan"].tolist() == [7.0, 44.0, 1000.0]  # pandas' parse: "+44" and "1e3" are numbers to it
    # A column declared categorical is the file's text, never a number parse.
    coded = read_table(tmp_path / "codes.csv", text=["plan", "not_a_column"])
    assert coded["plan"].tolist() == ["7", "+44", "1e3"] and coded["n"].dtype == np.int64
    (tmp_path / "gaps.csv").write_text("plan,x\n7,1\n,2\n1000,3\n")  # an int parse: 7.0, NaN, 1000.0
    plan = read_table(tmp_path / "gaps.csv", text=["plan"])["plan"].tolist()
    assert plan[::2] == ["7", "1000"] and pd.isna(plan[1])


@pytest.mark.parametrize("chunk", [1 << 24, 7], ids=["one-chunk", "split-across-chunks"])
def test_the_scan_for_codes_finds_every_written_form_and_skips_numeric_files(tmp_path, monkeypatch, chunk):
    """The second, text read of whole-number columns happens only where some field begins with a
    leading zero: the scan must find every form a code is written in, anywhere in the file."""
    import gzip

    from trainer import data
    monkeypatch.setattr(data, "_SCAN_CHUNK", chunk)
    numeric = "zip,x,when\n1001,0.5,2024-01-05\n2002,10.05,2024-10-30\n300,-0.25,2023-12-01\n"
    (tmp_path / "n.csv").write_text(numeric)
    assert not data._may_hold_codes(tmp_path / "n.csv")  # 0.5, 10.05, -0.25, dates: no code
    for i, code in enumerate(["01001", '"01001"', " 007", "-05", '" 007"', "+01"]):
        for where in ("first", "last"):
            text = f"zip,x\n{code},1\n2002,2\n" if where == "first" else f"x,zip\n1,2002\n2,{code}"
            path = tmp_path / f"c{i}{where}.csv"
            path.write_text(text)
            assert data._may_hold_codes(path), (code, where)
    with gzip.open(tmp_path / "c.csv.gz", "wt") as f:
        f.write("x,zip\n1,2002\n2,01001\n")
    assert data._may_hold_codes(tmp_path / "c.csv.gz")
    assert read_table(tmp_path / "c.csv.gz")["zip"].tolist() == ["2002", "01001"]
    assert read_table(tmp_path / "n.csv")["zip"].tolist() == [1001, 2002, 300]


def test_a_wide_table_is_checked_without_fragmenting_the_frame(config):
    # 150 numeric and 5 categorical features: pandas warned PerformanceWarning 56 times ("highly fragmented").
    import warnings

    from monitor.config import ModelConfig

    rng = np.random.default_rng(0)
    numeric = {f"n{i}": rng.normal(size=200) for i in range(150)}
    text = {f"c{i}": rng.choice(["a", "b", "c"], 200) for i in range(5)}
    frame = pd.DataFrame({**numeric, **text, "label": rng.integers(0, 2, 200)}, index=np.arange(1000, 1200))
    model = ModelConfig(features=[{"name": n, "type": "numeric"} for n in numeric]
                        + [{"name": n, "type": "categorical"} for n in text])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        out = check_frame(frame, model)
    assert list(out.columns) == [*numeric, *text, "label"] and len(out) == 200
    assert out.index.equals(pd.RangeIndex(200)) and out["n3"].tolist() == numeric["n3"].tolist()
    assert out["c1"].tolist() == text["c1"].tolist()
