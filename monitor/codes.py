"""Codes written with leading zeros (``01001``, ``007``; not ``0`` or ``0.5``): a zip or an account
code, text on purpose, never a number. One rule for the schema ``driftloop init`` infers
(monitor.dataschema) and the table ``driftloop train`` reads (trainer.data)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

LEADING_ZERO = r"\s*[+-]?0\d"


def written_as_codes(text: pd.Series) -> bool:
    """Is any value of ``text`` (a column of strings; missing values aside) written with leading zeros?"""
    return bool(text.str.match(LEADING_ZERO, na=False).any())
