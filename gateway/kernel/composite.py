"""Pure pieces of the composite strategies ``fusion`` and ``pipeline`` (spec 03 §6-7).

* fusion: the panel body (no tools, ``stream: false``), the quorum
  ``m = min(max(2, minPanel), P)``, the judge body (the original body plus one ``user``
  message: the directive, then the answers labelled ``Source 1..N`` in declared order,
  never naming a model), the tools-bypass test and the tuning defaults.
* pipeline: the body of stage ``k`` of ``N``.
* both: the answer text of a completion and the usage sum over several calls.

Invariants: no input body is mutated (every builder returns a fresh dict); the judge
message names no model; a completion without text has no answer (``None``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.kernel.text import text_of

#: spec 03 §2.2 defaults of ``fusionTuning``
MIN_PANEL_DEFAULT = 2
STRAGGLER_GRACE_MS_DEFAULT = 8000
PANEL_HARD_TIMEOUT_MS_DEFAULT = 90000
#: spec 03 §6 step 4: the documented minimum quorum
MIN_QUORUM = 2

#: request fields a fusion panel call never carries (spec 03 §6 step 3)
PANEL_DROPPED_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "stream_options")
#: request fields a non-final pipeline stage never carries (spec 03 §7)
STAGE_DROPPED_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "stream_options")

FUSION_DIRECTIVE = (
    "You are given several independent candidate answers to the last request in the "
    "conversation above, labelled as sources below. Weigh where they agree, where they "
    "contradict each other, what each covers only partially, the unique insights of "
    "each, and what all of them missed. Use your own knowledge, and overrule a "
    "consensus that is wrong. Write one complete final answer addressed to the user, "
    "in the user's language. Never mention the sources, a panel, or other models, "
    "and do not make any tool calls."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionTuning:
    min_panel: int = MIN_PANEL_DEFAULT
    straggler_grace_ms: int = STRAGGLER_GRACE_MS_DEFAULT
    panel_hard_timeout_ms: int = PANEL_HARD_TIMEOUT_MS_DEFAULT


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def fusion_tuning(config: Mapping[str, Any]) -> FusionTuning:
    raw = config.get("fusionTuning")
    tuning = raw if isinstance(raw, Mapping) else {}
    return FusionTuning(
        min_panel=_int(tuning.get("minPanel"), MIN_PANEL_DEFAULT),
        straggler_grace_ms=_int(
            tuning.get("stragglerGraceMs"), STRAGGLER_GRACE_MS_DEFAULT
        ),
        panel_hard_timeout_ms=_int(
            tuning.get("panelHardTimeoutMs"), PANEL_HARD_TIMEOUT_MS_DEFAULT
        ),
    )


def quorum(min_panel: int, panel_size: int) -> int:
    """Spec 03 §6 step 4: ``m = min(max(2, minPanel), P)``."""
    return min(max(MIN_QUORUM, min_panel), panel_size)


def tools_bypass(body: Mapping[str, Any]) -> bool:
    """Non-empty ``tools`` and ``tool_choice`` absent or not ``"none"`` (§6 step 2)."""
    tools = body.get("tools")
    return isinstance(tools, list) and bool(tools) and body.get("tool_choice") != "none"


def panel_body(body: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k not in PANEL_DROPPED_FIELDS}
    out["stream"] = False
    return out


def answer_text(completion: Mapping[str, Any] | None) -> str | None:
    """Trimmed text of ``choices[0].message.content``; ``None`` when there is none."""
    if not isinstance(completion, Mapping):
        return None
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    first = choices[0]
    message = first.get("message") if isinstance(first, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str | list):
        return None
    content = text_of(content)
    text = content.strip()
    return text or None


def judge_message(answers: Iterable[str]) -> str:
    sources = "\n\n".join(
        f"Source {number}:\n{answer}" for number, answer in enumerate(answers, 1)
    )
    return f"{FUSION_DIRECTIVE}\n\n{sources}"


def judge_body(body: Mapping[str, Any], answers: Iterable[str]) -> dict[str, Any]:
    """The original body (``stream`` kept) plus one appended ``user`` message."""
    out = dict(body)
    messages = list(body.get("messages") or [])
    messages.append({"role": "user", "content": judge_message(answers)})
    out["messages"] = messages
    return out


def stage_prompt(config: Mapping[str, Any], index: int) -> str | None:
    prompts = config.get("stagePrompts")
    if not isinstance(prompts, list) or index >= len(prompts):
        return None
    prompt = prompts[index]
    return prompt if isinstance(prompt, str) and prompt else None


def stage_body(
    body: Mapping[str, Any],
    *,
    index: int,
    count: int,
    prompt: str | None,
    previous: str | None,
) -> dict[str, Any]:
    """Stage ``index`` (0-based) of ``count`` (spec 03 §7)."""
    final = index == count - 1
    if final:
        out = dict(body)
    else:
        out = {k: v for k, v in body.items() if k not in STAGE_DROPPED_FIELDS}
        out["stream"] = False
    system = [{"role": "system", "content": prompt}] if prompt is not None else []
    if index == 0:
        out["messages"] = [*system, *(body.get("messages") or [])]
    else:
        out["messages"] = [*system, {"role": "user", "content": previous or ""}]
    return out


def sum_usage(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, int] | None:
    """``prompt_tokens``/``completion_tokens``/``total_tokens`` summed; None if none."""
    prompt = completion = 0
    seen = False
    for usage in usages:
        if not isinstance(usage, Mapping):
            continue
        p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(p, int) and not isinstance(p, bool):
            prompt, seen = prompt + p, True
        if isinstance(c, int) and not isinstance(c, bool):
            completion, seen = completion + c, True
    if not seen:
        return None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
