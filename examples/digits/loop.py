"""The digits loop, end to end: ``driftloop demo --example digits``, tests/examples/test_digits_loop.py
and bench/bench_digits.py run it.

1. the bundled digits are written as image files (examples/digits/data.py) and the baseline CNN is
   trained on the ``train`` split through ``training.entrypoint`` (examples/digits/model.py):
   driftloop's trainer reads the images through the entrypoint's ``dataset``, computes the
   reference sample's embeddings with its ``embed``, registers the version as ``champion``;
2. the model service (examples/digits/service.py) runs in a thread, scoring with ``@champion`` and
   sending probabilities, the ``image_emb`` embedding and each image's ``input_uri`` to a running
   daemon (in-process for the demo, a real ``driftloop serve`` for the test and the bench);
3. a stream of new digit images goes through the service's ``/predict``, the true digits follow
   one batch late through ``/outcomes`` (examples/stream.py drives it and keeps the timeline);
4. after ``plan.before`` batches the writers' digits come rotated (20-30 degrees): the checks see
   the accuracy drop and the embedding drift, an incident opens, the retrain child fine-tunes the
   champion's CNN through the entrypoint on the rotated rows (with a replay of the reference's
   images), the gate promotes it, the service follows the alias and served accuracy recovers.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from examples.digits.data import CLASSES, DigitStream, write_digits
from examples.stream import Batch, HttpService, StreamResult, run_stream, serving
from monitor.config import DriftloopConfig

ENTRYPOINT = "examples.digits.model:Digits"
MODEL: dict[str, Any] = {
    "name": "digits", "task": "multiclass", "target": "label", "id": "request_id", "classes": CLASSES,
    "features": [{"name": "image_emb", "type": "embedding", "dim": 32}],
}


@dataclass(frozen=True)
class DigitsPlan:
    batch: int = 250             # images per batch (one batch per check)
    before: int = 6              # batches before the drift
    after: int = 18              # batches after it (detection, retraining and recovery happen among them)
    drift: str = "rotate"        # examples.digits.data.DRIFTS
    check_interval: float = 1.0  # seconds between the daemon's checks
    epochs: int = 30
    retrain_epochs: int = 10
    post_change_rows: int = 750  # labelled rotated rows before the fine-tune starts
    export: bool = True          # ONNX and INT8 forms of each version (seconds per version on a CPU)
    seed: int = 7

    @classmethod
    def fast(cls) -> "DigitsPlan":
        """The variant the end-to-end test runs: fewer, the drift at batch 3, retraining on 500 rows."""
        return cls(batch=250, before=3, after=7, epochs=25, retrain_epochs=8, post_change_rows=500, export=False)


def settings(home: Path, port: int, plan: DigitsPlan) -> dict[str, Any]:
    """The configuration, as overrides of the defaults: the model above, short check intervals
    and small windows sized to the plan's batches."""
    return {
        "home": str(home),
        "logging": {"level": "WARNING"},
        "server": {"port": port, "gpu_metrics": False},
        # The images live under home/digits (write_digits): the only folder an input_uri may name.
        "model": {**MODEL, "input_roots": [str(home / "digits")]},
        "drift": {"interval_seconds": plan.check_interval, "window_size": 8 * plan.batch,
                  "min_labels": 2 * plan.batch},
        "alerts": {"cooldown_seconds": 0},
        # 1,078 training images: small batches and a larger step make enough updates in a few epochs.
        "training": {"entrypoint": ENTRYPOINT, "epochs": plan.epochs, "retrain_epochs": plan.retrain_epochs,
                     "batch_size": 32, "learning_rate": 4e-3, "holdout_fraction": 0.2,
                     # Fine-tune the champion's CNN only: a fresh one on a few hundred rows cannot win.
                     "cold_start": "never", "min_post_change_rows": plan.post_change_rows,
                     "export": {"onnx": plan.export},
                     "checkpoint_every_minutes": 60, "progress": False, "threads": 1, "seed": plan.seed},
    }


def digits_config(home: Path, port: int, plan: DigitsPlan, base: DriftloopConfig | None = None) -> DriftloopConfig:
    from monitor.config import _merge, load_config
    overrides = settings(home, port, plan)
    if base is None:
        return load_config(path=None, environ={}, overrides=overrides)
    return DriftloopConfig.model_validate(_merge(base.model_dump(mode="json"), overrides))


def write_config(home: Path, port: int, plan: DigitsPlan) -> Path:
    """``home/driftloop.yaml`` with :func:`settings`: what ``driftloop serve`` (and ``status``,
    ``check``) read with ``DRIFTLOOP_CONFIG`` set to it."""
    import yaml
    home.mkdir(parents=True, exist_ok=True)
    path = home / "driftloop.yaml"
    path.write_text(yaml.safe_dump(settings(home, port, plan), sort_keys=False))
    return path


def training_table(data: Path, index: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The baseline's rows: each ``train`` image once, with the live stream's jitter (so the
    reference sample's embeddings look like live traffic's, and drift means drift), as
    ``input_uri`` and digit; the embedding column is left out: the trainer computes it with the
    entrypoint's ``embed``."""
    return DigitStream(data, index, split="train", seed=seed).every()


def batches(stream: DigitStream, plan: DigitsPlan) -> Iterator[Batch]:
    for number in range(plan.before + plan.after):
        drifted = number >= plan.before
        yield Batch(stream.batch(number, plan.batch, drift=plan.drift if drifted else None), drifted)


@contextmanager
def digits_service(cfg: DriftloopConfig, daemon_url: str, poll_seconds: float = 0.5) -> Iterator[HttpService]:
    """examples/digits/service.py in a thread, following ``@champion`` every ``poll_seconds``."""
    from examples.digits.service import create_app
    from monitor.client import Champion, DriftloopClient
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=poll_seconds) as champion, \
            DriftloopClient(daemon_url, token=cfg.server.token) as client, \
            serving(create_app(champion, client)) as url:
        service = HttpService(url, send=lambda rows: rows[["request_id", "input_uri"]].to_dict("records"))
        try:
            yield service
        finally:
            service.close()


def run_loop(cfg: DriftloopConfig, plan: DigitsPlan, daemon_url: str, data: Path, index: pd.DataFrame, *,
             echo: Callable[[str], None] = print) -> StreamResult:
    """Stream the plan's batches through the service to the daemon at ``daemon_url``."""
    stream = DigitStream(data, index, seed=plan.seed)
    with digits_service(cfg, daemon_url) as service:
        return run_stream(daemon_url, service, batches(stream, plan), token=cfg.server.token, echo=echo)


def train_baseline(cfg: DriftloopConfig, data: Path, index: pd.DataFrame, seed: int) -> Any:
    import trainer
    return trainer.train_baseline(cfg, training_table(data, index, seed), trigger="manual")


def summary(result: StreamResult) -> dict[str, Any]:
    """The figures the bench prints and the goals are about."""
    return {"incidents_before_onset": result.incidents_before_onset, "detection_rows": result.detection_rows,
            "incidents": len(result.incidents), "promotions": len(result.promotions),
            "pre": result.served_accuracy("pre"), "last20": result.served_accuracy("last"),
            "seconds": result.seconds}


def run_demo(cfg: DriftloopConfig, plan: DigitsPlan, *, echo: Callable[[str], None] = print,
             keep_serving: bool = False) -> StreamResult:
    """The demo: data, baseline, an in-process daemon serving the real API, the loop, a summary."""

    from monitor.daemon.runtime.daemon import Daemon

    import yaml
    data = cfg.home / "digits"
    config = cfg.home / "driftloop.yaml"  # for driftloop status / check against the demo's store
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_defaults=True), sort_keys=False))
    echo(f"driftloop demo --example digits: everything lives in {cfg.home.resolve()}")
    index = write_digits(data, seed=plan.seed)
    echo(f"[1/4] wrote {len(index)} digit images under {data} ({(index['split'] == 'train').sum()} to train on); "
         f"training the CNN through {ENTRYPOINT} ...")
    base = train_baseline(cfg, data, index, plan.seed)
    echo(f"      registered {cfg.registered_model_name} v{base.version} as champion "
         f"(held-out accuracy {base.metrics.get('accuracy', float('nan')):.3f})")
    daemon = Daemon(cfg)
    with serving(daemon.build_app(), cfg.server.host, cfg.server.port) as url:
        daemon.start(scheduler=True, check_interval=plan.check_interval)
        echo(f"[2/4] daemon serving {url}; checks every {plan.check_interval:g} s")
        echo(f"[3/4] {plan.before} batches of {plan.batch} digits, then {plan.after} of {plan.drift}d digits; "
             "the service sends probabilities, image_emb and input_uri; labels one batch late")
        try:
            result = run_loop(cfg, plan, url, data, index, echo=echo)
            daemon.wait_for_retrain(120)
            figures = summary(result)
            echo("[4/4] summary")
            echo(f"      served accuracy before the drift {figures['pre']:.3f}, over the last 20 % "
                 f"{figures['last20']:.3f}; first incident {figures['detection_rows']} labelled rows after the "
                 f"onset; {figures['promotions']} promotion(s) ({', '.join('v' + v for v in result.promotions)}); "
                 f"{result.seconds:.0f} s")
            echo(f"      MLflow: mlflow ui --backend-store-uri {cfg.tracking_uri}; "
                 f"status: DRIFTLOOP_CONFIG={config.resolve()} driftloop status")
            if keep_serving:
                from monitor.demo import keep_serving_until_interrupted
                keep_serving_until_interrupted(url, echo)  # the daemon stops below
        finally:
            daemon.stop()
    return result
