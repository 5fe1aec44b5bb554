"""The OpenAPI document against the server, by schemathesis: requests generated from the schema
(valid and invalid ones) must get a declared status, never a 5xx, with bodies and content types
as documented. Bounded: ``MAX_EXAMPLES`` per operation."""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, negative_data_rejection, not_a_server_error,
                                 response_schema_conformance, status_code_conformance)

from tests.faults.conftest import STUB_WORKER, TOKEN, fault_config

MAX_EXAMPLES = 100


@pytest.fixture
def api_schema(tmp_path):
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher

    cfg = fault_config(tmp_path / "home", server={"max_body_bytes": 256 * 1024})
    root = cfg.home / "retrains"
    root.mkdir(parents=True)
    (root / "behaviour").write_text("hang")
    daemon = Daemon(cfg, launcher=ProcessLauncher(root, module=STUB_WORKER))
    yield schemathesis.openapi.from_asgi("/openapi.json", daemon.build_app())
    daemon.stop(grace=1)


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schemathesis.check
def negative_data_refused(ctx, response, case):
    """schemathesis's negative_data_rejection, with 413 (over ``server.max_body_bytes``) counted as the
    refusal it is: a generated invalid body can be large enough to be refused for its size first."""
    if response.status_code == 413:
        return None
    return negative_data_rejection(ctx, response, case)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms_to_its_schema(api_schema, mode):
    """Positive cases: schema-valid requests; negative ones: requests the schema forbids, which must
    also be refused (4xx), not stored."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 9
    checks = CHECKS + ([negative_data_refused] if mode is GenerationMode.NEGATIVE else [])
    failures: list[str] = []
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate])
        def run(case) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=checks)

        try:
            run()
        except Unsatisfiable:  # nothing to get wrong: an operation without parameters or body
            assert mode is GenerationMode.NEGATIVE, operation.label
        except Exception as exc:  # noqa: BLE001 - gathered, so one run shows every failing operation
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
