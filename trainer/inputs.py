"""The rows whose input a ``training.entrypoint`` dataset may read, just before it reads them.

Ingestion accepted each ``input_uri`` inside ``model.input_roots`` (monitor/records/inputs.py), but
a file can be replaced by a link, deleted or corrupted after that, and the roots can change between
restarts. So every frame driftloop hands to the user's code (training data, the retrain window, the
champion's reference sample, the rows re-scored before a retrain) passes :func:`readable_rows`
first: each ``input_uri`` is resolved again with the same resolver and replaced by what it resolves
to (the real path, or a listed URI as it is); then the user's own ``dataset(refs, train=False)``
reads each item once. A row that is refused or whose item raises is left out and counted by
:class:`Skip`; one bad row never fails a retrain, which fails only when too few rows remain
(``training.min_rows``, checked after).

A row without ``input_uri`` is read by its id (the protocol's fallback): the id is a key for the
user's code to look up, never resolved as a path, and one that could name a path (a ``/`` or ``\\``,
``.``, ``..``) is refused.

The read costs one pass over the inputs (train=False items): the price of skipping a bad row
instead of failing mid-epoch; a dataset that caches decoded inputs (examples/digits) pays it once.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.embeddings import INPUT_URI
from monitor.records.inputs import InputRefused, InputRoots

log = logging.getLogger(__name__)


class Skip(enum.Enum):
    REFUSED = "refused"        # resolves outside model.input_roots / input_schemes (or an id like a path)
    UNREADABLE = "unreadable"  # the user's dataset raised reading it


@dataclass
class Readable:
    rows: pd.DataFrame                                   # the rows kept, input_uri resolved
    skipped: dict[Skip, int] = field(default_factory=dict)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def counts(self) -> dict[str, int]:
        """``{"refused": n, "unreadable": m}``: for the run's parameters and the outcome."""
        return {kind.value: self.skipped.get(kind, 0) for kind in Skip}


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value)) and str(value) != ""


def _id_is_key(ref: str) -> bool:
    return "/" not in ref and "\\" not in ref and ref not in (".", "..")


def resolved_refs(roots: InputRoots, uris: list[Any], ids: list[Any]) -> list[str | None]:
    """Each row's ref for the user's dataset (its resolved ``input_uri``, else its id as a key), or
    None where it is refused or has neither (:func:`trainer.entrypoint.with_refs` names those)."""
    out: list[str | None] = []
    for uri, rid in zip(uris, ids):
        if _present(uri):
            try:
                out.append(roots.resolve(str(uri)))
            except InputRefused:
                out.append(None)
        elif _present(rid) and _id_is_key(str(rid)):
            out.append(str(rid))
        else:
            out.append(None)
    return out


def readable_rows(cfg: DriftloopConfig, df: pd.DataFrame, *, what: str, user: Any = None,
                  required: bool = False) -> Readable:
    """``df``'s rows whose input the user's dataset reads, ``input_uri`` resolved (see the module
    doc); ``df`` as it is without ``training.entrypoint`` (driftloop's own model reads no input).
    ``user``: the entrypoint object (default: loaded from ``training.entrypoint``). ``required``
    (rows to train on): DataError saying why when every row was skipped, with the dataset's first
    error, instead of an "empty" error later. A ``sys.exit`` in the user's dataset is an
    :class:`~trainer.entrypoint.EntrypointError`, never an exit."""
    if not cfg.training.entrypoint or not isinstance(df, pd.DataFrame) or len(df) == 0:
        return Readable(df)
    from trainer.entrypoint import load_entrypoint
    user = load_entrypoint(str(cfg.training.entrypoint)) if user is None else user
    n = len(df)
    uris = df[INPUT_URI].tolist() if INPUT_URI in df.columns else [None] * n
    id_col = cfg.model.id if cfg.model.id in df.columns else "id" if "id" in df.columns else None
    ids = df[id_col].tolist() if id_col is not None else [None] * n
    had_ref = [_present(u) or _present(i) for u, i in zip(uris, ids)]
    refs = resolved_refs(InputRoots.of(cfg.model), uris, ids)
    refused = [i for i in range(n) if refs[i] is None and had_ref[i]]
    unreadable, first_error = _unreadable(user, refs, str(cfg.training.entrypoint), what)
    drop = np.zeros(n, dtype=bool)
    drop[refused + unreadable] = True
    out = df.copy()
    if INPUT_URI in out.columns or any(r is not None for r in refs):
        resolved = pd.Series([r if _present(u) else u for r, u in zip(refs, uris)], index=df.index, dtype=object)
        out[INPUT_URI] = resolved
    kept = out[~drop]
    skipped = {kind: count for kind, count in ((Skip.REFUSED, len(refused)), (Skip.UNREADABLE, len(unreadable)))
               if count}
    if skipped:
        log.warning("%s: %d of %d rows skipped, their input not read: %d outside model.input_roots/input_schemes, "
                    "%d unreadable by the entrypoint's dataset%s", what, len(refused) + len(unreadable), n,
                    len(refused), len(unreadable), f" (first: {first_error})" if first_error else "")
    if required and len(kept) == 0 and unreadable:
        from monitor.errors import DataError
        refused_part = f"{len(refused)} outside model.input_roots/input_schemes and " if refused else ""
        every = "every one" if not refused else "each of the others"
        raise DataError(f"{what}: all {n} rows were skipped: {refused_part}{len(unreadable)} because "
                        f"the dataset(refs, train=False) of training.entrypoint {cfg.training.entrypoint!r} failed "
                        f"reading {every} (first: {first_error}); nothing to train on")
    return Readable(kept, skipped)


def _unreadable(user: Any, refs: list[str | None], spec: str, what: str) -> tuple[list[int], str | None]:
    """Positions whose item the user's ``dataset(refs, train=False)`` cannot give, and the first
    error (for the log, which may name the path; never the API). A ``sys.exit`` in it is the
    user's failure (:func:`trainer.entrypoint.user_failure`), not one row's."""
    from trainer.entrypoint import user_failure
    from trainer.entrypoint_model import with_artifacts
    positions = [i for i, r in enumerate(refs) if r is not None]
    if not positions:
        return [], None
    # Before a first train no artifacts exist (prepare_artifacts reads these rows): a dataset that
    # takes them is asked with artifacts=None, to read the input only.
    read = with_artifacts(user.dataset, None)
    doing = f"reading the {what} through dataset(refs, train=False)"
    try:
        dataset = read([refs[i] for i in positions], False)
    except SystemExit as exc:
        raise user_failure(spec, doing, exc) from exc
    except Exception:  # a dataset that reads everything when made: ask it one row at a time
        dataset = None
    bad, first = [], None
    for k, i in enumerate(positions):
        try:
            dataset[k] if dataset is not None else read([refs[i]], False)[0]
        except SystemExit as exc:
            raise user_failure(spec, doing, exc) from exc
        except Exception as exc:  # the user's code: any error means "cannot read this one"
            bad.append(i)
            first = first or f"{type(exc).__name__}: {exc}"
    return bad, first
