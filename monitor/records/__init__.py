"""Prediction and label records: what a valid one is, and the validated batches every part shares.

Part of the bottom layer (with :mod:`monitor.config`, :mod:`monitor.errors` and :mod:`monitor.logs`):
the store accepts these batches, ingestion validates HTTP bodies into them and the client builds
records from DataFrames with the same code, so none of them has to import another.

    validation.py  RecordValidator: records -> PredictionBatch / LabelBatch, or ValidationError
    batches.py     PredictionBatch, LabelBatch (column-wise), the error list a refused batch carries
    fields.py      one field's checks, for the precise (slow) path and for messages
    frames.py      DataFrame -> records (the client and the store's DataFrame path)

Import the modules themselves: ``frames`` needs pandas, ``validation`` does not.
"""
