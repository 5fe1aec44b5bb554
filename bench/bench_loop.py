"""Benchmark: does the closed loop converge? Drift scenarios replayed through a real ``driftloop serve``.

    .venv/bin/python bench/bench_loop.py                       # every scenario (about 10-15 minutes on 2 cores)
    .venv/bin/python bench/bench_loop.py abrupt gradual        # some of them
    .venv/bin/python bench/bench_loop.py --quick               # shorter streams (smoke run)
    .venv/bin/python bench/bench_loop.py episode --keep DIR    # a long scenario (named: not in the default run)
    .venv/bin/python bench/bench_loop.py review-cost DIR/episode   # a champion review's cost on a kept home

Each scenario is a labelled stream generated here (its own labelling functions, not the demo's):
a baseline is trained on the stationary concept and registered as ``champion``; a real
``driftloop serve`` (subprocess, default alert thresholds) receives the stream through the public
client, batch by batch, with the model service played by a loop that scores each batch with the
current ``@champion`` (and says which version scored it); labels arrive one batch late. After each
batch the bench waits for the daemon's next check, and for a running retrain to settle, so the
figures are in rows, not seconds (a 2-core machine retrains slower than production traffic
arrives; waiting keeps the comparison about the loop's decisions).

Scenarios (onset after ``--before`` batches):

- ``stationary``    the concept never changes (control: must open nothing)
- ``noise_small``   label noise up 1.5 points (control: must open nothing)
- ``noise_large``   label noise up 7 points (must open an incident; retrains cannot beat the noise: rejected)
- ``covariate``     features move, the concept does not
- ``abrupt``        the labelling rule switches to another, equally learnable one
- ``gradual``       the decision boundary rotates slowly for the rest of the stream
- ``reversal``      the same boundary, labels flipped
- ``long_abrupt``   ``abrupt`` with 21,000 post-change rows (52 batches): does the loop keep learning
                    from all the evidence since the change? Goal: last 20 % within 2 points of pre-drift
- ``episode``       a passing episode: for 5 batches (10 % of a 50-batch stream) the positive rate
                    falls by about half (the labelling rule's offset moves), then the world returns.
                    Goal: last 20 % within 1 point of the never-retrained model, and the
                    pre-episode champion (or an equal model) serves at the end

``bench/bench_outside.py`` runs this harness on 14 more streams unlike these (3 and 30 features,
categorical-heavy, 10 % positives, prior shift, early and late onsets, a recurring concept, labels
5 batches late or for 20 % of rows, bursts, a service that never sends ``model_version``); a stream
there may set ``features``, ``label_lag``, ``lag_rule``, ``label_share``, ``send_version`` and ``rows_factor``.

Printed per scenario: detection delay (labelled rows after onset until the first incident),
incidents (performance / drift), retrain attempts and promotions, served accuracy over the last
20 % of the stream vs the pre-drift level and vs the never-retrained baseline on the same rows,
the longest run of checks that breached with no action (no retrain started, not waiting for
post-change rows, not escalated), the champion serving at the end, and what the champion reviews
cost (``training.review_interval_checks``): the median seconds of a review against a check's.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NUMERIC = [f"x{i}" for i in range(8)]
REGIONS = np.array(["eu", "us", "apac", "latam"], dtype=object)
DEVICES = np.array(["mobile", "desktop", "tablet"], dtype=object)


# ---- streams -------------------------------------------------------------------------------------
def _features(rng: np.random.Generator, n: int, shift: float = 0.0) -> pd.DataFrame:
    z = rng.standard_normal((n, 8))
    frame = pd.DataFrame(z, columns=NUMERIC)
    frame["x0"] += 1.5 * shift
    frame["x2"] *= 1.0 + 0.6 * shift
    p_region = (1 - shift) * np.array([0.4, 0.3, 0.2, 0.1]) + shift * np.array([0.1, 0.2, 0.3, 0.4])
    frame["region"] = REGIONS[rng.choice(4, size=n, p=p_region / p_region.sum())]
    frame["device"] = DEVICES[rng.choice(3, size=n, p=[0.5, 0.35, 0.15])]
    return frame


_REGION = {"eu": 0.5, "us": -0.5, "apac": 1.0, "latam": -1.0}


def _logit(frame: pd.DataFrame, angle: float) -> np.ndarray:
    """A rotated linear boundary in (x0, x1) plus an interaction and category offsets."""
    a = np.deg2rad(angle)
    lin = 2.2 * (np.cos(a) * frame["x0"] + np.sin(a) * frame["x1"])
    region = frame["region"].map(_REGION).to_numpy(dtype=float) * np.cos(a)
    return lin + 0.8 * frame["x2"] * frame["x3"] * np.cos(a) + 0.6 * frame["x4"] + region


def _labels(rng: np.random.Generator, logit: np.ndarray, flip: float = 0.0) -> np.ndarray:
    y = (logit + rng.logistic(scale=0.35, size=len(logit)) > 0).astype(np.int64)
    flips = rng.uniform(size=len(y)) < flip
    return np.where(flips, 1 - y, y)


@dataclass
class Scenario:
    name: str
    learnable: bool          # a model retrained on the new data can get back to the pre-drift level
    control: bool = False    # must open no incident
    expect_incident: bool = True
    batches: int | None = None    # stream length in batches (None: --batches)
    before: int | None = None     # onset batch (None: --before)
    episode: float | None = None  # the drift lasts this share of the drifted part, then the world returns

    def batch(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        """Rows of one batch; ``progress`` is None before the onset, else 0..1 through the drifted part."""
        drifted = progress is not None and (self.episode is None or progress < self.episode)
        shift = 1.0 if drifted and self.name == "covariate" else 0.0
        frame = _features(rng, n, shift)
        angle, flip, reverse, offset = 0.0, 0.0, False, 0.0
        if drifted:
            if self.name in ("abrupt", "long_abrupt"):
                angle = 90.0
            elif self.name == "episode":
                offset = -1.6  # the positive rate falls from about half to about a quarter
            elif self.name == "gradual":
                angle = 120.0 * (progress or 0.0)
            elif self.name == "noise_small":
                flip = 0.019   # accuracy a -> a - flip (2a - 1): about 1.5 points at a = 0.9
            elif self.name == "noise_large":
                flip = 0.0875  # about 7 points
            elif self.name == "reversal":
                reverse = True
        y = _labels(rng, _logit(frame, angle) + offset, flip)
        frame["label"] = 1 - y if reverse else y
        return frame


SCENARIOS = {s.name: s for s in [
    Scenario("stationary", learnable=True, control=True, expect_incident=False),
    Scenario("noise_small", learnable=False, control=True, expect_incident=False),
    Scenario("noise_large", learnable=False),
    Scenario("covariate", learnable=True, expect_incident=False),
    Scenario("abrupt", learnable=True),
    Scenario("gradual", learnable=True),
    Scenario("reversal", learnable=True),
    Scenario("long_abrupt", learnable=True, batches=52, before=10),
    Scenario("episode", learnable=True, batches=50, before=5, episode=0.1),
]}


# ---- the daemon ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(home: Path, port: int, interval: float, features: list[dict] | None = None,
                 task: str = "binary", classes: list[str] | None = None) -> Path:
    import yaml
    tasked = {} if task == "binary" else {"task": task, **({"classes": classes} if classes else {})}
    cfg = {
        "home": str(home),
        "logging": {"level": "WARNING"},
        "server": {"port": port, "gpu_metrics": False},
        "model": {"name": "bench", **({"features": features} if features else {}), **tasked},
        "drift": {"interval_seconds": interval},
        "training": {"checkpoint_every_minutes": 60, "progress": False},
    }
    path = home / "driftloop.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Daemon:
    def __init__(self, config: Path, port: int, log_path: Path):
        env = {**os.environ, "DRIFTLOOP_CONFIG": str(config)}
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "serve"], env=env, cwd=str(ROOT),
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, http, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"driftloop serve exited with {self.proc.returncode}")
            try:
                if http.get(self.url + "/healthz").status_code < 500:
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise RuntimeError("driftloop serve did not answer")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


# ---- one run -------------------------------------------------------------------------------------
@dataclass
class Result:
    name: str
    rows_before: int
    task: str = "binary"
    incidents: list[dict] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    detection_rows: int | None = None
    served_correct: list[np.ndarray] = field(default_factory=list)
    baseline_correct: list[np.ndarray] = field(default_factory=list)
    served_scores: list[np.ndarray] = field(default_factory=list)
    baseline_scores: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # 5xx answers, tracebacks in serve.log, a daemon that died
    drifted_flags: list[bool] = field(default_factory=list)
    idle_breach_streak: int = 0
    checks: int = 0
    seconds: float = 0.0
    final_state: str = ""
    final_champion: str = ""
    served_versions: list[str] = field(default_factory=list)  # the champion that served each batch
    check_seconds: list[float] = field(default_factory=list)   # each check's duration (the daemon's)
    review_seconds: list[float] = field(default_factory=list)  # each champion review's

    def accuracy(self, part: str, which: str = "served") -> float:
        """Served accuracy (classifiers) or MAE (regression: ``served_correct`` holds |errors|)."""
        batches = self.served_correct if which == "served" else self.baseline_correct
        if part == "pre":
            chosen = [b for b, d in zip(batches, self.drifted_flags) if not d]
        else:
            k = max(1, int(round(0.2 * len(batches))))
            chosen = batches[-k:]
        return float(np.concatenate(chosen).mean()) if chosen else float("nan")

    def auc(self, part: str, which: str = "served") -> float:
        if self.task != "binary":
            return float("nan")  # multiclass: see accuracy; regression: MAE
        from sklearn.metrics import roc_auc_score
        scores = self.served_scores if which == "served" else self.baseline_scores
        if part == "pre":
            idx = [i for i, d in enumerate(self.drifted_flags) if not d]
        else:
            idx = list(range(len(scores)))[-max(1, int(round(0.2 * len(scores)))):]
        if not idx:
            return float("nan")
        y = np.concatenate([self.labels[i] for i in idx])
        s = np.concatenate([scores[i] for i in idx])
        return float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else float("nan")


def _goodness(task: str, scores: np.ndarray, y: np.ndarray, threshold: float,
              classes: list[str] | None) -> np.ndarray:
    """Per row: served correctly (classifiers) or the absolute error (regression)."""
    if task == "regression":
        return np.abs(scores - y.astype(float))
    if task == "multiclass":
        assert classes is not None
        return np.asarray(classes, dtype=object)[np.argmax(scores, axis=1)] == y
    return (scores > threshold).astype(int) == y


def _task_records(task: str, ids: list[str], features: pd.DataFrame, scores: np.ndarray,
                  version: str | None) -> list[dict]:
    """API records of a multiclass (probabilities in class order) or regression (value) batch."""
    rows = features.to_dict(orient="records")
    out = []
    for i, (rid, feats) in enumerate(zip(ids, rows)):
        feats = {k: (None if isinstance(v, float) and v != v else v) for k, v in feats.items()}
        rec: dict = {"id": rid, "features": feats}
        if task == "regression":
            rec["prediction"] = float(scores[i])
        else:
            p = np.clip(scores[i], 0.0, 1.0)
            rec["probabilities"] = (p / p.sum()).tolist()
        if version is not None:
            rec["model_version"] = version
        out.append(rec)
    return out


def _status(http, url: str) -> dict:
    r = http.get(url + "/v1/status", params={"limit": 50})
    r.raise_for_status()
    return r.json()


def _wait_next_check(http, url: str, after_id: int | None, timeout: float, sent_at: float) -> dict:
    """The first judged check that *started* after the batch was sent (a check already running when
    the labels arrived may not have seen them), with no retrain running."""
    deadline = time.monotonic() + timeout
    status = _status(http, url)
    not_before = pd.Timestamp(int(sent_at) + 1, unit="s", tz="UTC")  # status times have whole seconds
    while time.monotonic() < deadline:
        last = status.get("last_check") or {}
        judged = last.get("verdict") is not None or last.get("status") != "ok"
        fresh = last.get("ts") is not None and pd.Timestamp(last["ts"]) >= not_before
        if last.get("id") is not None and (after_id is None or last["id"] > after_id) and judged and fresh \
                and not status.get("retrain_running"):
            return status
        time.sleep(0.25)
        status = _status(http, url)
    return status


def _print_trail(http, url: str, status: dict, onset_rows: int) -> None:
    """Every incident's events and every retrain, for reading what the loop decided."""
    for inc in reversed(status.get("recent_incidents") or []):
        print(f"  incident {inc['id']} {inc['reason']} {inc['state']} attempts {inc['attempts']}"
              f"{' ESCALATED' if inc.get('escalated') else ''}")
    for a in reversed(status.get("recent_retrains") or []):
        window = a.get("data_window") or {}
        print(f"  retrain {a['id']} {a['status']:<9} rows {a.get('rows')} since "
              f"{window.get('since_change') or window.get('start')}"
              f" -> v{a.get('challenger_version')}: {'; '.join(a.get('reasons') or [])[:160]}")


def _print_batches(r: "Result") -> None:
    """Per batch: the champion that served it, its served figure and the never-retrained model's
    (accuracy, or MAE for regression); ``*`` marks the batches after the onset."""
    cells = [f"{i}{'*' if d else ''}:v{v} {s.mean():.3f}/{b.mean():.3f}"
             for i, (d, v, s, b) in enumerate(zip(r.drifted_flags, r.served_versions, r.served_correct,
                                                   r.baseline_correct))]
    print("  per batch (served/never):")
    for k in range(0, len(cells), 6):
        print("    " + "  ".join(cells[k:k + 6]))


def run_scenario(scenario: Scenario, *, batches: int, before: int, batch_rows: int, baseline_rows: int,
                 interval: float, seed: int, workdir: Path, verbose: bool = False) -> Result:
    import httpx

    import trainer
    from monitor.client import DriftloopClient
    from monitor.config import load_config

    started = time.monotonic()
    home = workdir / scenario.name
    home.mkdir(parents=True)
    port = free_port()
    task, classes = getattr(scenario, "task", "binary"), getattr(scenario, "classes", None)
    config_path = write_config(home, port, interval, getattr(scenario, "features", None), task, classes)
    cfg = load_config(path=config_path, environ={})
    rng = np.random.default_rng(seed)
    base_frame = scenario.batch(rng, baseline_rows, None)
    trainer.train_baseline(cfg, base_frame, trigger="manual")
    baseline_model = trainer.load_champion(cfg)

    daemon = Daemon(config_path, port, home / "serve.log")
    http = httpx.Client(timeout=30.0)
    result = Result(scenario.name, rows_before=before * batch_rows, task=task)
    client = DriftloopClient(daemon.url)
    pending: list[pd.DataFrame] = []          # label batches not yet sent, oldest first
    label_lag = getattr(scenario, "label_lag", 1)        # batches until a batch's labels arrive
    label_share = getattr(scenario, "label_share", 1.0)  # share of rows that ever get a label
    label_rule = getattr(scenario, "label_rule", None)   # (rng, served scores) -> which rows get a label
    send_version = getattr(scenario, "send_version", True)
    last_check = None
    last_review = ""
    idle = 0
    labelled_after_onset = 0
    try:
        daemon.wait_ready(http)
        for t in range(batches):
            drifted = t >= before
            progress = (t - before) / max(1, batches - before - 1) if drifted else None
            rows = int(batch_rows * getattr(scenario, "rows_factor", lambda t: 1.0)(t))
            data = scenario.batch(rng, rows, progress)
            champion = trainer.load_champion(cfg)  # cached per version: cheap when unchanged
            features = data[cfg.model.feature_names]
            scores = np.asarray(champion.predict_proba(features), dtype=float)
            base_scores = np.asarray(baseline_model.predict_proba(features), dtype=float)
            y = data["label"].to_numpy()
            result.served_correct.append(_goodness(task, scores, y, cfg.model.threshold, classes))
            result.baseline_correct.append(_goodness(task, base_scores, y, cfg.model.threshold, classes))
            result.drifted_flags.append(drifted)
            result.served_versions.append(str(champion.version))
            result.served_scores.append(scores)
            result.baseline_scores.append(base_scores)
            result.labels.append(y)
            ids = [f"{scenario.name}-{t}-{i}" for i in range(rows)]
            version = champion.version if send_version else None
            if task == "binary":
                frame = features.copy()
                frame.insert(0, "id", ids)
                frame["score"] = scores
                client.log_predictions(frame, model_version=version)
            else:
                client.log_predictions(_task_records(task, ids, features, scores, version))
            labelled = pd.DataFrame({"id": ids, "label": y})
            if label_share < 1.0:
                labelled = labelled[rng.uniform(size=rows) < label_share].reset_index(drop=True)
            if label_rule is not None:
                labelled = labelled[label_rule(rng, scores)].reset_index(drop=True)
            labelled.attrs["drifted"] = drifted
            lag_rule = getattr(scenario, "lag_rule", None)
            if lag_rule is not None:
                lags = lag_rule(labelled["label"].to_numpy())
                for lag in sorted(set(lags.tolist())):
                    part = labelled[lags == lag].reset_index(drop=True)
                    part.attrs["drifted"] = drifted
                    part.attrs["due"] = t + lag
                    pending.append(part)
                pending.sort(key=lambda f: f.attrs["due"])
            else:
                labelled.attrs["due"] = t + label_lag
                pending.append(labelled)
            while pending and pending[0].attrs["due"] <= t:
                due = pending.pop(0)
                if len(due):
                    client.log_labels(due)
                if due.attrs.get("drifted"):
                    labelled_after_onset += len(due)
            if daemon.proc.poll() is not None:
                result.errors.append(f"daemon exited with {daemon.proc.returncode} at batch {t}")
                break
            status = _wait_next_check(http, daemon.url, last_check, timeout=max(120.0, 40 * interval),
                                      sent_at=time.time())
            check = status.get("last_check") or {}
            last_check = check.get("id", last_check)
            result.checks += 1
            if check.get("duration_seconds") is not None:
                result.check_seconds.append(float(check["duration_seconds"]))
            review = (status.get("review") or {}).get("last") or ""
            if review and review != last_review:
                last_review = review
                result.review_seconds.append(float(review.rsplit("; ", 1)[-1].rstrip(" s")))
            incidents = status.get("recent_incidents") or []
            if incidents and result.detection_rows is None and drifted:
                result.detection_rows = labelled_after_onset
            # A judged breach: with too few labels (performance not judged) a "drop ... >=" in the
            # verdict is the label-free estimate's suspicion, which by design waits for labels.
            verdict = check.get("verdict") or ""
            breaching = ("drop" in verdict or "rise" in verdict) and ">=" in verdict \
                and "performance not judged" not in verdict
            open_inc = (status.get("open_incidents") or [None])[0]
            acting = open_inc is not None and (open_inc["state"] in ("retraining", "waiting")
                                               or open_inc.get("escalated"))
            started_now = any(a.get("started_at") and a["status"] != "running" and a["id"] not in
                              {x["id"] for x in result.attempts} for a in status.get("recent_retrains") or [])
            result.attempts = list(status.get("recent_retrains") or [])
            idle = 0 if (not breaching or acting or started_now) else idle + 1
            result.idle_breach_streak = max(result.idle_breach_streak, idle)
            result.incidents = list(status.get("recent_incidents") or [])
            if result.incidents and not drifted and result.detection_rows is None:
                result.detection_rows = -1  # opened before the onset: a false alarm
        final = _status(http, daemon.url)
        if verbose:
            _print_trail(http, daemon.url, final, before * batch_rows)
            _print_batches(result)
        result.incidents = list(final.get("recent_incidents") or [])
        result.attempts = list(final.get("recent_retrains") or [])
        result.final_state = ", ".join(f"{i['state']}" for i in final.get("open_incidents") or []) or "none open"
        result.final_champion = str((final.get("champion") or {}).get("version") or "")
    finally:
        client.close()
        http.close()
        daemon.stop()
        log_text = (home / "serve.log").read_text(errors="replace")
        if "Traceback" in log_text:
            result.errors.append(f"traceback in {home / 'serve.log'}")
        result.errors += [line.strip()[:200] for line in log_text.splitlines() if '" 5' in line and "HTTP" in line][:3]
    result.seconds = time.monotonic() - started
    return result


def report(results: list[Result]) -> None:
    print()
    head = (f"{'scenario':<12} {'detect':>7} {'incid':>5} {'perf':>4} {'drift':>5} {'tries':>5} {'promo':>5} "
            f"{'pre':>6} {'last20%':>7} {'never':>6} {'vs pre':>7} {'vs never':>8} {'idle':>4} {'open at end':<22} "
            f"{'s':>5}")
    print(head)
    print("-" * len(head))
    for r in results:
        perf = sum(1 for i in r.incidents if i["reason"] != "drift")
        drift = sum(1 for i in r.incidents if i["reason"] == "drift")
        promos = sum(1 for a in r.attempts if a["status"] == "promoted")
        pre, last, never = r.accuracy("pre"), r.accuracy("last"), r.accuracy("last", "baseline")
        detect = "-" if r.detection_rows is None else ("early!" if r.detection_rows < 0 else str(r.detection_rows))
        print(f"{r.name:<12} {detect:>7} {len(r.incidents):>5} {perf:>4} {drift:>5} {len(r.attempts):>5} {promos:>5} "
              f"{pre:>6.3f} {last:>7.3f} {never:>6.3f} {last - pre:>+7.3f} {last - never:>+8.3f} "
              f"{r.idle_breach_streak:>4} {r.final_state[:22]:<22} {r.seconds:>5.0f}")
        if r.task == "regression":
            line = (f"{'':<12} MAE (pre/last20%/never columns are MAE): last20% / pre {last / pre:.3f}, never / pre "
                    f"{never / pre:.3f}")
        elif r.task == "multiclass":
            line = f"{'':<12} multiclass accuracy"
        else:
            line = (f"{'':<12} ROC AUC pre {r.auc('pre'):.3f} last20% {r.auc('last'):.3f} never "
                    f"{r.auc('last', 'baseline'):.3f}")
        print(line + (f"  ERRORS: {'; '.join(r.errors)}" if r.errors else ""))
        review = (f"{len(r.review_seconds)} reviews, median {np.median(r.review_seconds):.3f} s" if r.review_seconds
                  else "no review")
        check = f"median check {np.median(r.check_seconds):.3f} s" if r.check_seconds else "no check timed"
        share = (f" ({np.median(r.review_seconds) / np.median(r.check_seconds):.2f} of a check)"
                 if r.review_seconds and r.check_seconds else "")
        print(f"{'':<12} champion at the end v{r.final_champion}; {review} vs {check}{share}")
    print("\ndetect: labelled rows after the onset when the first incident opened; incid: incidents opened "
          "(perf/drift by reason); tries/promo: retrain attempts and promotions; pre: served accuracy before "
          "the onset; last20%: served accuracy over the last 20% of the stream; never: the never-retrained "
          "baseline on the same rows; idle: longest run of checks that breached with no action.")


def figures(r: "Result") -> dict:
    """One scenario's figures as written by ``--json``."""
    return {"scenario": r.name, "task": r.task, "detection_rows": r.detection_rows, "incidents": len(r.incidents),
            "attempts": len(r.attempts), "promotions": sum(1 for a in r.attempts if a["status"] == "promoted"),
            "pre": r.accuracy("pre"), "last20": r.accuracy("last"), "never": r.accuracy("last", "baseline"),
            "idle_breach_streak": r.idle_breach_streak, "auc_pre": r.auc("pre"), "auc_last20": r.auc("last"),
            "auc_never": r.auc("last", "baseline"), "errors": r.errors, "final_champion": r.final_champion,
            "check_seconds_median": float(np.median(r.check_seconds)) if r.check_seconds else None,
            "review_seconds_median": float(np.median(r.review_seconds)) if r.review_seconds else None,
            "reviews": len(r.review_seconds)}


def cli(doc: str | None, scenarios: dict, prefix: str, onset=None) -> int:
    """The command line shared by the loop benches: run the named scenarios (all by default) through
    ``run_scenario`` and print ``report``. ``onset(scenario, args)`` gives a scenario's own onset batch
    (default ``--before``)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"scenarios: {', '.join(scenarios)} [all]")
    ap.add_argument("--batches", type=int, default=44, help="batches per stream")
    ap.add_argument("--before", type=int, default=8, help="stationary batches before the onset")
    ap.add_argument("--batch-rows", type=int, default=500)
    ap.add_argument("--baseline-rows", type=int, default=6000)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between the daemon's checks")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--quick", action="store_true", help="shorter streams: 24 batches, 6 before the onset")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", type=Path, help="keep each scenario's home (store, MLflow, serve.log) under this folder")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each scenario's incidents and retrains")
    args = ap.parse_args()
    if args.quick:
        args.batches, args.before = 24, 6
    unknown = [n for n in args.names if n not in scenarios]
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(unknown)}")
    results = []
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        workdir = Path(tmp) if args.keep is None else args.keep
        workdir.mkdir(parents=True, exist_ok=True)
        for name in args.names or scenarios:
            scenario = scenarios[name]
            before = args.before if onset is None else onset(scenario, args)
            if onset is None:  # a scenario's own onset and length (long_abrupt, episode)
                before = getattr(scenario, "before", None) or before
            r = run_scenario(scenario, batches=getattr(scenario, "batches", None) or args.batches, before=before,
                             batch_rows=args.batch_rows, baseline_rows=args.baseline_rows, interval=args.interval,
                             seed=args.seed,
                             workdir=workdir, verbose=args.verbose)
            print(f"{name}: {r.seconds:.0f} s, {len(r.incidents)} incident(s), {len(r.attempts)} attempt(s)"
                  f"{', ERRORS' if r.errors else ''}", flush=True)
            results.append(r)
    report(results)
    if args.json:
        args.json.write_text(json.dumps([figures(r) for r in results], indent=2))
    return 0


def review_cost(home: Path, repeats: int = 5) -> None:
    """The champion review's cost on a kept scenario home (``--keep``): the champion and the versions
    a review compares (``trainer.previous.review_versions``) scored on the latest ``review_rows``
    labelled rows, models loaded once as the daemon caches them; against the checks the daemon ran."""
    import sqlite3
    import statistics

    from monitor.config import load_config
    from monitor.store import PredictionStore
    from trainer import registry as reg
    from trainer.previous import review, review_versions

    cfg = load_config(path=home / "driftloop.yaml", environ={})
    with PredictionStore.from_config(cfg) as store:
        rows = store.window(last_n=cfg.training.review_rows or cfg.drift.window_size,
                            labelled_only=True).reset_index(drop=True)
    with reg.session(cfg), reg.translating(cfg, "measuring a review"):
        registry = reg.Registry(cfg)
        history = registry.history()
        champion = reg.load_version(cfg, registry, history[-1])
        versions = review_versions(history, champion.version, cfg.training.review_versions)
        started = time.perf_counter()
        models = {v: reg.load_version(cfg, registry, v) for v in versions}
        loading = time.perf_counter() - started
        runs = [review(cfg, champion, rows, versions, models.__getitem__) for _ in range(repeats)]
    with sqlite3.connect(f"file:{home / 'driftloop.db'}?mode=ro", uri=True) as con:
        checks = [r[0] for r in con.execute("select duration_seconds from check_results where status = 'ok' "
                                            "and duration_seconds is not null")]
    scoring = statistics.median(r.seconds for r in runs)
    print(f"champion v{champion.version} and {versions} on {len(rows)} labelled rows: review {scoring:.3f} s "
          f"(median of {repeats}; loading {len(versions)} version(s) once: {loading:.2f} s); median check "
          f"{statistics.median(checks):.2f} s of {len(checks)}: {scoring / statistics.median(checks):.1%}")
    print(runs[-1].summary())


def main() -> int:
    """``review-cost HOME``: :func:`review_cost`. Otherwise every scenario but the long ones by default (``long_abrupt``
    and ``episode`` take 20-40 minutes
    each on 2 cores: name them)."""
    if sys.argv[1:2] == ["review-cost"]:
        review_cost(Path(sys.argv[2]))
        return 0
    long = {"long_abrupt", "episode"}
    if not any(a in SCENARIOS for a in sys.argv[1:]):
        sys.argv += [n for n in SCENARIOS if n not in long]
    return cli(__doc__, SCENARIOS, "bench-loop-")


if __name__ == "__main__":
    sys.exit(main())
