"""`driftloop rollback` follows the champions as they really were: the history kept in the tag
``driftloop.champion_history`` is rebuilt against the ``champion`` alias at each promotion (a hand
move in the MLflow UI is recorded), deleted versions are skipped, and when nothing is left to go
back to the error says what is missing and how to fix it. A real MLflow SQLite registry; the
versions are registered without training (the aliases and tags are what is under test)."""
from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from monitor.errors import RegistryError
from trainer import registry as reg
from trainer import rollback


@pytest.fixture
def store(tcfg):
    """The registered model with ``register()`` adding a version (each from its own run)."""
    client = MlflowClient(tracking_uri=tcfg.tracking_uri, registry_uri=tcfg.tracking_uri)
    registry = reg.Registry(tcfg)
    experiment = registry.experiment_id()

    def register() -> str:
        run = client.create_run(experiment)
        return registry.register(f"runs:/{run.info.run_id}/model", run.info.run_id, None)

    return tcfg, client, registry, register


def aliases(client, name) -> dict[str, str]:
    return {a: str(v) for a, v in client.get_registered_model(name).aliases.items()}


def history(client, name) -> list[str]:
    return json.loads(client.get_registered_model(name).tags[reg.HISTORY_TAG])


def test_the_probe_sequence_rolls_back_to_the_champion_before(store):
    # train v1 -> retrain promotes v2 -> champion moved to v1 by hand -> v2 deleted -> v3 promoted.
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    registry.make_champion(register())
    registry.make_champion(register())
    client.set_registered_model_alias(name, reg.CHAMPION, "1")  # the MLflow UI
    client.delete_model_version(name, "2")
    assert registry.make_champion(register()) == "1"
    assert history(client, name) == ["1", "3"]  # the hand move is recorded, the deleted v2 is gone

    assert rollback(cfg) == ("3", "1")
    assert aliases(client, name) == {"champion": "1"}
    assert history(client, name) == ["1"]
    assert client.get_model_version(name, "1").tags["driftloop.restored_from"] == "3"


def test_a_hand_move_back_is_recorded_even_when_nothing_is_deleted(store):
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    for _ in range(3):
        registry.make_champion(register())  # v1, v2, v3
    client.set_registered_model_alias(name, reg.CHAMPION, "1")  # a rollback by hand: v2 and v3 are out
    registry.make_champion(register())
    assert history(client, name) == ["1", "4"]
    assert rollback(cfg) == ("4", "1")  # not v3 or v2: they were not champion before v4


def test_a_history_written_before_the_fix_defers_to_the_previous_champion_alias(store):
    # What an existing registry holds after that sequence: v1 was champion before v3, the tag says v2.
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    for _ in range(3):
        register()
    client.set_registered_model_alias(name, reg.CHAMPION, "3")
    client.set_registered_model_alias(name, reg.PREVIOUS, "1")
    client.set_registered_model_tag(name, reg.HISTORY_TAG, json.dumps(["1", "2", "3"]))
    assert rollback(cfg) == ("3", "1")


def test_deleted_versions_are_skipped(store):
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    for _ in range(4):
        registry.make_champion(register())  # v1 .. v4
    client.delete_model_version(name, "3")  # the previous champion: its alias goes with it
    assert rollback(cfg) == ("4", "2")
    assert aliases(client, name) == {"champion": "2", "previous-champion": "1"}
    client.delete_model_version(name, "1")
    registry.make_champion(register())  # v5: a promotion drops deleted versions from the history
    assert history(client, name) == ["2", "5"]


def test_a_champion_moved_by_hand_outside_the_history_goes_back_to_the_one_it_replaced(store):
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    for _ in range(3):
        registry.make_champion(register())  # v1, v2, v3; previous-champion v2
    client.set_registered_model_alias(name, reg.CHAMPION, register())  # v4, never promoted by driftloop
    assert rollback(cfg) == ("4", "3")
    assert aliases(client, name) == {"champion": "3", "previous-champion": "2"}
    assert rollback(cfg) == ("3", "2")


def test_no_earlier_version_left_is_a_clear_error_and_the_alias_set_by_hand_fixes_it(store):
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    registry.make_champion(register())
    registry.make_champion(register())
    client.delete_model_version(name, "1")
    with pytest.raises(RegistryError) as err:
        rollback(cfg)
    message = str(err.value)
    assert "champion v2 has no previous champion to roll back to" in message
    assert "v1 no longer exist(s) (deleted)" in message
    assert "Set alias 'previous-champion' by hand" in message
    assert "not found" not in message and "MLflow rolling back failed" not in message
    assert aliases(client, name)["champion"] == "2"  # nothing moved

    client.set_registered_model_alias(name, reg.PREVIOUS, register())  # as the message says
    assert rollback(cfg) == ("2", "3")


def test_after_a_hand_rollback_the_stale_previous_champion_alias_is_not_followed(store):
    cfg, client, registry, register = store
    name = cfg.registered_model_name
    for _ in range(3):
        registry.make_champion(register())  # previous-champion v2, set when v3 was promoted
    client.set_registered_model_alias(name, reg.CHAMPION, "1")
    with pytest.raises(RegistryError, match=r"alias 'previous-champion' \(v2\) was set before 'champion' was "
                                            r"moved by hand to v1"):
        rollback(cfg)


@pytest.mark.parametrize("history_, old, new, expected", [
    ([], None, "1", ["1"]),
    (["1", "2"], "2", "3", ["1", "2", "3"]),
    (["1", "2", "3"], "3", "1", ["2", "3", "1"]),  # reinstating an earlier champion
    (["1", "2", "3"], "1", "4", ["1", "4"]),       # champion moved back to v1 by hand
    (["1", "2"], "5", "6", ["1", "2", "5", "6"]),  # champion moved by hand to a version never promoted
])
def test_promotion_history(history_, old, new, expected):
    assert reg._promoted_history(history_, old, new) == expected
