"""input_uri only inside model.input_roots or of a listed model.input_schemes
(monitor/records/inputs.py): the resolver on ``..``, absolute paths, symlinks out of a root,
``file://``, ``http://`` and no roots at all; ingestion refuses the rest with 422 naming the field
on both validation paths, and the answer does not tell an existing file from a missing one."""
from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from monitor.config import ModelConfig
from monitor.errors import ConfigError
from monitor.ingest import create_app
from monitor.records.inputs import InputRefused, InputRoots, Refusal
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve
from tests.monitor.store.factories import T0


@pytest.fixture
def tree(tmp_path) -> Path:
    """``root/`` (images/a.png, a link out to ``outside/``, a link to a file outside, a link
    inside) and ``outside/secret``."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "images").mkdir(parents=True)
    outside.mkdir()
    (root / "images" / "a.png").write_bytes(b"png")
    (outside / "secret").write_text("secret")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "secret.png").symlink_to(outside / "secret")
    (root / "alias.png").symlink_to(root / "images" / "a.png")
    return tmp_path


def refusal(roots: InputRoots, ref: str) -> Refusal:
    with pytest.raises(InputRefused) as info:
        roots.resolve(ref)
    return info.value.reason


def test_paths_inside_a_root_resolve_to_the_real_path(tree):
    roots = InputRoots([str(tree / "root")])
    real = str((tree / "root" / "images" / "a.png").resolve())
    assert roots.resolve(str(tree / "root" / "images" / "a.png")) == real
    assert roots.resolve("images/a.png") == real  # relative: from the first root
    assert roots.resolve((tree / "root" / "images" / "a.png").as_uri()) == real
    assert roots.resolve("file://localhost" + str(tree / "root" / "images" / "a.png")) == real
    assert roots.resolve("images/../images/./a.png") == real
    assert roots.resolve("alias.png") == real  # a link that stays inside
    assert roots.resolve("images/not-yet.png") == str(tree.resolve() / "root" / "images" / "not-yet.png")


@pytest.mark.parametrize("ref", ["../outside/secret", "images/../../outside/secret", "out/secret", "secret.png",
                                 "out/../../outside/secret"])
def test_dot_dot_and_symlinks_out_of_the_root_are_refused(tree, ref):
    assert refusal(InputRoots([str(tree / "root")]), ref) is Refusal.OUTSIDE_ROOTS


def test_absolute_paths_and_file_uris_outside_are_refused(tree):
    roots = InputRoots([str(tree / "root")])
    for ref in ("/etc/passwd", str(tree / "outside" / "secret"), "file:///etc/passwd",
                (tree / "root").as_uri() + "/../outside/secret", (tree / "root").as_uri() + "/secret.png",
                (tree / "root").as_uri() + "/images/%2e%2e/%2e%2e/outside/secret", str(tree / "root") + "x/a.png"):
        assert refusal(roots, ref) is Refusal.OUTSIDE_ROOTS, ref
    assert refusal(roots, "file://example.com" + str(tree / "root" / "images" / "a.png")) is Refusal.FILE_URI
    assert refusal(roots, "file:images/a.png") is Refusal.FILE_URI


def test_schemes_pass_only_when_listed(tree):
    roots = InputRoots([str(tree / "root")], ["s3"])
    assert roots.resolve("s3://bucket/key.png") == "s3://bucket/key.png"  # as it is, never opened
    assert roots.resolve("S3://bucket/key.png") == "S3://bucket/key.png"
    for ref in ("http://169.254.169.254/latest/meta-data", "https://example.com/a.png", "gs://b/k", "ftp://x/y"):
        assert refusal(roots, ref) is Refusal.SCHEME, ref


def test_without_roots_every_path_is_refused(tree):
    roots = InputRoots([], ["s3"])
    for ref in ("images/a.png", str(tree / "root" / "images" / "a.png"), (tree / "root").as_uri() + "/a"):
        assert refusal(roots, ref) is Refusal.NO_ROOTS
    assert roots.resolve("s3://b/k") == "s3://b/k"


def test_an_existing_and_a_missing_file_outside_get_the_same_answer(tree):
    roots = InputRoots([str(tree / "root")])
    answers = set()
    for ref in (str(tree / "outside" / "secret"), str(tree / "outside" / "missing"), "/etc/passwd", "/etc/nope"):
        with pytest.raises(InputRefused) as info:
            roots.resolve(ref)
        answers.add(str(info.value))
    assert len(answers) == 1
    assert str(tree) not in answers.pop()  # names the keys, never a server path


def test_a_root_that_is_a_symlink_takes_both_spellings(tree):
    (tree / "link-root").symlink_to(tree / "root", target_is_directory=True)
    roots = InputRoots([str(tree / "link-root")])
    real = str((tree / "root" / "images" / "a.png").resolve())
    assert roots.resolve(str(tree / "link-root" / "images" / "a.png")) == real
    assert roots.resolve(str(tree / "root" / "images" / "a.png")) == real
    assert refusal(roots, str(tree / "link-root" / "out" / "secret")) is Refusal.OUTSIDE_ROOTS


def test_config_checks_the_schemes():
    assert ModelConfig(input_schemes=["S3", "gs"]).input_schemes == ["s3", "gs"]
    for bad in (["s3://"], ["file"], [""]):
        with pytest.raises(ValueError):
            ModelConfig(input_schemes=bad)
    with pytest.raises(ValueError):
        ModelConfig(input_roots=[""])


# ---- through ingestion -------------------------------------------------------------------------
def record(i: int, uri: str | None = None, **extra) -> dict:
    return {"id": f"r{i}", "ts": T0 + i, "features": {"x0": float(i)}, "score": 0.5,
            **({"input_uri": uri} if uri is not None else {}), **extra}


@pytest.fixture
def served(tree):
    cfg = make_config(tree / "home", {"features": [{"name": "x0"}], "input_roots": [str(tree / "root")],
                                      "input_schemes": ["s3"]})
    store = PredictionStore.from_config(cfg)
    with serve(create_app(cfg, store)) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as api:
        yield api, store
    store.close()


@pytest.mark.parametrize("slow", [False, True], ids=["fast path", "record by record"])
def test_ingestion_refuses_what_resolves_outside_naming_the_field(served, tree, slow):
    api, store = served
    extra = {"model_version": 7} if slow else {}  # an integer version sends the batch the slow way
    bad = ["/etc/passwd", "/etc/no-such-file", "../outside/secret", "out/secret", "file:///etc/passwd",
           "http://169.254.169.254/latest", str(tree / "outside" / "secret")]
    messages = set()
    for uri in bad:
        response = api.post("/v1/predictions", json=[record(0, "images/a.png", **extra), record(1, uri, **extra)])
        assert response.status_code == 422, (uri, response.text)
        errors = response.json()["errors"]
        assert [(e["index"], e["field"]) for e in errors] == [(1, "input_uri")], uri
        assert "/etc" not in response.text and str(tree) not in response.text
        messages.add(errors[0]["message"] if not uri.startswith("http") else None)
    assert len(messages - {None}) == 1  # an existing file and a missing one read alike
    assert store.row_counts()["predictions"] == 0
    good = [record(i, uri, **extra) for i, uri in enumerate(
        ["images/a.png", (tree / "root" / "images" / "b.png").as_uri(), "s3://bucket/k.png", None])]
    assert api.post("/v1/predictions", json=good).json() == {"stored": 4, "duplicates": 0}
    assert store.window()["input_uri"].tolist()[:3] == ["images/a.png", (tree / "root" / "images" / "b.png").as_uri(),
                                                        "s3://bucket/k.png"]  # stored as sent
    path = ("slow" if slow else "fast")
    assert store.validator.paths[("prediction", path)] >= 1


def test_without_roots_a_path_is_refused_telling_what_to_set(tmp_path):
    cfg = make_config(tmp_path / "home", {"features": [{"name": "x0"}]})
    with PredictionStore.from_config(cfg) as store:
        with pytest.raises(Exception) as info:
            store.add_predictions([record(0, "images/a.png")])
        assert info.value.errors[0]["field"] == "input_uri"
        assert "model.input_roots" in info.value.errors[0]["message"]
        assert store.add_predictions([record(1)]).stored == 1  # no input_uri: nothing to check


def test_roots_load_from_the_environment(tmp_path):
    from monitor.config import load_config
    cfg = load_config(None, environ={"DRIFTLOOP_MODEL__INPUT_ROOTS": f"[{tmp_path}]",
                                     "DRIFTLOOP_MODEL__INPUT_SCHEMES": "[s3, gs]"})
    assert cfg.model.input_roots == [str(tmp_path)] and cfg.model.input_schemes == ["s3", "gs"]
    with pytest.raises(ConfigError):
        load_config(None, environ={"DRIFTLOOP_MODEL__INPUT_SCHEMES": "[file]"})
    assert os.path.isabs(InputRoots.of(cfg.model).roots[0])
