"""Layers point one way (docs/development.md, "Layers"): every import in monitor/ and trainer/,
function-local ones included, parsed with ``ast`` and checked against who may import whom."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The bottom layer: everyone may import it; it imports only itself.
# onnx_scoring (scoring an exported model without torch) and paired (paired tests, on stats) import
# only this layer and are shared by the trainer and the monitor, so they belong to it.
BOTTOM = ("monitor", "monitor.config", "monitor.errors", "monitor.logs", "monitor.lazy", "monitor.records",
          "monitor.stats", "monitor.paired", "monitor.writable", "monitor.files", "monitor.onnx_scoring",
          "monitor.tasks", "monitor.taskstats", "monitor.embeddings", "monitor.buildinfo")

# Known exceptions, each with its reason; keep this list short and shrinking.
EXCEPTIONS = {
    ("trainer.live", "monitor.drift.runner"):
        "the live A/B comparison runs Evidently through the drift runner (function-local); to be "
        "handed in by the caller like the store window",
}


def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _bottom(module: str) -> bool:
    return module == "monitor" or _under(module, *BOTTOM[1:])


# Each part's one door for the CLI commands: a package API or, for the daemon, its façade module
# (the exporter's is its entry module, monitor/gpu/exporter.py).
PARTS = ("trainer", "monitor.store", "monitor.drift", "monitor.daemon", "monitor.ingest", "monitor.gpu")
FACADES = {"trainer", "monitor.store", "monitor.drift", "monitor.daemon", "monitor.daemon.runtime.facade",
           "monitor.ingest",
           "monitor.gpu.exporter"}

# (importer prefix, test of an imported module that is forbidden, why)
RULES = [
    *((b, lambda m: not _bottom(m), "the bottom layer imports only the bottom layer") for b in BOTTOM[1:]),
    ("trainer", lambda m: not (_bottom(m) or _under(m, "trainer")), "the trainer knows only the bottom layer"),
    ("monitor.store", lambda m: not (_bottom(m) or _under(m, "monitor.store")),
     "the store knows nothing of ingestion, drift, the daemon or the commands"),
    ("monitor.drift", lambda m: not (_bottom(m) or _under(m, "monitor.drift")),
     "drift evaluation works on frames it is given"),
    ("monitor.gpu", lambda m: not (_bottom(m) or _under(m, "monitor.gpu")), "the exporter stands alone"),
    ("monitor.ingest", lambda m: _under(m, "monitor.daemon", "monitor.commands", "monitor.drift", "trainer"),
     "ingestion does not know the daemon"),
    ("monitor.daemon", lambda m: _under(m, "monitor.commands", "monitor.cli"), "the daemon does not know the CLI"),
    ("monitor.commands", lambda m: _under(m, *PARTS) and m not in FACADES,
     "commands use one façade per part: " + ", ".join(sorted(FACADES))),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every (line, module) that ``source`` imports, at any depth. ``from a import b`` counts as
    ``a.b`` when that is a module of ours, else ``a``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                is_module = (ROOT / sub.replace(".", "/")).with_suffix(".py").exists() or \
                    (ROOT / sub.replace(".", "/") / "__init__.py").exists()
                found.append((node.lineno, sub if is_module else target))
    return [(line, m) for line, m in found if _under(m, "monitor", "trainer")]


def violations(module: str, imports: list[tuple[int, str]]) -> list[str]:
    out = []
    for prefix, forbidden, why in RULES:
        if not _under(module, prefix):
            continue
        out += [f"{module}:{line} imports {m} ({why})" for line, m in imports
                if forbidden(m) and (module, m) not in EXCEPTIONS]
    return out


def _our_modules():
    for top in ("monitor", "trainer"):
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path


def test_layers_point_one_way():
    found = []
    for path in _our_modules():
        module = _module_name(path)
        found += violations(module, imported_modules(path.read_text(), module, path.name == "__init__.py"))
    assert found == []


@pytest.mark.parametrize("module,source,expected", [
    ("monitor.store.store", "def f():\n    from monitor.daemon.state.schema import x\n", "monitor.daemon.state.schema"),
    ("monitor.store.store", "from ..ingest import validation\n", "monitor.ingest"),
    ("trainer.worker", "def load():\n    import monitor.store\n", "monitor.store"),
    ("monitor.commands.status", "from monitor.daemon.state.incidents import IncidentStore\n",
     "monitor.daemon.state.incidents"),
    ("monitor.commands.train", "def f():\n    from trainer import registry\n", "trainer.registry"),
    ("monitor.records.validation", "from monitor.ingest import app\n", "monitor.ingest.app"),
])
def test_the_checker_sees_function_local_and_relative_imports(module, source, expected):
    """The test above can fail: a forbidden import, local or relative, is reported."""
    found = violations(module, imported_modules(source, module, False))
    assert len(found) == 1 and expected in found[0]


def test_commands_may_use_the_facades():
    assert violations("monitor.commands.check", [(1, m) for m in sorted(FACADES)]) == []


def runtime_imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """:func:`imported_modules` without the imports under ``if TYPE_CHECKING:`` (annotations only:
    they never run, so they cannot close a circle)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = [ast.Pass()]
    return imported_modules(ast.unparse(tree), module, is_package)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    """No circles between modules, function-local imports included (a package's ``__init__``
    re-exporting its modules is not a module of its own here)."""
    packages = {_module_name(p) for p in _our_modules() if p.name == "__init__.py"}
    graph = {}
    for path in _our_modules():
        module = _module_name(path)
        if module in packages:
            continue
        graph[module] = {m for _, m in runtime_imports(path.read_text(), module, False)
                         if m != module and m not in packages}
    assert circles(graph) == []


def test_the_circle_finder_finds_a_function_local_circle():
    graph = {"a.policy": {"a.rules"}, "a.rules": {"a.policy"}, "a.x": {"a.policy"}}
    assert circles(graph) == [["a.policy", "a.rules"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from monitor.daemon.runtime.daemon import D\n"
    assert runtime_imports(source, "monitor.daemon.runtime.api", False) == []
