from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from clusters.validators import validate_api_url


@pytest.mark.parametrize("url", [
    "https://kube-apiserver:6443",
    "https://api.gpu-a.example.com",
    "https://10.0.0.1:6443",
    "https://[fd00::1]:6443",
    "http://127.0.0.1:8700/gpu-a",
])
def test_api_server_urls_that_real_fleets_use_are_accepted(url: str) -> None:
    validate_api_url(url)


@pytest.mark.parametrize("url", [
    "", "kube-apiserver:6443", "ftp://host", "https://user:pw@host", "https://host:99999",
    "https://host/?x=1", "https://-bad-.host", "https://[not-ipv6]:443", "https://host#frag",
])
def test_bad_api_server_urls_are_refused_with_a_clear_message(url: str) -> None:
    with pytest.raises(ValidationError, match="API server's http"):
        validate_api_url(url)
