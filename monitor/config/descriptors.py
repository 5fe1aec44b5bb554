"""``drift.descriptors``: standard numbers driftloop computes from a model's inputs and monitors as
features of their own (monitor/drift/descriptors.py; docs/parts/drift.md "Descriptors").

Off unless a model asks: ``drift`` is a per-model section, so in a fleet each model chooses its own
(``models: {topics: {drift: {descriptors: {text: input_uri}}}}``).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from monitor.config.base import _Section

INPUT_URI_SOURCE = "input_uri"   # monitor.embeddings.INPUT_URI: the prediction's raw-input reference
MAX_FILE_BYTES = 16 * 1024 * 1024


class DescriptorsConfig(_Section):
    """Which descriptors a model's checks compute, from which source, at what cost."""

    text: str | None = Field(None, description="compute text descriptors (length in characters and words, share of "
                             "words outside the champion's vocabulary, share of non-ASCII characters) from this "
                             "source: input_uri (the file each prediction's input_uri names, inside "
                             "model.input_roots) or the name of a categorical feature holding the text; unset: none")
    image: Literal["input_uri"] | None = Field(None, description="compute image descriptors (brightness, contrast, "
                                               "width, height; red, green and blue means for colour images) from "
                                               "the image file each prediction's input_uri names, inside "
                                               "model.input_roots; unset: none")
    vocabulary: str | None = Field(None, description="text: the file of the champion's training.entrypoint artifacts "
                                   "holding its vocabulary (JSON: a list of words, {\"words\": [...]}, or "
                                   "{word: id}; or text, one word a line); unset: the first of vocabulary.json, "
                                   "vocab.json and vocab.txt it has. Without one, the reference texts' own words")
    sample_rows: int = Field(5000, ge=100, le=20_000, description="rows per side whose inputs are read at most: a "
                             "seeded uniform sample of the drift sample (drift.sample_size); the reference's once "
                             "per champion, the window's at every check")
    cache_entries: int = Field(20_000, ge=0, le=1_000_000, description="descriptors of this many input_uri kept "
                               "per champion (least recently used first out), so a check reads only the files of "
                               "rows it has not seen; 0: no cache")
    max_file_bytes: int = Field(MAX_FILE_BYTES, ge=1024, le=1024 ** 3, description="an input file larger than this "
                                "is not read (counted as too_large)")
    drift_share: bool = Field(False, description="count drifted descriptors in the drift share (and so in dataset "
                              "drift and drift incidents); off: reported beside the features, with their own "
                              "drift, metrics and Grafana panel, without changing the share")

    @field_validator("text")
    @classmethod
    def _source(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("text: name input_uri or a categorical feature (or leave it unset)")
        return v

    @field_validator("vocabulary")
    @classmethod
    def _file_name(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v or "\\" in v or v in (".", "..") or "\x00" in v):
            raise ValueError("vocabulary: a file name inside the artifacts folder (no folders), e.g. vocabulary.json")
        return v

    @property
    def enabled(self) -> bool:
        return self.text is not None or self.image is not None
