"""A check's constraint violations as people read them (``driftloop check``, ``driftloop status``),
from the result's ``constraints`` block (:meth:`monitor.drift.violations.ConstraintCheck.to_dict`)."""
from __future__ import annotations

from typing import Any

MAX_LINES = 20  # violations listed; the JSON has them all


def _bound(x: Any) -> str:
    return "-inf" if x is None else f"{x:g}"


def describe(v: dict[str, Any]) -> str:
    """One violation in a sentence (its kind's data, never parsed back)."""
    kind, rows, share = v.get("check"), v.get("rows"), v.get("share") or 0.0
    counted = f"{rows} value(s) ({share:.2%})"
    examples = v.get("example_values") or []
    eg = f", e.g. {', '.join(str(e) for e in examples)}" if examples else ""
    expected: Any = v.get("expected")
    if kind == "data_type_check":
        return f"{counted} not {expected} ({v.get('observed')}){eg}"
    if kind == "completeness_check":
        return f"{1 - share:.2%} of rows have a value, below {expected or 0:.2%} ({rows} missing)"
    if kind == "range_check":
        expected = expected or {}
        high = expected.get("max")
        span = f"[{_bound(expected.get('min'))}, {'inf' if high is None else format(high, 'g')}]"
        sign = " or negative" if expected.get("is_non_negative") else ""
        return f"{counted} outside {span}{sign}{eg}"
    if kind == "categorical_values_check":
        return f"{counted} not among its {(expected or {}).get('categories')} categories{eg}"
    if kind == "missing_column_check":
        return f"missing from the window ({v.get('observed')})"
    if kind == "extra_column_check":
        return "in the window but not in the constraints file"
    return f"{kind}: {counted}"


def render_constraints(block: dict[str, Any] | None, indent: str = "") -> list[str]:
    """Lines for a check's constraints: the file and what it found, one line per violation."""
    if not block:
        return []
    where = f"{block.get('file')}" + (f" (from champion v{block['champion_version']})"
                                      if block.get("champion_version") else "")
    if block.get("problem"):
        return [f"{indent}constraints  NOT CHECKED: {block['problem']}"]
    violations = block.get("violations") or []
    lines = [f"{indent}constraints  {len(violations)} violation(s) in {block.get('columns')} column(s) of {where}"]
    lines += [f"{indent}  {v.get('column')}  {v.get('check')}  {describe(v)}" for v in violations[:MAX_LINES]]
    if len(violations) > MAX_LINES:
        lines.append(f"{indent}  ... and {len(violations) - MAX_LINES} more (--json lists them all)")
    return lines
