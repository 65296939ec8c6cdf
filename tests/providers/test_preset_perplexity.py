"""``preset: perplexity`` (spec 10 §2): Perplexity's API lives at the host's root, so
its bare base URL is used as given instead of getting the ``/v1`` prefix."""

from __future__ import annotations

from gateway.dialects.base import endpoint_url
from gateway.dialects.openai import OpenAIDialect
from providers.validation import Checker, validate_provider


def test_the_perplexity_preset_fills_kind_base_url_and_the_catalog_id():
    check = Checker("providers[0]")
    clean = validate_provider(
        {
            "slug": "pplx",
            "preset": "perplexity",
            "connections": [{"name": "main", "api_key": "pplx-secret-1234567890"}],
            "models": [{"id": "sonar"}],
        },
        check,
    )
    assert check.problems == []
    assert (clean["kind"], clean["base_url"], clean["preset"]) == (
        "openai",
        "https://api.perplexity.ai",
        "perplexity",
    )
    assert clean["settings"] == {"models_dev_id": "perplexity"}


def test_a_perplexity_call_goes_to_the_hosts_root():
    check = Checker("providers[0]")
    clean = validate_provider({"slug": "pplx", "preset": "perplexity"}, check)
    dialect = OpenAIDialect()
    call = dialect.build_request(
        base_url=clean["base_url"],
        api_key="pplx-secret-1234567890",
        model="sonar",
        body={"messages": [{"role": "user", "content": "hi"}]},
        stream=False,
    )
    assert call.url == "https://api.perplexity.ai/chat/completions"
    assert call.headers["authorization"] == "Bearer pplx-secret-1234567890"
    listed = dialect.list_models_request(base_url=clean["base_url"], api_key="k")
    assert listed.url == "https://api.perplexity.ai/models"


def test_only_root_api_hosts_skip_the_v1_prefix():
    assert endpoint_url("https://api.perplexity.ai/", "/chat/completions") == (
        "https://api.perplexity.ai/chat/completions"
    )
    # a path given explicitly is used as given, on that host too
    assert endpoint_url("https://api.perplexity.ai/v1", "/responses") == (
        "https://api.perplexity.ai/v1/responses"
    )
    assert endpoint_url("https://perplexity.example.com", "/chat/completions") == (
        "https://perplexity.example.com/v1/chat/completions"
    )
