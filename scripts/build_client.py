"""Build ``driftloop-client``: the client and the torch-free ONNX scorer, as a wheel of their own.

A model service needs two things from driftloop: :class:`monitor.client.DriftloopClient` (send
predictions and labels) and a way to score with the champion — :class:`monitor.onnx_scoring.OnnxScorer`
on a folder written by ``driftloop export``, or :class:`monitor.client.Champion` (``runtime="onnx"``)
following the ``champion`` alias in MLflow. None of them needs torch, Evidently, pydantic or the
daemon, but ``pip install driftloop`` brings all of those (torch alone is hundreds of MB).

This script builds a second distribution from the same source files, so the two cannot drift apart:
the modules the client and the scorer import (found by walking their imports with ``ast``,
function-local imports included) are copied into a staging folder with a generated
``pyproject.toml``, and ``pip wheel`` builds it. Its dependencies are httpx and orjson (send records);
the extras add the rest: ``[pandas]`` numpy and pandas (send DataFrames), ``[onnx]`` onnxruntime
with them (:class:`OnnxScorer`), ``[registry]`` ``mlflow-skinny`` (:class:`Champion`, an MLflow
tracking server over HTTP; skinny has no SQL store). A part used without its extra raises
:class:`monitor.client_errors.MissingExtra` naming it. Footprints and install times: docs/parts/ingestion.md.

    python scripts/build_client.py --out dist          # -> dist/driftloop_client-<version>-py3-none-any.whl
    pip install 'dist/driftloop_client-<version>-py3-none-any.whl[pandas]'

It installs the same ``monitor`` package name (a subset), so code written against the full install
runs unchanged; install one or the other in an environment, not both. The build fails when a module
of the closure would import a heavy dependency (``HEAVY``) at import time, or needs a server-side module
of ours (``SERVER_SIDE``) at all, save the function-local imports ``FULL_INSTALL_ONLY`` lists (a
feature of the full install that says so in the light one). A heavy import inside a function is
allowed: the bottom layer's task objects (monitor/tasks/task.py) import torch inside their training
methods, which only the trainer calls; the client never runs them (tests/trainer/test_light_client.py
scores in a venv without torch).
"""
from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("monitor.client", "monitor.onnx_scoring")
# What a module of the light client must not import when it is imported: each is a large install.
HEAVY = ("torch", "evidently", "pydantic", "sqlalchemy", "fastapi", "sklearn")
# What it must never import, at any depth: server-side modules of ours, which the wheel does not hold.
SERVER_SIDE = ("trainer", "monitor.config", "monitor.daemon", "monitor.drift", "monitor.store", "monitor.ingest")
FORBIDDEN = HEAVY + SERVER_SIDE
# The exceptions to SERVER_SIDE, each an importer -> what it may import inside a function and is not
# followed into the closure: a feature only the full install has, whose module turns the missing import
# into a ClientError saying so (Champion.for_model reading a driftloop configuration file).
FULL_INSTALL_ONLY = {"monitor.champion_client": ("monitor.config",)}
# Sending records needs only these two: a service that sends DataFrames has pandas already, and one
# that sends lists of records needs no 150 MB of numpy and pandas (scripts/measure_client.py measures).
DEPENDENCIES = ["httpx>=0.27", "orjson>=3.9"]
FRAMES = ["numpy>=1.24", "pandas>=2.0,<3"]  # the versions the frame code is tested with


def extras(project: dict) -> dict[str, list[str]]:
    """The optional parts, each with what it needs; onnxruntime and MLflow pinned as the full install pins them."""
    def pin(name: str) -> str:
        return next((d.split("#")[0].strip() for d in project["dependencies"] if d.startswith(name + "=")), name)
    return {"pandas": FRAMES,                                          # DataFrames in, records out
            "onnx": [pin("onnxruntime"), *FRAMES],                      # OnnxScorer
            "registry": [pin("mlflow").replace("mlflow", "mlflow-skinny", 1)]}  # Champion


def _module_path(name: str) -> Path | None:
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, import_time: bool = False) -> set[str]:
    """Every module ``path`` imports, function-local imports included unless ``import_time``
    (``from a import b`` gives ``a`` and, when it is a module, ``a.b``)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    nodes = _import_time_nodes(tree) if import_time else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _import_time_nodes(tree: ast.Module) -> list[ast.AST]:
    """The statements run when the module is imported: its body and the blocks of its top-level
    ``if``/``try``/``with``, not function or class-method bodies."""
    out: list[ast.AST] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.ClassDef):
            todo.extend(n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return out


def closure(roots: tuple[str, ...] = ROOTS) -> list[str]:
    """The ``monitor`` modules the roots need (their packages' ``__init__`` included), sorted.
    ValueError naming the importer when one of them imports something in ``FORBIDDEN``."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_path(name)
        if path is None:
            continue  # an attribute (from monitor.x import Name), not a module
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages
        at_import = _imports(path, import_time=True)
        full_install_only = FULL_INSTALL_ONLY.get(name, ())
        for imported in _imports(path):
            if imported not in at_import and _under(imported, full_install_only):
                continue
            forbidden = FORBIDDEN if imported in at_import else SERVER_SIDE
            if _under(imported, forbidden):
                raise ValueError(f"{name} imports {imported}: the light client must not need it")
            if imported == "monitor" or imported.startswith("monitor."):
                todo.append(imported)
    return sorted(seen)


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def stage(folder: Path) -> list[str]:
    """Copy the closure into ``folder`` with a pyproject.toml; the modules staged."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    modules = closure()
    for name in modules:
        src = _module_path(name)
        assert src is not None
        dst = folder / src.relative_to(REPO)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    packages = sorted({".".join(m.split(".")[:-1]) if not _module_path(m).name == "__init__.py" else m  # type: ignore[union-attr]
                       for m in modules})
    deps = ", ".join(f'"{d}"' for d in DEPENDENCIES)
    optional = "\n".join(f"{name} = [{', '.join(repr(d).replace(chr(39), chr(34)) for d in needs)}]"
                          for name, needs in extras(project).items())
    (folder / "pyproject.toml").write_text(f'''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "driftloop-client"
version = "{project["version"]}"
description = "driftloop's client (send predictions and labels) and its torch-free ONNX scorer"
requires-python = "{project.get("requires-python", ">=3.10")}"
dependencies = [{deps}]

[project.optional-dependencies]
{optional}

[tool.setuptools]
packages = [{", ".join(f'"{p}"' for p in packages)}]
''')
    return modules


def build(out: Path) -> Path:
    """Build the wheel into ``out``; its path."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        stage(Path(tmp))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(out), tmp], check=True)
    return max(out.glob("driftloop_client-*.whl"), key=lambda p: p.stat().st_mtime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="folder for the wheel [dist]")
    parser.add_argument("--list", action="store_true", help="print the modules it would contain and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(closure()))
        return
    print(build(args.out))


if __name__ == "__main__":
    main()
