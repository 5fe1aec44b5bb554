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
          "monitor.tasks", "monitor.taskstats", "monitor.embeddings", "monitor.buildinfo", "monitor.finite",
          "monitor.retrain_contract", "monitor.client_errors", "monitor.runbook_pages",
          "monitor.codes")

# Known exceptions, each with its reason; keep this list short and shrinking.
EXCEPTIONS = {
    ("monitor.client_errors", "monitor.client"):
        "annotations only (under TYPE_CHECKING): the client's errors name the IngestSummary they carry; "
        "client_errors is in the bottom layer because the ONNX scorer raises its MissingExtra",
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
    skipped: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                                         or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            skipped |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if hasattr(n, "lineno")}
    return [(line, m) for line, m in dict.fromkeys(imported_modules(source, module, is_package))
            if line not in skipped]


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
    re-exporting its modules is not a module of its own here: importing the package stands for
    importing the modules its ``__init__`` imports, e.g. ``monitor.daemon.runtime.views``'s)."""
    inits = {_module_name(p): p for p in _our_modules() if p.name == "__init__.py"}
    reexported = {name: {m for _, m in runtime_imports(path.read_text(), name, True) if not _under(name, m)}
                  for name, path in inits.items()}

    def modules_behind(m: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if m not in inits:
            return {m}
        return {x for r in reexported[m] - seen for x in modules_behind(r, seen | {m})}

    graph = {}
    for path in _our_modules():
        module = _module_name(path)
        if module in inits:
            continue
        graph[module] = {x for _, m in runtime_imports(path.read_text(), module, False)
                         for x in modules_behind(m) if x != module}
    assert circles(graph) == []


def test_the_circle_finder_finds_a_function_local_circle():
    graph = {"a.policy": {"a.rules"}, "a.rules": {"a.policy"}, "a.x": {"a.policy"}}
    assert circles(graph) == [["a.policy", "a.rules"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from monitor.daemon.runtime.daemon import D\n"
    assert runtime_imports(source, "monitor.daemon.runtime.api", False) == []


# -- the daemon's rooms ---------------------------------------------------------------------------
# Lowest first: a room imports only rooms below it at run time (imports under ``if TYPE_CHECKING:``
# are annotations and may name any room). ``monitor.daemon`` itself is the lazy package entry above all.
ROOMS = ("decisions", "state", "retraining", "runtime")

# (importer, imported) pairs that point up, each with its reason; keep this list short and shrinking.
ROOM_EXCEPTIONS = {
    ("monitor.daemon.retraining.recovery", "monitor.daemon.runtime.controller"):
        "annotation only (recover(ctl: Controller)), imported at run time: belongs under TYPE_CHECKING "
        "(recovery.py is the lifecycle work's, issue 25 item 2)",
}

# What the pure decisions may import: the standard library minus I/O, numpy/pandas, the bottom layer
# minus its file helpers, and drift's pure maths. No clock (the caller injects one), no store, no network.
DECISIONS_IO = ("os", "io", "pathlib", "shutil", "tempfile", "glob", "subprocess", "socket", "threading",
                "multiprocessing", "asyncio", "time", "sqlite3", "sqlalchemy", "mlflow", "httpx", "requests",
                "urllib", "http", "fastapi", "starlette", "uvicorn", "anyio", "apscheduler", "prometheus_client",
                "evidently", "torch", "onnxruntime", "pynvml", "boto3", "logging")
DECISIONS_OURS = (*(m for m in BOTTOM if m not in ("monitor.files", "monitor.writable", "monitor.logs")),
                  "monitor.daemon.decisions", "monitor.drift.changepoint", "monitor.drift.frames")


def room_of(module: str) -> int | None:
    """The room's rank (0 = decisions, the lowest), or None outside the rooms."""
    parts = module.split(".")
    if parts[:2] == ["monitor", "daemon"] and len(parts) > 2 and parts[2] in ROOMS:
        return ROOMS.index(parts[2])
    return None


def room_violations(module: str, imports: list[tuple[int, str]]) -> list[str]:
    """Run-time imports of a higher room (``imports`` as :func:`runtime_imports` gives them)."""
    rank = room_of(module)
    if rank is None:
        return []
    out = []
    for line, m in imports:
        other = room_of(m)
        if other is not None and other > rank and (module, m) not in ROOM_EXCEPTIONS:
            out.append(f"{module}:{line} imports {m} (room {ROOMS[rank]} is below room {ROOMS[other]})")
        elif _under(m, "monitor.daemon") and other is None and m != "monitor.daemon" and rank is not None:
            out.append(f"{module}:{line} imports {m} (outside the four rooms)")
    return out


def _all_imported_names(source: str) -> list[tuple[int, str]]:
    """Every top-level module name imported (absolute imports), at any depth, TYPE_CHECKING included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
    return found


def purity_violations(module: str, source: str) -> list[str]:
    """The decisions room does no I/O: no I/O library, no ``open()``, none of ours but the allowed."""
    out = [f"{module}:{line} imports {name} (decisions do no I/O)" for line, name in _all_imported_names(source)
           if name.split(".")[0] in DECISIONS_IO or name.startswith("urllib.request")]
    out += [f"{module}:{line} imports {m} (decisions import only {', '.join(DECISIONS_OURS)})"
            for line, m in imported_modules(source, module, False)
            if m != "monitor" and not _under(m, *DECISIONS_OURS[1:])]
    out += [f"{module}:{node.lineno} calls open() (decisions do no I/O)" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"]
    return out


def _daemon_modules():
    for path in sorted((ROOT / "monitor" / "daemon").rglob("*.py")):
        yield path, _module_name(path)


def test_rooms_point_one_way():
    """runtime → retraining → state → decisions: a lower room never imports a higher one at run time."""
    found = []
    for path, module in _daemon_modules():
        found += room_violations(module, runtime_imports(path.read_text(), module, path.name == "__init__.py"))
    assert found == []


def test_every_daemon_module_lives_in_a_room():
    """A room's subpackage (``runtime/views/``) is part of that room."""
    loose = [module for path, module in _daemon_modules() if module != "monitor.daemon" and room_of(module) is None]
    assert loose == []
    assert room_of("monitor.daemon.runtime.views") == room_of("monitor.daemon.runtime.views.status") == \
        ROOMS.index("runtime")


def test_decisions_are_pure():
    found = []
    for path, module in _daemon_modules():
        if room_of(module) == 0:
            found += purity_violations(module, path.read_text())
    assert found == []


def test_no_room_imports_one_that_imports_it_back():
    """The circle test at room granularity: the rooms' run-time imports, listed exceptions aside,
    form no circle (forbidden circles: the one-way order above, checked as a graph)."""
    graph: dict[str, set[str]] = {room: set() for room in ROOMS}
    for path, module in _daemon_modules():
        rank = room_of(module)
        if rank is None:
            continue
        for _, m in runtime_imports(path.read_text(), module, path.name == "__init__.py"):
            other = room_of(m)
            if other is not None and other != rank and (module, m) not in ROOM_EXCEPTIONS:
                graph[ROOMS[rank]].add(ROOMS[other])
    assert circles(graph) == []


def test_room_exceptions_are_still_needed():
    """An exception whose import is gone is struck from the list (it keeps shrinking)."""
    live = set()
    for path, module in _daemon_modules():
        live |= {(module, m) for _, m in runtime_imports(path.read_text(), module, path.name == "__init__.py")}
    assert set(ROOM_EXCEPTIONS) - live == set()


@pytest.mark.parametrize("module,source,expected", [
    ("monitor.daemon.state.checklog", "from monitor.daemon.runtime.checks import CheckOutcome\n",
     "monitor.daemon.runtime.checks"),
    ("monitor.daemon.retraining.review", "def f():\n    from ..runtime import controller\n",
     "monitor.daemon.runtime.controller"),
    ("monitor.daemon.decisions.policy", "from monitor.daemon.state.levels import Level\n",
     "monitor.daemon.state.levels"),
    ("monitor.daemon.state.levels", "from monitor.daemon.nowhere import x\n", "monitor.daemon.nowhere"),
])
def test_the_room_checker_sees_an_upward_import(module, source, expected):
    found = room_violations(module, runtime_imports(source, module, False))
    assert len(found) == 1 and expected in found[0]


def test_the_room_checker_lets_annotations_and_downward_imports_pass():
    source = ("from typing import TYPE_CHECKING\nfrom monitor.daemon.state.attempts import AttemptStore\n"
              "if TYPE_CHECKING:\n    from monitor.daemon.runtime.controller import Controller\n")
    module = "monitor.daemon.retraining.review"
    assert room_violations(module, runtime_imports(source, module, False)) == []


@pytest.mark.parametrize("source,expected", [
    ("import sqlalchemy\n", "sqlalchemy"),
    ("def f():\n    from mlflow.tracking import MlflowClient\n", "mlflow.tracking"),
    ("from pathlib import Path\n", "pathlib"),
    ("import time\n", "time"),
    ("from monitor.store import PredictionStore\n", "monitor.store"),
    ("from monitor.daemon.state.incidents import Incident\n", "monitor.daemon.state.incidents"),
    ("def f(p):\n    return open(p).read()\n", "open()"),
])
def test_the_purity_checker_sees_io(source, expected):
    found = purity_violations("monitor.daemon.decisions.policy", source)
    assert len(found) == 1 and expected in found[0]


def test_the_room_circle_finder_finds_a_circle_of_rooms():
    assert circles({"state": {"runtime"}, "runtime": {"state", "decisions"}, "decisions": set()}) == \
        [["runtime", "state"]]


def module_map_gaps(docstring: str, modules: list[str]) -> list[str]:
    """The daemon modules (``room/name.py``, or ``room/package/name.py`` inside a room's subpackage,
    named ``package/name.py``) that the module map in ``monitor/daemon/__init__.py`` does not name
    under their room."""
    sections: dict[str, str] = {}
    room = None
    for line in docstring.splitlines():
        head = line.strip().split(" ")[0]
        if line.startswith("    ") and not line.startswith("     ") and head.rstrip("/") in ROOMS:
            room = head.rstrip("/")
        elif not line.startswith("    "):
            room = None
        if room is not None:
            sections[room] = sections.get(room, "") + " " + line
    return [m for m in modules if m.partition("/")[2] not in
            sections.get(m.split("/")[0], "").replace(",", " ").replace("(", " ").split()]


def test_the_module_map_names_every_daemon_module():
    """Subpackages of a room included (``runtime/views/status.py``); a package's ``__init__`` is
    its folder, named by the modules in it."""
    package = ROOT / "monitor" / "daemon"
    modules = [p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
               if p.name != "__init__.py" and p.parent != package]
    assert "runtime/views/status.py" in modules
    assert module_map_gaps(ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or "", modules) == []


def test_the_module_map_check_sees_a_missing_module():
    doc = ("Rooms:\n\n    decisions/   policy.py (AlertPolicy)\n                 rules.py\n    state/   levels.py\n"
           "    runtime/   daemon.py, views/ (presentation): views/status.py\n")
    assert module_map_gaps(doc, ["decisions/policy.py", "decisions/rules.py", "state/levels.py",
                                 "runtime/views/status.py"]) == []
    assert module_map_gaps(doc, ["state/policy.py", "state/tables.py"]) == ["state/policy.py", "state/tables.py"]
    assert module_map_gaps(doc, ["runtime/status.py", "runtime/views/render.py", "state/views/status.py"]) == \
        ["runtime/status.py", "runtime/views/render.py", "state/views/status.py"]


def room_entry(room: str) -> set[str]:
    """The names a room's ``__init__`` lists in ``__all__`` (read with ``ast``, nothing imported)."""
    tree = ast.parse((ROOT / "monitor" / "daemon" / room / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def entry_violations(module: str, source: str, entries: dict[str, set[str]]) -> list[str]:
    """Names imported from another room that its entry (``__all__``) does not list, type-only ones included."""
    rank = room_of(module)
    if rank is None:
        return []
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            other = room_of(node.module)
            if other is None or other == rank:
                continue
            out += [f"{module}:{node.lineno} imports {alias.name} from {node.module}, which "
                    f"monitor/daemon/{ROOMS[other]}/__init__.py does not list in __all__"
                    for alias in node.names if alias.name not in entries[ROOMS[other]]]
    return out


def test_rooms_import_each_other_through_their_entries():
    """Each room has one public entry: another room imports only the names its ``__all__`` lists
    (from the room or the module that defines them); a new one is added there, deliberately."""
    entries = {room: room_entry(room) for room in ROOMS}
    found = []
    for path, module in _daemon_modules():
        found += entry_violations(module, path.read_text(), entries)
    assert found == []


def test_each_room_entry_resolves():
    import importlib
    for room in ROOMS:
        package = importlib.import_module(f"monitor.daemon.{room}")
        assert set(package._WHERE) == room_entry(room), room
        missing = [name for name in room_entry(room) if getattr(package, name, None) is None]
        assert missing == [], room


def test_the_entry_checker_sees_an_unlisted_name():
    entries = {"decisions": {"AlertPolicy"}, "state": {"IncidentStore"}, "retraining": set(), "runtime": set()}
    source = ("from monitor.daemon.decisions.policy import AlertPolicy, _level\n"
              "from monitor.daemon.state.incidents import IncidentStore\n"
              "from monitor.daemon.retraining.launcher import ChildResult\n")
    found = entry_violations("monitor.daemon.runtime.controller", source, entries)
    assert [f.split(" imports ")[1].split(" ")[0] for f in found] == ["_level", "ChildResult"]
    assert entry_violations("monitor.daemon.decisions.policy", "from monitor.daemon.decisions.breach import _x\n",
                            entries) == []  # inside a room, anything goes


# -- the views: one entry, no writes --------------------------------------------------------------
VIEWS = "monitor.daemon.runtime.views"

# What the views may call on the stores they are handed: reads. Any other method of a
# monitor/daemon/state/ module (apply, record, write, set_verdict, ...) called in a view is a write.
STORE_READS = {"count_open", "current", "error_total", "events", "firing", "for_incident", "get", "in_shadow",
               "is_open", "last", "last_finished", "last_with_status", "open_incidents", "peek",
               "promoted_by_loop", "read", "recent", "recent_observations", "running", "sort", "to_dict",
               "totals_by_outcome", "totals_by_reason"}


def inner_view_imports(module: str, source: str) -> list[str]:
    """Imports of a module inside the views package from outside it (the entry is the way in); a
    test may still reach a private helper (``_name``) where it lives."""
    if _under(module, VIEWS):
        return []
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if _under(a.name, VIEWS) and a.name != VIEWS]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if _under(node.module, VIEWS) and node.module != VIEWS:
                names = [f"{node.module}.{a.name}" for a in node.names if not a.name.startswith("_")]
        out += [f"{module}:{node.lineno} imports {n} (import from {VIEWS})" for n in names]
    return out


def store_writes(module: str, source: str, methods: set[str]) -> list[str]:
    """Calls of a state-store method (``methods``) that is not a read."""
    return [f"{module}:{node.lineno} calls .{node.func.attr}() (views do no writes)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in methods - STORE_READS]


def _state_methods() -> set[str]:
    return {node.name for path in (ROOT / "monitor" / "daemon" / "state").glob("*.py")
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def test_the_views_are_imported_through_their_entry():
    found = []
    for top in ("monitor", "trainer", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            module = _module_name(path)
            found += inner_view_imports(module, path.read_text())
    assert found == []


def test_the_views_do_no_writes():
    methods = _state_methods()
    assert {"apply", "record", "write", "set_verdict"} <= methods  # the store's writes are seen
    found = []
    for path in sorted((ROOT / "monitor" / "daemon" / "runtime" / "views").glob("*.py")):
        module = _module_name(path)
        found += store_writes(module, path.read_text(), methods)
        found += [f"{module}:{line} imports {name} (views do no writes)"
                  for line, name in _all_imported_names(path.read_text())
                  if name.split(".")[0] == "sqlalchemy" or _under(name, "monitor.writable", "monitor.files")]
    assert found == []


def test_the_view_checkers_see_an_inner_import_and_a_write():
    source = ("from monitor.daemon.runtime.views.status import render_status, _check_summary\n"
              "import monitor.daemon.runtime.views.render\nfrom monitor.daemon.runtime.views import iso\n")
    found = inner_view_imports("monitor.commands.status", source)
    assert [f.split(" imports ")[1].split(" ")[0] for f in found] == [
        "monitor.daemon.runtime.views.status.render_status", "monitor.daemon.runtime.views.render"]
    assert inner_view_imports("monitor.daemon.runtime.views.render", source) == []
    source = "def f(incidents, levels):\n    levels.read()\n    incidents.apply('x', 1, 'm')\n"
    found = store_writes("monitor.daemon.runtime.views.status", source, {"read", "apply"})
    assert len(found) == 1 and ".apply()" in found[0]
