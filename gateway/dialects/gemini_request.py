"""Gemini request translation (spec 10 §1): a canonical (OpenAI chat) body -> a
``GenerateContentRequest``, a ``CountTokensRequest`` and a
``BatchEmbedContentsRequest``; ``gateway.dialects.gemini`` sends them.

Request (canonical OpenAI chat body -> ``GenerateContentRequest``):

1. ``system``/``developer`` messages, wherever they sit, become ``systemInstruction``
   (their texts, one part each); a request of system messages only sends them as the
   user turn instead, since Gemini needs ``contents``.
2. Every other message becomes a ``contents`` turn, role ``user`` or ``model``:
   ``text`` parts; images as ``inlineData`` (``data:`` URLs) or ``fileData`` (other
   URLs, the MIME type guessed from the extension when it is a known one); ``file``
   parts with ``file_data`` and ``input_audio`` as ``inlineData``.  An assistant's
   ``tool_calls`` become ``functionCall`` parts (arguments as an object: text that is
   not a JSON object becomes ``{}``); a ``tool`` message becomes a
   ``functionResponse`` part in a user turn, its ``response`` the content when that
   is a JSON object, else ``{"result": <text>}``.  Gemini has no call ids: the
   function's name is recovered from the earlier call with the message's
   ``tool_call_id``, else the message's own ``name``, else the call at the same
   position of the last assistant turn; the responses of one turn are put in the
   order of its calls.
3. Consecutive turns of one role are merged; empty text parts and turns left without
   parts are dropped (Gemini rejects both).  ``reasoning_content`` of earlier
   assistant turns is not sent.
4. ``tools`` -> one ``{functionDeclarations: [...]}``; each ``parameters`` schema is
   cut down to the OpenAPI subset Gemini takes (``gemini_schema``), and left out when
   it declares no properties (Gemini rejects an empty object schema);
   ``tool_choice`` -> ``toolConfig.functionCallingConfig`` (``auto`` AUTO, ``none``
   NONE, ``required`` ANY, a named function ANY with ``allowedFunctionNames``), only
   when tools are sent.
5. ``generationConfig``: ``maxOutputTokens`` (``max_completion_tokens``, else
   ``max_tokens``), ``temperature``, ``topP``, ``topK``, ``candidateCount`` (``n``),
   ``stopSequences`` (``stop``; Gemini takes at most 5, the rest are named), ``seed``,
   ``presencePenalty``, ``frequencyPenalty``; ``response_format`` ``json_object`` ->
   ``responseMimeType: application/json``, ``json_schema`` -> that plus
   ``responseSchema``; ``reasoning_effort`` -> ``thinkingConfig`` with a budget by
   level and ``includeThoughts`` (``none`` or an unknown level sends nothing: some
   Gemini models refuse a zero budget).  A client's exact budget
   (``thinking_budget``, the Messages wire's ``thinking``) is sent instead of the
   level's, clamped to the range of the model's family (``THINKING_RANGES``, read
   from the model id); -1 (adaptive) lets the model decide; 0 (thinking disabled)
   turns thinking off where the model can (``THINKING_OFF``) and sends nothing
   elsewhere.  Every budget stays below ``maxOutputTokens``, which thoughts count
   against; a budget by level also leaves the answer 1 024 tokens or a quarter of
   it (without room for the family's minimum, no ``thinkingConfig`` is sent).

Left out of the attempt and named (``UNSENT``, spec 09 §2.6), when the client set
them to a value that asks for something: ``logprobs`` and ``top_logprobs``
(``responseLogprobs`` exists, but the reply's logprobs are not mapped back),
``logit_bias``, ``parallel_tool_calls: false`` (no counterpart), legacy
``functions``, ``web_search_options``, ``audio``/``modalities``, ``verbosity``,
stop sequences past the fifth (``stop[5]``…); content parts other than text,
images, audio and inline files (``messages[i].content[j]``: a file by id; in system
and tool messages, anything but text), tools other than functions (``tools[i]``).
Fields that change nothing in the answer (``user``, ``metadata``, ``store``,
``service_tier``, ...) and ``cache_control`` markers are left out silently.

Schemas (``gemini_schema``): Gemini's ``Schema`` is an OpenAPI 3.0 subset and rejects
unknown keys.  Kept: ``type``, ``format``, ``title``, ``description``, ``nullable``,
``enum`` (strings only; ``type: string`` added when missing), ``properties``,
``required`` (only names that are properties), ``items``, ``anyOf``,
``minItems``/``maxItems``,
``minProperties``/``maxProperties``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum``, ``example``, ``default``, ``propertyOrdering`` (a ``null``
value is left out).  Rewritten:
local ``$ref`` (``#/$defs/…``, ``#/definitions/…``) inlined (a recursive one is cut
to a bare ``object`` past depth 4); ``oneOf`` -> ``anyOf``; ``const`` -> a one-value
``enum``; a ``type`` list with ``null`` and a ``null`` branch of ``anyOf`` ->
``nullable: true``.  Stripped (with everything else unknown): ``$schema``, ``$id``,
``$defs``, ``definitions``, ``$comment``, ``additionalProperties``,
``patternProperties``, ``unevaluatedProperties``, ``allOf``, ``not``,
``if``/``then``/``else``, ``examples``, ``exclusiveMinimum``/``exclusiveMaximum``,
``multipleOf``, ``uniqueItems``, ``strict``, ``readOnly``/``writeOnly``.

Counting: ``count_body`` is the translated request without ``generationConfig``.
Embeddings: ``embed_body`` has one request per input string
(``outputDimensionality`` from ``dimensions``).
"""

from __future__ import annotations

import base64
import json
import re
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from gateway.dialects.base import JSON
from gateway.dialects.carry import (
    OPENAI_ONLY,
    TEXT_PARTS,
    Carry,
    arguments_object,
    is_false,
)
from gateway.dialects.gemini_ids import signature_of
from gateway.kernel.text import text_of

MAX_STOP_SEQUENCES = 5
DEFAULT_IMAGE_MEDIA_TYPE = "image/png"
#: reasoning_effort -> thinkingConfig.thinkingBudget (tokens)
THINKING_BUDGETS = {
    "minimal": 512,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "xhigh": 32768,
    "max": 32768,  # the most any Gemini model takes (capped per family)
}
#: the smallest budget every thinking Gemini model accepts
MIN_THINKING_BUDGET = 128
#: the budgets a model family takes, ``(pattern of the model id, lowest, highest)``,
#: the first match deciding: Gemini 2.5 Flash-Lite 512-24576, Flash 1-24576 (0 turns
#: thinking off), Pro 128-32768
THINKING_RANGES = (
    (re.compile(r"flash-lite"), 512, 24576),
    (re.compile(r"flash"), 1, 24576),
    (re.compile(r"pro"), 128, 32768),
)
#: the range of a model id no pattern names: what every Gemini 2.5 model takes
DEFAULT_THINKING_RANGE = (512, 24576)
#: the budget that thinks least, for a client that turns thinking off: 0 (off) on
#: Gemini 2.5 Flash and Flash-Lite, the lowest budget on 2.5 Pro (it always thinks);
#: other models get no ``thinkingConfig`` (some refuse one)
THINKING_OFF = (
    (re.compile(r"gemini-2\.5-flash"), 0),
    (re.compile(r"gemini-2\.5-pro"), 128),
)
#: ``thinkingBudget`` -1: the model decides how much to think
DYNAMIC_THINKING = -1
#: the canonical field with a client's exact budget (the Messages wire's
#: ``thinking``: ``budget_tokens``, 0 when disabled, -1 when adaptive)
THINKING_BUDGET_FIELD = "thinking_budget"
#: how deep a local ``$ref`` is inlined before it is cut to a bare object
MAX_REF_DEPTH = 4
_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
#: sampling fields copied into ``generationConfig`` under Gemini's name
_SAMPLING = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
_MIME_BY_EXTENSION = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "heic": "image/heic",
    "heif": "image/heif",
    "pdf": "application/pdf",
}
#: a working key on a ``functionResponse`` part: the position of its call
_ORDER = "_order"


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- request: schemas ---------------------------------------------------------------

_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "example",
        "default",
        "propertyOrdering",
    }
)


def _resolve_ref(ref: Any, root: JSON) -> JSON | None:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    node: Any = root
    for step in ref[2:].split("/"):
        if not isinstance(node, dict):
            return None
        node = node.get(step.replace("~1", "/").replace("~0", "~"))
    return node if isinstance(node, dict) else None


def _nullable_type(out: JSON, kind: Any) -> None:
    if not isinstance(kind, list):
        if isinstance(kind, str) and kind != "null":
            out["type"] = kind
        return
    kinds = [k for k in kind if isinstance(k, str) and k != "null"]
    if len(kinds) < len(kind):
        out["nullable"] = True
    if len(kinds) == 1:
        out["type"] = kinds[0]
    elif kinds:
        out["anyOf"] = [{"type": k} for k in kinds]


def _schema(node: Any, root: JSON, depth: int) -> JSON:
    if not isinstance(node, dict):
        return {}
    if "$ref" in node:
        target = _resolve_ref(node["$ref"], root)
        if target is None or depth >= MAX_REF_DEPTH:
            return {"type": "object"}
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _schema(merged, root, depth + 1)
    out: JSON = {}
    _nullable_type(out, node.get("type"))
    for key, value in node.items():
        if key in _SCHEMA_KEYS and key != "type":
            _schema_key(out, key, value, root, depth)
    if isinstance(node.get("const"), str):
        out["enum"] = [node["const"]]
    if "enum" in out:
        out.setdefault("type", "string")  # Gemini's enums are strings
    branches = node.get("anyOf", node.get("oneOf"))
    if isinstance(branches, list):
        _branches(out, branches, root, depth)
    if isinstance(out.get("required"), list):
        names = set(_dict(out.get("properties")))
        out["required"] = [n for n in out["required"] if n in names]
        if not out["required"]:
            del out["required"]
    return out


def _schema_key(out: JSON, key: str, value: Any, root: JSON, depth: int) -> None:
    """One kept key of a schema node (``anyOf`` is read by ``_branches``)."""
    if key == "anyOf":
        return
    if key == "properties":
        if isinstance(value, dict):
            out[key] = {
                str(name): _schema(sub, root, depth) for name, sub in value.items()
            }
    elif key == "items":
        out[key] = _schema(value, root, depth)
    elif key == "enum":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
    elif value is not None:  # a null ``default``, ``title``...: nothing to say
        out[key] = value


def _branches(out: JSON, branches: list[Any], root: JSON, depth: int) -> None:
    kept = []
    for branch in branches:
        if isinstance(branch, dict) and branch.get("type") == "null":
            out["nullable"] = True
            continue
        kept.append(_schema(branch, root, depth))
    if len(kept) == 1:
        for key, value in kept[0].items():
            out.setdefault(key, value)
    elif kept:
        out["anyOf"] = kept


def gemini_schema(schema: Any) -> JSON:
    """A JSON Schema cut down to what Gemini's ``Schema`` accepts (module doc)."""
    root = _dict(schema)
    return _schema(root, root, 0)


# --- request: content ---------------------------------------------------------------


def _data_url(url: str) -> JSON | None:
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        return None
    media_type, *params = header.split(";")
    if "base64" in params:
        data = payload
    else:
        data = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    return {
        "inlineData": {"mimeType": media_type or DEFAULT_IMAGE_MEDIA_TYPE, "data": data}
    }


def _file_data(url: str) -> JSON:
    data: JSON = {"fileUri": url}
    extension = urlsplit(url).path.rsplit(".", 1)[-1].lower()
    if extension in _MIME_BY_EXTENSION:
        data["mimeType"] = _MIME_BY_EXTENSION[extension]
    return {"fileData": data}


def _image_part(part: JSON) -> JSON | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        return None
    return _data_url(url) if url.startswith("data:") else _file_data(url)


def _file_part(part: JSON) -> JSON | None:
    data = _dict(part.get("file")).get("file_data")
    if isinstance(data, str) and data.startswith("data:"):
        return _data_url(data)
    return None  # a file id names the client's OpenAI storage: nothing to send


def _audio_part(part: JSON) -> JSON | None:
    audio = _dict(part.get("input_audio"))
    data, fmt = audio.get("data"), audio.get("format")
    if not isinstance(data, str) or not data:
        return None
    mime = f"audio/{fmt}" if isinstance(fmt, str) and fmt else "audio/wav"
    return {"inlineData": {"mimeType": mime, "data": data}}


def _text_part(part: JSON) -> JSON | None:
    text = part.get(str(part.get("type")))
    return {"text": text} if isinstance(text, str) and text else None


_PART_READERS = {
    "text": _text_part,
    "refusal": _text_part,
    "image_url": _image_part,
    "file": _file_part,
    "input_audio": _audio_part,
}


def _part(part: Any) -> JSON | None:
    """One OpenAI content part -> one Gemini part, or None when it has none."""
    if isinstance(part, str):
        return {"text": part} if part else None
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    reader = _PART_READERS.get(kind) if isinstance(kind, str) else None
    return reader(part) if reader is not None else None


def _parts(content: Any) -> list[JSON]:
    items = content if isinstance(content, list) else [content]
    return [found for item in items if (found := _part(item)) is not None]


def _function_response(content: Any) -> JSON:
    text = text_of(content, "\n\n")
    try:
        parsed = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"result": text}


class _Turns:
    """The ``contents`` being built, with what tool results need of earlier calls."""

    def __init__(self) -> None:
        self.contents: list[JSON] = []
        self.names: dict[str, str] = {}  # call id -> function name
        self.last_calls: list[tuple[str, str]] = []  # (id, name) of the last turn
        self.answered = 0  # tool results since the last assistant turn

    def add(self, role: str, parts: list[JSON]) -> None:
        if not parts:
            return
        if self.contents and self.contents[-1]["role"] == role:
            self.contents[-1]["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})

    def assistant(self, message: JSON) -> None:
        parts = _parts(message.get("content"))
        calls: list[tuple[str, str]] = []
        for call in message.get("tool_calls") or ():
            function = _dict(_dict(call).get("function"))
            name = str(function.get("name") or "")
            if not name:
                continue
            ident = str(_dict(call).get("id") or "")
            part: JSON = {
                "functionCall": {
                    "name": name,
                    "args": arguments_object(function.get("arguments")),
                }
            }
            signature = signature_of(ident)
            if signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
            calls.append((ident, name))
            if ident:
                self.names[ident] = name
        self.last_calls = calls
        self.answered = 0
        self.add("model", parts)

    def tool(self, message: JSON) -> None:
        ident = str(message.get("tool_call_id") or "")
        order = [i for i, _ in self.last_calls]
        # the call it answers: by id, else by order (spec 10 §1)
        position = order.index(ident) if ident and ident in order else self.answered
        self.answered += 1
        name = self.names.get(ident) or message.get("name")
        if not name and position < len(self.last_calls):
            name = self.last_calls[position][1]
        part: JSON = {
            "functionResponse": {
                "name": str(name or ""),
                "response": _function_response(message.get("content")),
            },
            _ORDER: position,
        }
        self.add("user", [part])

    def finish(self) -> list[JSON]:
        for turn in self.contents:
            parts = turn["parts"]
            if any(_ORDER in p for p in parts):
                # the responses in the order of their calls; the rest after them
                last = len(parts)  # list.sort empties the list while it sorts
                parts.sort(key=lambda p: p.get(_ORDER, last))
                for p in parts:
                    p.pop(_ORDER, None)
        return self.contents


def contents_of(messages: Any) -> tuple[list[JSON], list[JSON]]:
    """OpenAI messages -> (system instruction parts, Gemini ``contents``)."""
    system: list[JSON] = []
    turns = _Turns()
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            system += [p for p in _parts(message.get("content")) if "text" in p]
        elif role == "user":
            turns.add("user", _parts(message.get("content")))
        elif role == "assistant":
            turns.assistant(message)
        elif role == "tool":
            turns.tool(message)
    return system, turns.finish()


# --- request: the rest -------------------------------------------------------------


def _declarations(tools: Any) -> list[JSON]:
    out: list[JSON] = []
    for tool in tools if isinstance(tools, list) else ():
        tool = _dict(tool)
        if tool.get("type", "function") != "function":
            continue
        function = _dict(tool.get("function"))
        if not function.get("name"):
            continue
        entry: JSON = {"name": str(function["name"])}
        if function.get("description"):
            entry["description"] = str(function["description"])
        parameters = gemini_schema(function.get("parameters"))
        if parameters.get("properties"):
            entry["parameters"] = parameters
        out.append(entry)
    return out


def _tool_config(choice: Any) -> JSON | None:
    if isinstance(choice, str) and choice in _TOOL_MODES:
        return {"functionCallingConfig": {"mode": _TOOL_MODES[choice]}}
    name = _dict(_dict(choice).get("function")).get("name")
    if isinstance(name, str) and name:
        return {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}
        }
    return None


def _stops(stop: Any) -> list[str]:
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list):
        return []
    return [s for s in stops if isinstance(s, str) and s][:MAX_STOP_SEQUENCES]


def _response_format(config: JSON, value: Any) -> None:
    fmt = _dict(value)
    if fmt.get("type") == "json_object":
        config["responseMimeType"] = "application/json"
    elif fmt.get("type") == "json_schema":
        config["responseMimeType"] = "application/json"
        schema = _dict(fmt.get("json_schema")).get("schema")
        if isinstance(schema, dict):
            config["responseSchema"] = gemini_schema(schema)


def thinking_range(model: str) -> tuple[int, int]:
    """The lowest and highest ``thinkingBudget`` of ``model`` (``THINKING_RANGES``)."""
    name = model.lower()
    for pattern, low, high in THINKING_RANGES:
        if pattern.search(name):
            return low, high
    return DEFAULT_THINKING_RANGE


#: a budget by level leaves the answer at least this many of ``maxOutputTokens``
#: (or a quarter of it), as on Anthropic's wire
MIN_ANSWER_TOKENS = 1024


def _fit_budget(
    config: JSON, budget: int, low: int, *, room: bool = False
) -> int | None:
    """``budget`` under ``maxOutputTokens`` (thoughts count against it), or None
    when no budget of at least ``low`` fits there.  ``room``: a budget the gateway
    chose (by level) also leaves the answer ``MIN_ANSWER_TOKENS`` or a quarter of
    the limit; a client's exact budget only stays below it, as Anthropic's does."""
    limit = config.get("maxOutputTokens")
    if isinstance(limit, int) and not isinstance(limit, bool):
        answer = max(MIN_ANSWER_TOKENS, limit // 4) if room else 1
        budget = min(budget, limit - answer)
    return budget if budget >= low else None


def _thinking_off(config: JSON, model: str) -> None:
    name = model.lower()
    for pattern, budget in THINKING_OFF:
        if pattern.search(name):
            config["thinkingConfig"] = {"thinkingBudget": budget}
            return


def _thinking(config: JSON, effort: Any, exact: Any, model: str) -> None:
    """``thinkingConfig``: the client's exact budget (``THINKING_BUDGET_FIELD``)
    clamped to the model's range, else a budget by ``reasoning_effort`` level.  An
    exact 0 turns thinking off (``THINKING_OFF``); any other budget goes only with a
    ``reasoning_effort``, which a model known not to reason does not get."""
    if not isinstance(exact, int) or isinstance(exact, bool):
        exact = None
    if exact == 0:
        _thinking_off(config, model)
        return
    if effort is None or effort == "none":
        return
    low, high = thinking_range(model)
    if exact == DYNAMIC_THINKING:
        budget: int | None = DYNAMIC_THINKING
    elif exact is not None and exact > 0:
        budget = _fit_budget(config, min(max(exact, low), high), low)
    else:
        level = THINKING_BUDGETS.get(effort) if isinstance(effort, str) else None
        if level is None:
            return  # an unknown level: the model's default
        floor = max(low, MIN_THINKING_BUDGET)
        budget = _fit_budget(config, min(level, high), floor, room=True)
    if budget is not None:
        config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True}


def generation_config(body: JSON, model: str = "") -> JSON:
    config: JSON = {}
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            config["maxOutputTokens"] = value
            break
    for ours, theirs in _SAMPLING.items():
        if _number(body.get(ours)):
            config[theirs] = body[ours]
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        config["candidateCount"] = n
    stops = _stops(body.get("stop"))
    if stops:
        config["stopSequences"] = stops
    _response_format(config, body.get("response_format"))
    _thinking(
        config, body.get("reasoning_effort"), body.get(THINKING_BUDGET_FIELD), model
    )
    return config


def _part_sent(part: JSON, text_only: bool) -> bool:
    """Whether Gemini gets a content part (``_PART_READERS``): text everywhere;
    images, audio and inline files in user and assistant turns (a file by id names
    the client's OpenAI storage)."""
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return True
    if text_only:
        return False
    if kind == "file":
        data = _dict(part.get("file")).get("file_data")
        return isinstance(data, str) and data.startswith("data:")
    return kind in ("image_url", "input_audio")


#: what ``generate_body`` cannot carry, named per attempt (spec 09 §2.6, module doc)
UNSENT = Carry(
    fields=MappingProxyType({**OPENAI_ONLY, "parallel_tool_calls": is_false}),
    part=_part_sent,
    max_stops=MAX_STOP_SEQUENCES,
)


def generate_body(body: JSON, model: str = "") -> JSON:
    """A canonical chat request -> a ``GenerateContentRequest`` (a new dict);
    ``model`` decides the thinking budgets it takes."""
    system, contents = contents_of(body.get("messages"))
    if not contents and system:  # Gemini needs contents; the instruction is the prompt
        contents, system = [{"role": "user", "parts": system}], []
    out: JSON = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    declarations = _declarations(body.get("tools"))
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
        tool_config = _tool_config(body.get("tool_choice"))
        if tool_config is not None:
            out["toolConfig"] = tool_config
    config = generation_config(body, model)
    if config:
        out["generationConfig"] = config
    return out


def count_body(body: JSON, *, model: str) -> JSON:
    """A canonical chat request -> a ``CountTokensRequest``: the whole
    ``generateContentRequest`` (so the system instruction and the tools count, as
    they do in a Messages count), without its ``generationConfig``, which changes
    no input token."""
    request = generate_body(body)
    request.pop("generationConfig", None)
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    return {"generateContentRequest": {"model": name, **request}}


def embed_body(body: JSON, *, model: str) -> JSON:
    """An OpenAI embeddings request -> a ``BatchEmbedContentsRequest``."""
    raw = body.get("input")
    items: list[Any] = [raw] if isinstance(raw, str) else list(raw or ())
    if items and all(isinstance(t, int) for t in items):
        items = [items]  # one list of token ids
    name = model if model.startswith("models/") else f"models/{model}"
    dimensions = body.get("dimensions")
    requests = []
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item)
        request: JSON = {"model": name, "content": {"parts": [{"text": text}]}}
        if isinstance(dimensions, int) and not isinstance(dimensions, bool):
            request["outputDimensionality"] = dimensions
        requests.append(request)
    return {"requests": requests}
