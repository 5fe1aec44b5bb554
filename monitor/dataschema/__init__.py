"""Inferring a model's feature schema from a user's data file, and comparing two schemas.

One rule set, used by ``driftloop init`` (which writes it to ``driftloop.yaml``, explained in
comments) and by ``driftloop train`` when no features are configured, so both agree:

* booleans are **numeric** (0/1);
* integers and floats are **numeric**: an integer column keeps its order (tenure, number of
  products). One with few distinct values (at most ``FEW_VALUES``) gets a comment, because
  integer *codes* (a plan id, a region number) should be made categorical by hand;
* a column of equal-length numeric vectors (a Parquet list or fixed-size list column: an image or
  text model's embedding) is an **embedding** with ``dim`` = that length;
* a column named ``input_uri``, or text that is a path or URI on every row (``s3://...``,
  ``/data/img/1.png``, ``img/1.png``), is the raw input's reference, not a feature: left out, said so;
* text (and pandas categories) is **categorical**, unless almost every row has its own value:
  a string column unique on more than ``ID_LIKE_SHARE`` of the sampled rows is an id or free
  text, not a category, and is refused with a hint to pass ``--id`` or ``--ignore``;
* a column without a single value, or with the same value on every row, is *left out* and said
  so (a :class:`LeftOut`, written to ``driftloop.yaml`` under ``ignore`` with the reason): it
  carries no signal to learn, and drift on it would mean nothing (any new value "drifts" it);
* a column that looks like a model's *output* is left out too, with a warning, unless it is kept
  (``keep``, ``driftloop init --keep``): one named like a prediction, score, probability, logit or
  confidence (:func:`output_name`) that holds what such an output holds (a probability: numbers in
  [0, 1]; a prediction or score: that, or values like the target's; so ``credit_bureau_score`` with
  300-799 stays a feature, its note saying why), or one of a group of numbers in [0, 1] that sum to 1 on every
  row, i.e. the probabilities of the classes (:func:`probability_groups`). A model's outputs beside
  its inputs in the user's file (``y_pred``, ``proba_<class>``) are not inputs: learning from them
  is leakage, and a live service does not send them as features.

* a column named like one the records reserve (``id``, ``ts``, ``label_ts``, ``score``,
  ``prediction``: :data:`RESERVED_COLUMNS`) cannot be a feature: refused, naming the column, what
  the name is reserved for and the ways out (``--ignore``, ``--id``, renaming it).

The record id: :func:`propose_id` finds the column ``driftloop init`` takes as the id when none is
given (a passenger or customer number): present and unique on every row, and either integers
(not floats, not booleans) named like an id (``PassengerId``, ``customer_number``, ``account_no``)
or counting up one by one (a row number), or text named like an id (``customerID``). Such a
column is no feature: every later row brings a value training never saw. Another integer column
that would pass the same rule (a second id, pandas' saved index ``Unnamed: 0``) is *left out* too
(:func:`integer_id`; ``keep`` keeps it).

The target, the id column and ignored columns are never features. :func:`resolve_task` says which
task (``monitor.tasks``) the target asks for, or checks the one asked for against it.

The modules, lowest first (import the names from here)::

    columns.py    one column's rules (infer_column) and the shared types: InferredFeature, LeftOut, ...
    outputs.py    a model's outputs among the columns: output_name, probability_groups, model_outputs
    inference.py  a file's schema (infer_schema, infer_features) and its target's task (resolve_task)
    ids.py        the record id: id_like_name, propose_id
    recorded.py   the schema a model version records: with_features, schema_of, feature_spec, schema_mismatch
"""
from __future__ import annotations

from monitor.dataschema.columns import (FEW_VALUES, ID_LIKE_SHARE, MIN_ROWS_FOR_ID_RULE, InferredFeature,
                                        InferredSchema, LeftOut, Omission, infer_column)
from monitor.dataschema.ids import ProposedId, id_like_name, integer_id, propose_id
from monitor.dataschema.inference import RESERVED_COLUMNS, SAMPLE_ROWS, infer_features, infer_schema, resolve_task
from monitor.dataschema.outputs import OutputScan, model_outputs, output_name, probability_groups
from monitor.dataschema.recorded import feature_spec, schema_mismatch, schema_of, with_features

__all__ = ["FEW_VALUES", "ID_LIKE_SHARE", "MIN_ROWS_FOR_ID_RULE", "RESERVED_COLUMNS", "SAMPLE_ROWS", "InferredFeature",
           "InferredSchema", "LeftOut", "Omission", "OutputScan", "ProposedId", "feature_spec", "id_like_name",
           "infer_column", "infer_features", "infer_schema", "integer_id", "model_outputs", "output_name",
           "probability_groups", "propose_id", "resolve_task", "schema_mismatch", "schema_of", "with_features"]
