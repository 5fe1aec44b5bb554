"""Adding a model to an existing ``driftloop.yaml`` (``driftloop init --model``), keeping its comments.

PyYAML drops comments, and this file's comments are the reasons for its choices: the file is
edited as text, cut into the blocks of its keys. Whatever the edit, the text written must read
back as the data intended (checked); otherwise the file is written afresh from the data, said so.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from monitor.errors import UserInputError


def yaml_name(value: str) -> str:
    """``value`` as a YAML scalar that reads back as this string."""
    # JSON strings are YAML strings: quote anything YAML might read as another type or syntax.
    plain = re.fullmatch(r"[A-Za-z_][\w.-]*", value) and value.lower() not in ("true", "false", "yes", "no",
                                                                                "on", "off", "null")
    return value if plain else json.dumps(value)


_KEY = re.compile(r"""(?!-(?:\s|$))(?P<key>"[^"]*"|'[^']*'|[^\s#"'][^:#]*?)\s*:(?:\s+(?P<rest>.*))?$""")


@dataclass
class Block:
    """One key's lines: the comment lines at its indentation directly above it, its line, and every
    deeper line after it. ``key`` None: what comes before the first key."""
    key: str | None
    lines: list[str] = field(default_factory=list)

    @property
    def inline(self) -> str:
        """What follows the key on its own line (a flow value), without a trailing comment."""
        line = next(x for x in self.lines if x.strip() and not x.lstrip().startswith("#"))
        m = _KEY.match(line.strip())
        rest = (m.group("rest") or "") if m else ""
        return "" if rest.startswith("#") else rest


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def blocks(lines: list[str], indent: int) -> list[Block]:
    """``lines`` (a mapping's, its keys at ``indent`` spaces) cut into :class:`Block` s; the first
    (key None) holds what precedes the first key."""
    import yaml

    found = [Block(None)]
    pending: list[str] = []  # blank and comment lines: whose they are is known at the next line
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            pending.append(line)
            continue
        m = _KEY.match(line[indent:]) if _depth(line) == indent else None
        if m is None:
            found[-1].lines += [*pending, line]
            pending = []
            continue
        cut = len(pending)
        while cut and pending[cut - 1].strip() and _depth(pending[cut - 1]) <= indent:
            cut -= 1
        found[-1].lines += pending[:cut]
        key = m.group("key")
        found.append(Block(str(yaml.safe_load(key)) if key[0] in "\"'" else key, [*pending[cut:], line]))
        pending = []
    found[-1].lines += pending
    return found


def _indented(lines: list[str], by: int) -> list[str]:
    return [(" " * by + line) if line.strip() else "" for line in lines]


def _trimmed(lines: list[str]) -> tuple[list[str], list[str]]:
    """``lines`` without their trailing blank lines, and those lines."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end], lines[end:]


def _split(block: Block, keys: frozenset[str]) -> tuple[list[str], list[str]]:
    """``block`` (a mapping of plain keys) as two blocks of the same key, the keys in ``keys`` and the
    others, each key with its comments; ([], []) when its value is written on the key's line."""
    if block.inline:
        return [], []
    start = next(i for i, x in enumerate(block.lines) if x.strip() and not x.lstrip().startswith("#"))
    head, body = block.lines[:start + 1], block.lines[start + 1:]
    indent = next((_depth(x) for x in body if x.strip() and not x.lstrip().startswith("#")), 2)
    parts = blocks(body, indent)
    mine = [x for p in parts[1:] if p.key in keys for x in p.lines]
    theirs = [x for p in [parts[0], *parts[1:]] if p.key not in keys for x in p.lines]
    return [head[-1], *mine], [*head, *theirs]


def entry_lines(name: str, data_path: str, rows: int, model_sections: list[str]) -> list[str]:
    """A model's entry of ``models:`` (at column 0; indented where it goes): a comment saying where
    it came from, its key, its sections."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"# Added by `driftloop init --model {name}` from {data_path} ({rows} rows looked at) on {now};",
            f"# check the inferred feature types, then: driftloop train --model {name} --data {data_path}",
            f"{yaml_name(name)}:", *_indented(model_sections, 2)]


class FleetFile:
    """An existing driftloop.yaml that ``init --model`` adds a model to: its text, its data, and
    the models it holds (the loader's view)."""

    def __init__(self, path: Path, text: str, data: dict[str, Any], models: list[str]):
        self.path, self.text, self.data, self.models = path, text, data, models

    @classmethod
    def read(cls, path: Path) -> "FleetFile":
        import yaml

        from monitor.config import load_config
        from monitor.errors import ConfigError

        try:
            models = list(load_config(path, environ={}).model_configs())
        except ConfigError as exc:
            raise UserInputError(f"cannot add a model to {path}: it does not load ({exc}); fix it first") from None
        text = path.read_text(encoding="utf-8")
        return cls(path, text, yaml.safe_load(text) or {}, models)

    @property
    def is_fleet(self) -> bool:
        return bool(self.data.get("models") or self.data.get("models_dir"))

    def check_new(self, name: str, force: bool) -> None:
        from monitor.config.fleet import NAME_PATTERN

        if not NAME_PATTERN.match(name):
            raise UserInputError(f"--model {name!r}: a model's name is 1-48 letters, digits, _, . or -, starting "
                                 "with a letter or digit (it is a URL path segment, a metric label and part of "
                                 "table names)")
        if name in self.models and not force:
            raise UserInputError(f"{self.path} already has a model {name!r}; pass --force to replace its sections, "
                                 "or choose another name with --model")
        if name in self.models and self.data.get("models_dir") and name not in (self.data.get("models") or {}):
            if not (self._models_dir() / f"{name}.yaml").exists():
                raise UserInputError(f"model {name!r} is defined by a file of models_dir other than {name}.yaml; "
                                     "edit that file, or choose another name with --model")

    def add(self, name: str, entry: list[str], force: bool) -> str:
        """Add (``force``: replace) model ``name`` with ``entry`` (from :func:`entry_lines`); what was done."""
        import yaml

        sections = next(iter(yaml.safe_load("\n".join(entry[2:])).values())) or {}
        if self.data.get("models"):
            lines, expected = self._into_models(name, entry), self._expected(name, sections)
            done = f"{'Replaced in' if name in self.models else 'Added to'} {self.path}'s models"
        elif self.data.get("models_dir"):
            return self._into_models_dir(name, entry)
        else:
            lines, expected = self._converted(name, entry, sections)
            done = (f"Moved {self.path}'s model {self.models[0]!r} under models: and added another"
                    if name != self.models[0] else f"Replaced the model of {self.path}, now in the models: form")
        text = "\n".join(lines).rstrip("\n") + "\n"
        if yaml.safe_load(text) != expected:
            # The text edit did not give the data intended (a layout the cut does not know): the data
            # is right, the comments are what is lost.
            text = ("# Rewritten by `driftloop init --model` (the file's comments could not be kept).\n"
                    + yaml.safe_dump(expected, sort_keys=False))
            click.echo(f"Note: {self.path} was rewritten without its comments (its layout could not be edited "
                       "in place)", err=True)
        self._check(text)
        self._write(self.path, text)
        return done

    # -- the three forms
    def _into_models(self, name: str, entry: list[str]) -> list[str]:
        top = blocks(self.text.splitlines(), 0)
        at = next(i for i, b in enumerate(top) if b.key == "models")
        block = top[at]
        if block.inline:
            return []  # a flow mapping on the key's line: left to the fallback
        key_line = next(i for i, x in enumerate(block.lines) if x.strip() and not x.lstrip().startswith("#"))
        head, body = block.lines[:key_line + 1], block.lines[key_line + 1:]
        indent = next((_depth(x) for x in body if x.strip() and not x.lstrip().startswith("#")), 2)
        entries = blocks(body, indent)
        new = _indented(entry, indent)
        if any(e.key == name for e in entries):  # --force: the entry is replaced where it was
            body = [x for e in entries for x in ([*new, *_trimmed(e.lines)[1]] if e.key == name else e.lines)]
        else:
            body, tail = _trimmed(body)
            body = [*body, *new, *tail]
        top[at] = Block("models", [*head, *body])
        return [x for b in top for x in b.lines]

    def _into_models_dir(self, name: str, entry: list[str]) -> str:
        from monitor.config import load_config
        from monitor.errors import ConfigError

        target = self._models_dir() / f"{name}.yaml"
        before = target.read_text(encoding="utf-8") if target.exists() else None
        # A file of models_dir is one model's sections at the top level, its name the file's.
        self._write(target, "\n".join([*entry[:2], *(x[2:] for x in entry[3:])]) + "\n")
        try:
            load_config(self.path, environ={})
        except ConfigError as exc:
            if before is None:
                target.unlink()
            else:
                self._write(target, before)
            raise UserInputError(f"{target} was not kept: {self.path} would not load with it ({exc})") from None
        return f"Wrote {target} (in {self.path}'s models_dir)"

    def _converted(self, name: str, entry: list[str], sections: dict[str, Any]) -> tuple[list[str], dict]:
        """The file of one model in the ``models:`` form: its own sections under its name, the new
        model after it (``name`` the same: in its place), the shared sections where they were."""
        from monitor.config.fleet import PER_MODEL_MLFLOW_KEYS, PER_MODEL_SECTIONS

        import yaml

        old = self.models[0]
        shared: list[str] = []
        own: list[str] = []
        # An empty models: (or models_dir:) describes no model: the new models: replaces it.
        expected_shared = {k: v for k, v in self.data.items() if k not in (*PER_MODEL_SECTIONS, "models", "models_dir")}
        expected_own = {k: v for k, v in self.data.items() if k in PER_MODEL_SECTIONS and k != "mlflow"}
        for block in blocks(self.text.splitlines(), 0):
            if block.key == "mlflow" and isinstance(self.data.get("mlflow"), dict):
                mlflow = self.data["mlflow"]
                names = {k: v for k, v in mlflow.items() if k in PER_MODEL_MLFLOW_KEYS}
                rest = {k: v for k, v in mlflow.items() if k not in PER_MODEL_MLFLOW_KEYS}
                if not names:
                    shared += block.lines
                    expected_shared["mlflow"] = mlflow
                    continue
                # Split by key: the tracking server is shared, the experiment and model names are the model's.
                mine, theirs = _split(block, PER_MODEL_MLFLOW_KEYS)
                own += mine or yaml.safe_dump({"mlflow": names}, sort_keys=False).splitlines()
                expected_own["mlflow"] = names
                if rest:
                    shared += theirs or yaml.safe_dump({"mlflow": rest}, sort_keys=False).splitlines()
                    expected_shared["mlflow"] = rest
            elif block.key in PER_MODEL_SECTIONS:
                own += block.lines
            elif block.key in ("models", "models_dir"):
                continue
            else:
                shared += block.lines
        own = [x.replace("driftloop train --data", f"driftloop train --model {old} --data")
               if x.lstrip().startswith("#") else x for x in own]
        shared, tail = _trimmed(shared)
        own, _ = _trimmed(own)
        lines = [*shared, *([""] if shared else []),
                 "# Each model's own sections (model, training, alerts, drift, mlflow's experiment and",
                 "# registered_model) under its name; the sections above are shared by every model",
                 "# (training, alerts or drift up there would be every model's defaults).",
                 "models:"]
        models = {}
        if name != old:
            lines += [f"  {yaml_name(old)}:" + ("" if own else " {}    # the defaults"), *_indented(own, 4), ""]
            models[old] = expected_own
        lines += _indented(entry, 2)
        models[name] = sections
        return lines + tail, {**expected_shared, "models": models}

    def _expected(self, name: str, sections: dict[str, Any]) -> dict[str, Any]:
        return {**self.data, "models": {**self.data["models"], name: sections}}

    def _models_dir(self) -> Path:
        folder = Path(self.data["models_dir"])
        return folder if folder.is_absolute() else self.path.parent / folder

    def _check(self, text: str) -> None:
        """UserInputError, and nothing written, when ``text`` would not load as a configuration."""
        import tempfile

        from monitor.config import load_config
        from monitor.errors import ConfigError

        # Beside the file: models_dir and other relative paths resolve as they will.
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".yaml", dir=self.path.parent)
        try:
            with open(fd, "w", encoding="utf-8") as f:
                f.write(text)
            load_config(tmp, environ={})
        except ConfigError as exc:
            raise UserInputError(f"{self.path} left as it was: with the model added it would not load "
                                 f"({str(exc).replace(tmp, str(self.path))})") from None
        finally:
            Path(tmp).unlink(missing_ok=True)

    @staticmethod
    def _write(path: Path, text: str) -> None:
        from monitor.files import atomic_write_text
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        atomic_write_text(path, text, mode=mode)
