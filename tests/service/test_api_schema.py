"""Schema-driven tests of the API (schemathesis against the app's own OpenAPI, in process,
embedded broker in a temporary data dir, a real Celery worker in a thread so /readyz is
ready): no 5xx, every 4xx is problem+json, every response matches its documented status,
content type, headers and schema."""

from __future__ import annotations

import json

import pytest
import schemathesis
from celery.contrib.testing.worker import start_worker
from schemathesis.checks import negative_data_rejection, positive_data_acceptance
from hypothesis import HealthCheck, settings

from service.app import create_app
from service.auth import API_KEY_HEADER
from service.settings import Settings

pytestmark = pytest.mark.filterwarnings("ignore")

API_KEY = "schema-test-key"


@schemathesis.check
def client_errors_are_problem_json(ctx, response, case) -> bool | None:
    """RFC 9457: every 4xx answers application/problem+json with title, status and detail."""
    if 400 <= response.status_code < 500:
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type == "application/problem+json", f"{response.status_code} is {content_type}"
        if case.method.upper() != "HEAD":
            body = json.loads(response.content)
            assert body["status"] == response.status_code and body["title"] and body["detail"]
    return None


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("schema") / "data"
    app = create_app(Settings(data_dir=data_dir, max_upload_bytes=1 << 20, max_voxels=100_000,
                              max_input_bytes=16 << 20, api_keys={API_KEY: "lab-a"}))
    with start_worker(app.state.celery, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case):
    excluded = []
    if case.operation.method.upper() == "POST":
        # A form's file is "binary" to OpenAPI, which cannot say "a NIfTI file": schema-valid
        # uploads are rightly refused (422).
        excluded.append(positive_data_acceptance)
    if case.operation.path == "/v1/jobs":
        # An empty object as ?cursor= serializes to no parameter at all, a valid request that
        # this check counts as accepted invalid data; unknown parameters are refused, which
        # tests/service/test_api_regressions.py checks.
        excluded.append(negative_data_rejection)
    case.call_and_validate(headers={API_KEY_HEADER: API_KEY}, additional_checks=[client_errors_are_problem_json],
                           excluded_checks=excluded)
