"""``driftloop init`` on a Parquet file from an image or text model: a list column of equal-length
vectors is an embedding feature with its dim; input_uri and path columns are left out, said why."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from monitor.cli import main
from monitor.config import load_config
from monitor.dataschema import Omission, infer_schema


def write_file(path, n: int = 60, dim: int = 12) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    table = pa.table({
        "id": [f"r{i}" for i in range(n)],
        "image_emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        "text_emb": [None if i == 3 else rng.normal(size=4).tolist() for i in range(n)],  # a list<double> column
        "brightness": rng.random(n),
        "input_uri": [f"images/{i}.png" for i in range(n)],
        "source": [f"s3://bucket/raw/{i}.jpg" for i in range(n)],
        "label": rng.integers(0, 2, n),
    })
    pq.write_table(table, path)


def test_init_infers_embedding_dims_and_leaves_references_out(tmp_path, capsys):
    data = tmp_path / "scored.parquet"
    write_file(data)
    out = tmp_path / "driftloop.yaml"
    assert main(["init", "--data", str(data), "--target", "label", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Left out column 'input_uri'" in err and "Left out column 'source'" in err
    written = yaml.safe_load(out.read_text())["model"]
    assert written["features"] == [{"name": "image_emb", "type": "embedding", "dim": 12},
                                   {"name": "text_emb", "type": "embedding", "dim": 4},
                                   {"name": "brightness", "type": "numeric"}]
    assert set(written["ignore"]) == {"input_uri", "source"}
    cfg = load_config(path=out, environ={})  # the written file is a valid configuration
    assert cfg.model.embedding_features == ["image_emb", "text_emb"] and cfg.model.embedding_dim("image_emb") == 12


def test_inferred_kinds(tmp_path):
    import pandas as pd

    data = tmp_path / "scored.parquet"
    write_file(data)
    schema = infer_schema(pd.read_parquet(data), "label")
    left = {c.name: c.kind for c in schema.left_out}
    assert left == {"input_uri": Omission.INPUT_REFERENCE, "source": Omission.INPUT_REFERENCE}
    assert [(f.name, f.type, f.dim) for f in schema.features][:2] == [("image_emb", "embedding", 12),
                                                                      ("text_emb", "embedding", 4)]


def test_lists_of_varying_length_are_refused_naming_the_column(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"x": np.arange(30.0), "bag": [[1.0] * (1 + i % 3) for i in range(30)], "label": [0, 1] * 15})
    with pytest.raises(Exception, match="column 'bag' holds lists, vectors of 3 different lengths"):
        infer_schema(frame, "label")
