"""Where a prediction's ``input_uri`` may point: inside the configured folders (``model.input_roots``)
or a URI of a scheme the user listed (``model.input_schemes``); nothing else is accepted at ingest,
and nothing else is handed to the user's training code (``training.entrypoint``), which opens it.

One resolver for both duties, so the two cannot diverge: ingestion asks :meth:`InputRoots.check`
(refuse with a :class:`~monitor.errors.FieldError` naming what is expected, 422), the trainer and the
daemon's re-scoring ask :meth:`InputRoots.resolve` again just before the user's code runs (a row
whose reference no longer resolves inside a root, e.g. a file replaced by a symlink after ingest, is
skipped and counted there: trainer/inputs.py).

Resolving a reference:

* a URI whose scheme is in ``input_schemes`` (``s3://bucket/key``): as it is; driftloop never opens it;
* a plain path or a ``file://`` URI (``file:///p`` or ``file://localhost/p``): a relative path is
  taken from the first root; ``..`` is applied lexically, the result must lie inside a root as
  written or as resolved; then symlinks are resolved (:func:`os.path.realpath`) and the real path
  must lie inside a root's real path. The real path is what the user's code is given;
* anything else (another scheme, ``http://``, a ``file://`` URI naming another host): refused.

The answer never depends on whether the file exists: the check is lexical up to the root, and
:func:`os.path.realpath` only follows links that lie inside a root, so a client cannot probe the
host's files by the messages (the words name the configuration keys, never a server path).
What remains is a race: someone who can write inside a root can swap a file for a link between the
resolution and the user's ``open``; the roots are for folders only trusted writers can change.
"""
from __future__ import annotations

import enum
import os
import re
from typing import Iterable, Sequence
from urllib.parse import unquote, urlsplit

from monitor.errors import FieldError

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


class Refusal(enum.Enum):
    """Why a reference is refused (the words are for people; code compares the kinds)."""
    NO_ROOTS = "a path, but model.input_roots is empty (list the folders your inputs live in)"
    OUTSIDE_ROOTS = "a path outside model.input_roots"
    SCHEME = "a URI of a scheme not in model.input_schemes"
    FILE_URI = "a file URI with a host, query or fragment, or a relative path (expected file:///absolute/path)"


class InputRefused(FieldError):
    """``input_uri`` names something outside the roots and listed schemes; ``reason`` says which rule."""

    def __init__(self, reason: Refusal, schemes: Sequence[str] = ()):
        listed = f" ({', '.join(schemes)})" if schemes else ""
        super().__init__(f"expected a path inside model.input_roots or a URI of a scheme in model.input_schemes"
                         f"{listed}; got {reason.value}")
        self.reason = reason


def scheme_of(ref: str) -> str | None:
    """The lower-cased URI scheme of ``ref`` (``s3`` of ``s3://b/k``), or None for a plain path."""
    found = _SCHEME.match(ref)
    return found.group(1).lower() if found else None


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


class InputRoots:
    """The resolver of one model's input references. ``roots`` are folders (relative ones from the
    working directory); ``schemes`` the URI schemes passed through as they are."""

    def __init__(self, roots: Sequence[str] = (), schemes: Sequence[str] = ()):
        self.roots = [os.path.abspath(r) for r in roots]  # as written: what clients were told
        self.real_roots = [os.path.realpath(r) for r in self.roots]  # what they are on disk now
        self._lexical = list(dict.fromkeys(self.roots + self.real_roots))
        self.schemes = tuple(dict.fromkeys(s.lower() for s in schemes))

    @classmethod
    def of(cls, model: object) -> "InputRoots":
        """The resolver for a :class:`~monitor.config.ModelConfig` (``input_roots``, ``input_schemes``)."""
        return cls(getattr(model, "input_roots", ()), getattr(model, "input_schemes", ()))

    def resolve(self, ref: str) -> str:
        """What the user's code may open for ``ref``: the real path inside a root, or a listed URI as
        it is; :class:`InputRefused` otherwise."""
        scheme = scheme_of(ref)
        if scheme is not None and scheme != "file":
            if scheme in self.schemes:
                return ref
            raise InputRefused(Refusal.SCHEME, self.schemes)
        path = ref if scheme is None else self._file_path(ref)
        if not self.roots:
            raise InputRefused(Refusal.NO_ROOTS, self.schemes)
        # ".." lexically first: realpath then walks only paths that start inside a root.
        candidate = os.path.normpath(os.path.join(self.roots[0], path))
        if not _inside(candidate, self._lexical):
            raise InputRefused(Refusal.OUTSIDE_ROOTS, self.schemes)
        try:
            real = os.path.realpath(candidate)
        except (OSError, ValueError):  # a link loop (Python < 3.13 raises none), a NUL from %00
            raise InputRefused(Refusal.OUTSIDE_ROOTS, self.schemes) from None
        if not _inside(real, self.real_roots):
            raise InputRefused(Refusal.OUTSIDE_ROOTS, self.schemes)
        return real

    def check(self, ref: str) -> str:
        """Ingestion's check of one reference: ``ref`` itself (stored as sent), or InputRefused."""
        self.resolve(ref)
        return ref

    def all_allowed(self, refs: Iterable[str | None]) -> bool:
        """Whether every reference given (None: none sent) resolves: the fast path's question."""
        try:
            for ref in refs:
                if ref is not None:
                    self.resolve(ref)
        except InputRefused:
            return False
        return True

    @staticmethod
    def _file_path(ref: str) -> str:
        parts = urlsplit(ref)
        path = unquote(parts.path)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment or not path.startswith("/"):
            raise InputRefused(Refusal.FILE_URI)
        return path
