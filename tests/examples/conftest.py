"""The examples run against a real MLflow store: the trainer's fixtures."""
from tests.trainer.conftest import mlflow_template, one_torch_thread  # noqa: F401  (fixtures)
