"""`Champion.score` on a service's frame, which carries more than the features (the id, the label):
the pyfunc gets the columns its signature names, so MLflow warns about nothing (issue 37, item 7)."""
import logging
import warnings

import numpy as np

from monitor.client import Champion
from trainer.synthetic import make_dataset


def test_scoring_a_frame_with_the_id_and_the_label_logs_no_warning(tcfg, champion, caplog):
    frame = make_dataset(40, seed=3)
    frame.insert(0, "id", [f"req-{i}" for i in range(len(frame))])
    assert {"id", "label"} <= set(frame.columns)
    mlflow_logger = logging.getLogger("mlflow")  # MLflow's loggers do not propagate to the root
    mlflow_logger.addHandler(caplog.handler)
    try:
        with Champion(tcfg.tracking_uri, tcfg.registered_model_name, interval=0) as c, \
                warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            scores = c.predict(frame)
            features_only = c.predict(frame[tcfg.model.feature_names])
    finally:
        mlflow_logger.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [str(w.message) for w in seen if "mlflow" in w.filename] == []
    np.testing.assert_array_equal(scores, features_only)
    assert len(scores) == len(frame)
