"""Schemathesis fuzzes every operation of the OpenAPI document against the in-process app.

With an admin key (so requests reach validation and the KB, not just the 401 check) and with
none: no response may be a 5xx, and every status, content type and body must be the one the
schema documents. The example count is bounded so the whole run stays well under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service_support import Keys, copy_kb
from trishield.service.app import create_app
from trishield.service.runtime import ServiceConfig

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
_state: dict[str, object] = {}


@pytest.fixture(scope="module")
def fuzzed_app(demo_kb_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    kb_dir = copy_kb(demo_kb_template, tmp_path_factory.mktemp("fuzz") / "kb")
    _state["keys"] = Keys.create(kb_dir)
    app = create_app(ServiceConfig(kb_dir=kb_dir, max_body_bytes=64 * 1024,
                                   allowed_members=("extractive",)))
    with TestClient(app):  # runs the lifespan (closes the KB handles at the end)
        yield app


def test_no_server_errors_and_schema_conformance(fuzzed_app) -> None:
    keys = _state["keys"]
    api_schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed_app)
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=8, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def fuzz(case) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {keys.admin}"},
                                   checks=CHECKS)
            case.call_and_validate(headers={"Authorization": "Bearer not-a-key"},
                                   checks=CHECKS)

        fuzz()
    # the fuzzer really reached the app: count what the app itself recorded
    metrics = fuzzed_app.state.runtime.metrics.registry
    served = sum(sample.value for family in metrics.collect()
                 if family.name == "trishield_http_requests" for sample in family.samples
                 if sample.name.endswith("_total"))
    print(f"schemathesis: {len(operations)} operations, {served:.0f} requests")
    assert served >= 4 * len(operations)
