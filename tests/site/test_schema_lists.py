"""The schema documents every list the API pages as paginated, and the lists are paginated."""

from __future__ import annotations

import jsonschema
import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

LISTS = ["/api/v1/teams/", "/api/v1/verifications/", "/api/v1/auth/tokens/",
         "/api/v1/teams/{slug}/members/"]


@pytest.mark.parametrize("path", LISTS)
def test_lists_are_documented_as_paginated(path: str) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    get = schema["paths"][path]["get"]
    body = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert body.startswith("#/components/schemas/Paginated")
    assert {"limit", "offset"} <= {p["name"] for p in get["parameters"]}


@pytest.mark.parametrize("path", ["/api/v1/teams/", "/api/v1/verifications/",
                                  "/api/v1/auth/tokens/", "/api/v1/teams/vision-rl/members/"])
def test_lists_answer_the_paginated_shape(api_client_for, owner, path: str) -> None:
    body = api_client_for(owner).get(f"{path}?limit=1").json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert len(body["results"]) <= 1


@pytest.mark.parametrize("gpus", [8, 0.5, "8"])
def test_role_out_gpus_validates_what_the_api_returns(gpus: object) -> None:
    """`RoleOut.gpus` was oneOf integer/number/string: an integer matched two branches."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    gpus_schema = dict(schema["components"]["schemas"]["RoleOut"]["properties"]["gpus"])
    gpus_schema.pop("nullable", None)
    jsonschema.validate(gpus, gpus_schema)
