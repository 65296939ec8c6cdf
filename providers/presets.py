"""Presets for well-known providers (spec 10 §2): ``providers[].preset`` fills the
kind, the base URL, the auth style and the models.dev provider id, so a model row
needs only its id; anything given explicitly overrides the preset.

A preset whose kind this gateway does not have yet is refused at validation, naming
the kind.  Base URLs and models.dev ids are the providers' published ones.
Perplexity's API lives at the host's root (``/chat/completions``): its host is one of
``dialects.base.ROOT_API_HOSTS``, which the ``/v1`` rule for bare hosts leaves as
given.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Preset:
    kind: str
    #: "" = the operator must give one (a self-hosted server)
    base_url: str
    #: the provider id in the models.dev catalog ("" = none)
    models_dev_id: str = ""
    #: False for servers that take no key (Ollama, LM Studio)
    needs_key: bool = True
    label: str = ""


PRESETS = MappingProxyType(
    {
        "openai": Preset(
            "openai", "https://api.openai.com/v1", "openai", label="OpenAI"
        ),
        "anthropic": Preset(
            "anthropic", "https://api.anthropic.com", "anthropic", label="Anthropic"
        ),
        "gemini": Preset(
            "gemini",
            "https://generativelanguage.googleapis.com",
            "google",
            label="Google Gemini API",
        ),
        "vertex": Preset("vertex", "", "google-vertex", label="Google Vertex AI"),
        "bedrock": Preset("bedrock", "", "amazon-bedrock", label="Amazon Bedrock"),
        "azure": Preset("azure", "", "azure", label="Azure OpenAI"),
        "openrouter": Preset(
            "openai", "https://openrouter.ai/api/v1", "openrouter", label="OpenRouter"
        ),
        "groq": Preset(
            "openai", "https://api.groq.com/openai/v1", "groq", label="Groq"
        ),
        "together": Preset(
            "openai", "https://api.together.xyz/v1", "togetherai", label="Together AI"
        ),
        "fireworks": Preset(
            "openai",
            "https://api.fireworks.ai/inference/v1",
            "fireworks-ai",
            label="Fireworks AI",
        ),
        "deepseek": Preset(
            "openai", "https://api.deepseek.com/v1", "deepseek", label="DeepSeek"
        ),
        "mistral": Preset(
            "openai", "https://api.mistral.ai/v1", "mistral", label="Mistral AI"
        ),
        "xai": Preset("openai", "https://api.x.ai/v1", "xai", label="xAI"),
        "cerebras": Preset(
            "openai", "https://api.cerebras.ai/v1", "cerebras", label="Cerebras"
        ),
        "perplexity": Preset(
            "openai", "https://api.perplexity.ai", "perplexity", label="Perplexity"
        ),
        "ollama": Preset(
            "openai",
            "http://127.0.0.1:11434/v1",
            "ollama-cloud",
            needs_key=False,
            label="Ollama",
        ),
        "lmstudio": Preset(
            "openai",
            "http://127.0.0.1:1234/v1",
            "lmstudio",
            needs_key=False,
            label="LM Studio",
        ),
        "vllm": Preset("openai", "", "", needs_key=False, label="vLLM"),
    }
)
