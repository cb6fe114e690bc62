"""Property-based fuzzing of the HTTP API against its own OpenAPI schema: no 5xx, every answer conforms."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from mha_explorer.server import create_app

pytestmark = pytest.mark.api

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_never_fails_and_always_answers_in_its_schema(case):
    response = case.call()
    case.validate_response(response, checks=CHECKS)
