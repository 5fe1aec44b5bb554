"""The exposition formats, written faster for what the exporter serves: gauges and counters.

prometheus_client formats and escapes every label of every sample on every scrape; for 8 GPUs
(~250 samples) that is 2.5 ms in the text format and 4.5 ms in OpenMetrics, more than collecting
them. The collector hands out the same label dicts scrape after scrape, so here each label set is
formatted once and the string reused. Output is byte-for-byte what prometheus_client writes (a test
holds us to that); anything unusual (other metric types, timestamps, exemplars, names outside the
classic character set) is handed to prometheus_client, family by family.

This leans on prometheus_client beyond its documented API (``utils.floatToGoString``, the ``Sample``
fields, ``choose_encoder``'s negotiation), so the dependency is pinned exactly in pyproject.toml;
``tests/monitor/gpu/test_exposition.py`` compares our bytes with its writer's for every format and
must pass before the pin moves.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Protocol

from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString


class Collects(Protocol):
    """A registry or a collector: what can be scraped."""

    def collect(self) -> Iterable[Metric]: ...

__all__ = ["Encoder"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OPENMETRICS = "application/openmetrics-text"
_CACHE_LIMIT = 20_000  # label sets; process labels churn, so the cache is bounded and simply reset


class _Unusual(Exception):
    """This family needs prometheus_client's writer."""


class _One:
    def __init__(self, metric: Metric):
        self.metric = metric

    def collect(self) -> list[Metric]:
        return [self.metric]


def _escape_value(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class Encoder:
    """Negotiates the format and writes it; holds the label-string cache (one per server)."""

    def __init__(self) -> None:
        self._labels: dict[tuple, str] = {}
        self._names: set[str] = set()

    def _labelstr(self, labels: dict[str, str]) -> str:
        key = tuple(labels.items())
        s = self._labels.get(key)
        if s is None:
            for k in labels:
                if not _LABEL.fullmatch(k):
                    raise _Unusual
            s = "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in sorted(labels.items())) + "}" if labels else ""
            if len(self._labels) >= _CACHE_LIMIT:
                self._labels.clear()
            self._labels[key] = s
        return s

    def _legacy(self, name: str) -> None:
        if name not in self._names:
            if not _NAME.fullmatch(name):
                raise _Unusual
            self._names.add(name)

    def family(self, m: Metric, openmetrics: bool) -> str:
        if m.type not in ("gauge", "counter"):
            raise _Unusual
        self._legacy(m.name)
        if openmetrics:
            doc = _escape_value(m.documentation)
            lines = [f"# HELP {m.name} {doc}\n# TYPE {m.name} {m.type}\n"]
            if m.unit:
                lines.append(f"# UNIT {m.name} {m.unit}\n")
        else:
            name = m.name + "_total" if m.type == "counter" else m.name
            doc = m.documentation.replace("\\", r"\\").replace("\n", r"\n")
            lines = [f"# HELP {name} {doc}\n# TYPE {name} {m.type}\n"]
            created = m.name + "_created"
        labelstr = self._labelstr
        for s in m.samples:
            if s.timestamp is not None or s.exemplar is not None or s.native_histogram is not None:
                raise _Unusual
            if not openmetrics and s.name == created:  # the text format moves these to a gauge
                raise _Unusual
            self._legacy(s.name)
            lines.append(f"{s.name}{labelstr(s.labels)} {floatToGoString(s.value)}\n")
        return "".join(lines)

    def encode(self, registry: Collects, accept: str = "") -> tuple[bytes, str]:
        """The body and content type for a scraper that sent ``Accept: accept``, negotiated exactly
        as prometheus_client does (OpenMetrics when asked for, else the text format 0.0.4)."""
        library, content_type = choose_encoder(accept)
        return self.write(registry.collect(), library, content_type.startswith(_OPENMETRICS)), content_type

    def write(self, families: Iterable[Metric], library: Callable[[Any], bytes], openmetrics: bool) -> bytes:
        out = []
        for m in families:
            try:
                out.append(self.family(m, openmetrics))
            except _Unusual:
                text = library(_One(m)).decode("utf-8")
                out.append(text[: -len("# EOF\n")] if openmetrics else text)
        if openmetrics:
            out.append("# EOF\n")
        return "".join(out).encode("utf-8")

