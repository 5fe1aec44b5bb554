"""What differs per task lives in the task classes (monitor/tasks/task.py; STYLE.md habit 15):
every module of monitor/ and trainer/ is parsed with ``ast`` and its *task branches* counted:

* a comparison with a task name (``task == "regression"``, ``kind in ("binary", "multiclass")``);
* a test on ``.classifier`` (the task's own flag) in an ``if``, a conditional expression, a
  boolean operation or a comprehension's condition;
* ``isinstance`` with a task class;
* a dict literal keyed by two or more task names (a branch written as a table).

Outside monitor/tasks/ there are fewer than 20, in at most 5 modules (there were 184 in 58 when
the task became an object). A new one fails this test until it is a method of the task instead.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK_NAMES = {"binary", "multiclass", "regression"}
TASK_CLASSES = {"Task", "BinaryTask", "MulticlassTask", "RegressionTask", "_Classifier"}
MAX_BRANCHES = 19
MAX_MODULES = 5


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & TASK_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _tests_classifier(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "classifier" for n in ast.walk(test))


def task_branches(source: str) -> list[int]:
    """The line of every task branch in ``source``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names(x) for x in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and _tests_classifier(node.test):
            lines.append(node.lineno)
        elif isinstance(node, ast.BoolOp) and any(_tests_classifier(v) for v in node.values):
            lines.append(node.lineno)
        elif isinstance(node, ast.comprehension) and any(_tests_classifier(c) for c in node.ifs):
            lines.append(node.iter.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
              and len(node.args) == 2
              and {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} & TASK_CLASSES):
            lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and sum(bool(_names(k)) for k in node.keys if k is not None) >= 2:
            lines.append(node.lineno)
    return sorted(set(lines))


def census() -> dict[str, list[int]]:
    out = {}
    for path in sorted([*ROOT.glob("monitor/**/*.py"), *ROOT.glob("trainer/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("monitor/tasks/"):
            continue
        found = task_branches(path.read_text())
        if found:
            out[rel] = found
    return out


def test_the_counter_sees_each_form_of_branch() -> None:
    source = '''
if task == "regression": pass
x = 1 if cfg.model.task != "binary" else 2
ok = kind in ("binary", "multiclass")
if t.classifier: pass
y = [c for c in cols if task.classifier]
z = a and m.kind.classifier
if isinstance(t, RegressionTask): pass
table = {"binary": 1, "regression": 2}[task]
fine = {"binary": 1}
kind = "numeric" if f == "numeric" else "category"
'''
    assert task_branches(source) == [2, 3, 4, 5, 6, 7, 8, 9]


def test_task_branches_live_in_the_task_classes() -> None:
    found = census()
    total = sum(len(v) for v in found.values())
    where = "\n".join(f"  {path}: lines {', '.join(map(str, lines))}" for path, lines in found.items())
    assert total <= MAX_BRANCHES and len(found) <= MAX_MODULES, (
        f"{total} task branches in {len(found)} modules (at most {MAX_BRANCHES} in {MAX_MODULES}): ask the "
        f"task (monitor/tasks/task.py) instead of comparing its name:\n{where}")
