"""Helpers for the GPU tests: a manual clock, and a scrape turned into a lookup table."""
from __future__ import annotations

from typing import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


class ManualClock:
    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Scrape:
    """Samples of one scrape, looked up by sample name and labels."""

    def __init__(self, families: Iterable[Metric]):
        self.families = list(families)
        self.samples = [s for f in self.families for s in f.samples]

    @classmethod
    def from_text(cls, text: str) -> "Scrape":
        return cls(text_string_to_metric_families(text))

    def find(self, name: str, /, **labels: str) -> list:
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, /, **labels: str) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, f"expected one {name}{labels}, found {found}"
        return found[0].value

    def has(self, name: str, /, **labels: str) -> bool:
        return bool(self.find(name, **labels))

    def gpus(self, name: str) -> set[str]:
        return {s.labels["gpu"] for s in self.find(name)}

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def skip_if_nvidia_driver(reason: str = "this machine has an NVIDIA driver") -> None:
    """Tests of the no-driver path run only where NVML cannot initialise (CI, laptops)."""
    import pynvml
    import pytest
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return
    pynvml.nvmlShutdown()
    pytest.skip(reason)
