"""Amazon Bedrock Runtime dialect: Converse and ConverseStream (spec 10 §1).

Clients only ever see OpenAI Chat Completions shapes, so the dialect translates both
ways.  Every request is signed with AWS Signature V4 (service ``bedrock``) over the
exact bytes sent, the clock passed in (``sign_request``); the signing itself and the
binary event-stream decoding are botocore's, imported on first use.

This module holds the credential checks, the request translation and the dialect;
``bedrock_signing`` the endpoints and SigV4, ``bedrock_reply`` the reply, model
list and error translation, ``bedrock_stream`` the event-stream decoding and the
stream translation.  Their names are re-exported here, so importers need not know.

Endpoints (``{base}``: the provider's ``base_url``, else
``https://bedrock-runtime.{region}.amazonaws.com`` from the connection's region):
``POST {base}/model/{modelId}/converse`` and ``/converse-stream``, ``POST
{base}/model/{modelId}/invoke`` for embeddings; the model lists of the control plane
(``bedrock.{region}.amazonaws.com``: the same host when ``base_url`` names another
one) at ``GET /foundation-models`` and ``GET /inference-profiles``.  The model id is
percent-encoded whole in the path (``…-v1:0`` -> ``…-v1%3A0``); an inference-profile
id (``us.anthropic.…``) or an ARN is a model id like any other.

Request (canonical OpenAI chat body -> ``ConverseRequest``):

1. ``system``/``developer`` messages, wherever they sit, become ``system`` text blocks.
2. Every other message becomes a ``messages`` turn, role ``user`` or ``assistant``,
   of content blocks: ``text``; images from ``data:`` URLs as ``image`` blocks
   (``format`` from the media type: png, jpeg, gif, webp; Bedrock takes no image
   URL, so other URLs and other formats are left out and named, below); files
   from ``data:`` URLs (a Messages ``document``, a Responses ``input_file``) as
   ``document`` blocks (``format`` from the media type: pdf, csv, doc, docx, xls,
   xlsx, html, txt, md; ``name`` from the file name in the characters Converse
   allows plus 8 hex of the data's digest, ``document_name``; file ids and other
   formats are named, below); audio is named too; an assistant's ``tool_calls`` as
   ``toolUse``
   blocks (arguments that are not a JSON object become ``{}``); a ``tool`` message
   as a ``toolResult`` block in a user turn (its text; ``{"json": {}}`` when empty,
   since Bedrock refuses an empty text; a message flagged ``is_error``, a Messages
   client's failed ``tool_result``, gets ``status: "error"`` and its text without
   the ``Error:`` prefix the flag repeats).  A part with a ``cache_control`` marker
   is followed by a ``cachePoint`` block (in ``system`` too): the prompt up to it
   is cached.
3. Consecutive turns of one role are merged (Bedrock requires alternation); empty
   texts and turns left without blocks are dropped; a conversation of system
   messages only sends them as the user turn.
4. ``tools`` -> ``toolConfig.tools[].toolSpec`` (``inputSchema.json``: the
   parameters, an empty object schema when none); ``tool_choice`` ``auto`` ->
   ``{"auto": {}}``, ``required`` -> ``{"any": {}}``, a named function ->
   ``{"tool": {"name"}}``, ``none`` -> no ``toolChoice`` (Bedrock has no "none" and
   needs ``toolConfig`` whenever the turns hold tool blocks).  A request with tool
   blocks in its turns and no ``tools`` still gets a ``toolConfig``: one tool per
   name called in the history (an empty object schema, a description saying it is
   not offered for new calls), since Bedrock refuses tool blocks without one and
   turning the history into text would lose which result answers which call.
5. ``inferenceConfig``: ``maxTokens`` (``max_completion_tokens``, else
   ``max_tokens``), ``temperature``, ``topP``, ``stopSequences`` (``stop``);
   ``top_k`` goes in ``additionalModelRequestFields`` (the name Anthropic's and
   Cohere's models take on Bedrock).

Left out of the attempt and named (``unsent``, spec 09 §2.6), when the client set
them to a value that asks for something: ``response_format`` (other than text),
``reasoning_effort`` (other than ``none``), ``n`` above 1, ``seed``,
``presence_penalty``/``frequency_penalty`` other than 0, ``logprobs``,
``top_logprobs``, ``logit_bias``, ``parallel_tool_calls: false`` and
``tool_choice: "none"`` (Converse has neither), legacy ``functions``,
``web_search_options``, ``audio``/``modalities``, ``verbosity``; content parts
other than text and the images above (``messages[i].content[j]``; in system and
tool messages, anything but text), tools other than functions (``tools[i]``).
Fields that change nothing in the answer (``user``, ``metadata``, ``store``,
``service_tier``, ...) are left out silently.

Reply (Converse gives no id: neither completions nor stream chunks carry one, so the
gateway's request id applies, unique per request):
``text`` blocks joined into ``content`` (``None`` when there are only calls),
``reasoningContent`` into ``reasoning_content``, ``toolUse`` into ``tool_calls``
(their ``toolUseId`` as the id).  ``stopReason``: ``end_turn``/``stop_sequence`` ->
``stop``, ``max_tokens`` -> ``length``, ``tool_use`` -> ``tool_calls``,
``guardrail_intervened``/``content_filtered`` -> ``content_filter``, anything else
-> ``stop``.  ``usage``: ``prompt_tokens`` is ``inputTokens`` + cache reads + cache
writes (Bedrock counts them apart, as Anthropic does),
``prompt_tokens_details.cached_tokens`` the reads, ``cache_creation_input_tokens``
the writes (what the gateway bills cache writes from).

Stream: the body is AWS event-stream frames (``stream_decoder``: botocore checks
each frame's CRCs); a frame's ``:event-type`` names the event and its payload is
the event's JSON.  ``messageStart`` gives the role chunk; ``contentBlockStart`` with
a ``toolUse`` a call's start; ``contentBlockDelta`` text, reasoning or a piece of a
call's ``input`` JSON; ``messageStop`` the finish chunk; ``metadata`` (after it) the
usage-only chunk, and the stream is then ``finished``.  An exception frame
(``:message-type: exception``, ``:exception-type: throttlingException``, …) raises
``StreamErrorEvent``, classified as the same error would be as a reply.

Errors: the type comes from the ``x-amzn-errortype`` header, else the body's
``__type`` (``com.amazon.coral.service#UnrecognizedClientException``), the message
from ``message``/``Message``.  ``UpstreamError.code`` is the exception's name and
``type`` an OpenAI-style type (``ThrottlingException`` -> ``rate_limit_error``, …),
so ``kernel.errors`` classifies them as spec 10 §1 says; a ``ValidationException``
that names an invalid model identifier gets the code ``model_not_found``.

Embeddings: ``/model/{modelId}/invoke``.  A Cohere model (``cohere.…``) gets
``{"texts": [...], "input_type": "search_document"}`` (``embedding_types:
["float"]``), one call per 96 texts (Cohere's limit); any other (Titan) one call per
input, ``{"inputText": text}``, since Titan embeds one string per call: several
inputs make a call whose ``parts`` the sending layer runs (at most 8 at once) and
joins in input order, a failed part failing the attempt.  ``dimensions`` is sent
(with ``normalize: true``) to Titan Text Embeddings V2 when it is 256, 512 or 1024,
the sizes it makes, and as
``output_dimension`` to Cohere Embed v4 when it is one of those or 1536; any other
value, and ``dimensions`` to Cohere v3 or Titan V1 (whose bodies have no such
field), is left out and named (``embeddings_unsent``), unless it is the model's own
size.  Usage: ``prompt_tokens`` (and ``total_tokens``) is Titan's
``inputTextTokenCount``, else the reply header ``X-Amzn-Bedrock-Input-Token-Count``
(the only count a Cohere reply gives); with neither the usage is left out and the
gateway records its estimate.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote_to_bytes

from gateway.dialects.base import (
    JSON,
    CredentialProblem,
    CredentialShape,
    NoCountTokens,
    NoPassthrough,
    UpstreamCall,
)
from gateway.dialects.bedrock_reply import (
    ERROR_TEXT_MAX_CHARS as ERROR_TEXT_MAX_CHARS,
)
from gateway.dialects.bedrock_reply import (
    INPUT_TOKENS_HEADER as INPUT_TOKENS_HEADER,
)
from gateway.dialects.bedrock_reply import as_dict
from gateway.dialects.bedrock_reply import error_from_reply as error_from_reply
from gateway.dialects.bedrock_reply import error_of as error_of
from gateway.dialects.bedrock_reply import exception_name as exception_name
from gateway.dialects.bedrock_reply import map_stop_reason as map_stop_reason
from gateway.dialects.bedrock_reply import map_usage as map_usage
from gateway.dialects.bedrock_reply import model_ids as model_ids
from gateway.dialects.bedrock_reply import parse_converse_reply as parse_converse_reply
from gateway.dialects.bedrock_reply import parse_embed_reply as parse_embed_reply
from gateway.dialects.bedrock_signing import KEY_ID, SECRET, SESSION_TOKEN
from gateway.dialects.bedrock_signing import SERVICE as SERVICE
from gateway.dialects.bedrock_signing import SIGV4_TIMESTAMP as SIGV4_TIMESTAMP
from gateway.dialects.bedrock_signing import AwsKey as AwsKey
from gateway.dialects.bedrock_signing import control_url as control_url
from gateway.dialects.bedrock_signing import model_url as model_url
from gateway.dialects.bedrock_signing import runtime_url as runtime_url
from gateway.dialects.bedrock_signing import sign_request as sign_request
from gateway.dialects.bedrock_signing import signer_for as signer_for
from gateway.dialects.bedrock_stream import EVENT_STREAM_TYPE as EVENT_STREAM_TYPE
from gateway.dialects.bedrock_stream import EXCEPTION_EVENT as EXCEPTION_EVENT
from gateway.dialects.bedrock_stream import (
    BedrockStreamTranslator as BedrockStreamTranslator,
)
from gateway.dialects.bedrock_stream import EventStreamDecoder as EventStreamDecoder
from gateway.dialects.carry import (
    OPENAI_ONLY,
    SAMPLING_EXTRAS,
    TEXT_PARTS,
    Carry,
    arguments_object,
    is_false,
    is_none_choice,
    not_none_effort,
    not_text_format,
)
from gateway.dialects.tool_ids import BEDROCK_IDS, fit_messages
from gateway.kernel.errors import UpstreamError
from gateway.kernel.text import text_of
from gateway.kernel.types import Auth

#: the AWS region shape (``us-east-1``, ``us-gov-west-1``, ``eu-central-2``)
REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")

_SYSTEM_ROLES = frozenset({"system", "developer"})
_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
#: media type -> Converse ``document`` format (the formats Converse names)
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
#: what a Converse document ``name`` may not hold (letters, digits, single spaces,
#: hyphens, parentheses and square brackets only)
_NAME_REFUSED = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")
_NAME_MAX_CHARS = 200
#: the block that ends a cached prefix (a part's ``cache_control`` marker)
CACHE_POINT: JSON = {"cachePoint": {"type": "default"}}
_TOOL_CHOICES: dict[str, JSON] = {"auto": {"auto": {}}, "required": {"any": {}}}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- credentials -------------------------------------------------------------------

_DEFAULT = "use_default_credentials"


def _check_region(value: Any) -> str | None:
    if not isinstance(value, str) or not REGION.fullmatch(value):
        return "must be an AWS region such as us-east-1"
    return None


def check_provider(provider: Mapping[str, Any]) -> list[CredentialProblem]:
    """A provider's ``region``, when it gives one for all its connections."""
    region = provider.get("region")
    problem = _check_region(region) if region is not None else None
    return [("region", problem)] if problem else []


def check_connection(
    connection: Mapping[str, Any], provider: Mapping[str, Any]
) -> list[CredentialProblem]:
    """Keys or the default chain (not both), and a region from the connection or
    its provider (spec 10 §3)."""
    problems: list[CredentialProblem] = []
    region = connection.get("region") or provider.get("region")
    if region is None or region == "":
        problems.append(("region", "is required for kind 'bedrock'"))
    elif (problem := _check_region(region)) is not None:
        problems.append(("region", problem))
    default = connection.get(_DEFAULT)
    if default is not None and not isinstance(default, bool):
        problems.append((_DEFAULT, "must be true or false"))
    keys = [name for name in (KEY_ID, SECRET, SESSION_TOKEN) if connection.get(name)]
    if default is True:
        problems += [(name, f"not used with {_DEFAULT}: true") for name in keys]
        return problems
    for name in (KEY_ID, SECRET):
        if name not in keys:
            problems.append(
                (name, f"is required for kind 'bedrock' (or {_DEFAULT}: true)")
            )
    return problems


BEDROCK_CREDENTIALS = CredentialShape(
    api_key=False,
    secrets=(KEY_ID, SECRET, SESSION_TOKEN),
    settings=("region", _DEFAULT),
    provider_settings=("region",),
    check_provider=check_provider,
    check_connection=check_connection,
)


# --- request -------------------------------------------------------------------------


def _image_url(part: JSON) -> Any:
    image = part.get("image_url")
    return image.get("url") if isinstance(image, dict) else image


def _image_format(url: Any) -> tuple[str, int] | None:
    """The Converse ``format`` of a ``data:`` URL's image and where its data starts,
    read from the header alone; None when Converse cannot take it (Bedrock takes
    image bytes only, of the formats it names)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    comma = url.find(",")
    if comma < 0:
        return None
    fmt = _IMAGE_FORMATS.get(url[len("data:") : comma].split(";", 1)[0].lower())
    return (fmt, comma) if fmt is not None else None


def _image_block(part: JSON) -> JSON | None:
    url = _image_url(part)
    found = _image_format(url)
    if found is None:
        return None
    fmt, comma = found
    payload = url[comma + 1 :]
    if "base64" in url[len("data:") : comma].split(";")[1:]:
        data = payload
    else:
        data = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    return {"image": {"format": fmt, "source": {"bytes": data}}}


def _file_data(part: JSON) -> tuple[str, str, str] | None:
    """A ``file`` part's Converse ``format``, its base64 data and its file name,
    when it is a ``data:`` URL of a format Converse takes (a file id names the
    client's OpenAI storage: nothing to send)."""
    file = part.get("file")
    if not isinstance(file, dict):
        return None
    url = file.get("file_data")
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    header, comma, payload = url[len("data:") :].partition(",")
    media_type, *params = header.split(";")
    fmt = _DOCUMENT_FORMATS.get(media_type.strip().lower())
    if not comma or fmt is None:
        return None
    if "base64" not in params:
        payload = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    filename = file.get("filename")
    return fmt, payload, filename if isinstance(filename, str) else ""


def document_name(filename: str, data: str) -> str:
    """A Converse document ``name``: the file name's stem in the characters
    Converse allows, and 8 hex of the data's digest, so two documents of one
    request never share a name (Converse refuses that) and one document keeps its
    name from turn to turn (a cache point before it stays valid)."""
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    stem = " ".join(_NAME_REFUSED.sub("-", stem).split()).strip("-") or "document"
    digest = hashlib.sha256(data.encode("ascii", "replace")).hexdigest()[:8]
    return f"{stem[: _NAME_MAX_CHARS - 9]}-{digest}"


def _document_block(part: JSON) -> JSON | None:
    found = _file_data(part)
    if found is None:
        return None
    fmt, data, filename = found
    name = document_name(filename, data)
    return {"document": {"format": fmt, "name": name, "source": {"bytes": data}}}


def _part_sent(part: JSON, text_only: bool) -> bool:
    """Whether Converse gets a content part: text, and the images and documents it
    can take in user and assistant turns (system and tool messages are sent as
    text)."""
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return True
    if text_only:
        return False
    if kind == "image_url":
        return _image_format(_image_url(part)) is not None
    return kind == "file" and _file_data(part) is not None


#: what ``converse_body`` cannot carry, named per attempt (spec 09 §2.6, module doc)
unsent = Carry(
    fields=MappingProxyType(
        {
            **OPENAI_ONLY,
            **SAMPLING_EXTRAS,
            "response_format": not_text_format,
            "reasoning_effort": not_none_effort,
            "parallel_tool_calls": is_false,
            "tool_choice": is_none_choice,
        }
    ),
    part=_part_sent,
)


def _blocks(content: Any) -> list[JSON]:
    """OpenAI message content -> Converse content blocks (text, images and
    documents)."""
    out: list[JSON] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            if part:
                out.append({"text": part})
            continue
        part = as_dict(part)
        kind = part.get("type")
        block: JSON | None = None
        if kind in ("text", "refusal"):
            text = part.get(kind)
            if isinstance(text, str) and text:
                block = {"text": text}
        elif kind == "image_url":
            block = _image_block(part)
        elif kind == "file":
            block = _document_block(part)
        if block is not None:
            out.append(block)
            if isinstance(part.get("cache_control"), dict):
                out.append(dict(CACHE_POINT))  # caches the prompt up to here
    return out


def _assistant_blocks(message: JSON) -> list[JSON]:
    blocks = _blocks(message.get("content"))
    for call in message.get("tool_calls") or ():
        call = as_dict(call)
        function = as_dict(call.get("function"))
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        blocks.append(
            {
                "toolUse": {
                    "toolUseId": str(call.get("id") or ""),
                    "name": name,
                    "input": arguments_object(function.get("arguments")),
                }
            }
        )
    return blocks


#: what a failed tool result's text starts with in the canonical form (the
#: Messages wire's ``is_error``, which the message's ``is_error`` flag repeats)
ERROR_PREFIX = "Error: "


def _tool_result(message: JSON) -> JSON:
    text = text_of(message.get("content"), "\n\n")
    failed = message.get("is_error") is True
    if failed:  # the status says it; the text is the tool's own
        text = "" if text == "Error" else text.removeprefix(ERROR_PREFIX)
    result: JSON = {
        "toolUseId": str(message.get("tool_call_id") or ""),
        "content": [{"text": text}] if text else [{"json": {}}],
    }
    if failed:
        result["status"] = "error"
    return {"toolResult": result}


def converse_messages(messages: Any) -> tuple[list[JSON], list[JSON]]:
    """OpenAI messages -> (``system`` blocks, Converse ``messages``)."""
    system: list[JSON] = []
    turns: list[JSON] = []

    def add(role: str, blocks: list[JSON]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            system += [
                b
                for b in _blocks(message.get("content"))
                if "text" in b or "cachePoint" in b
            ]
        elif role == "user":
            add("user", _blocks(message.get("content")))
        elif role == "assistant":
            add("assistant", _assistant_blocks(message))
        elif role == "tool":
            add("user", [_tool_result(message)])
    if not turns and system:  # Converse needs messages: the instruction is the prompt
        turns, system = [{"role": "user", "content": system}], []
    return system, turns


def _tool_config(tools: Any, choice: Any) -> JSON | None:
    specs: list[JSON] = []
    for tool in tools if isinstance(tools, list) else ():
        tool = as_dict(tool)
        if tool.get("type", "function") != "function":
            continue
        function = as_dict(tool.get("function"))
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        spec: JSON = {"name": name}
        if function.get("description"):
            spec["description"] = str(function["description"])
        parameters = function.get("parameters")
        if not isinstance(parameters, dict) or not parameters:
            parameters = {"type": "object", "properties": {}}
        spec["inputSchema"] = {"json": parameters}
        specs.append({"toolSpec": spec})
    if not specs:
        return None
    config: JSON = {"tools": specs}
    if isinstance(choice, str) and choice in _TOOL_CHOICES:
        config["toolChoice"] = _TOOL_CHOICES[choice]
    else:
        name = as_dict(as_dict(choice).get("function")).get("name")
        if isinstance(name, str) and name:
            config["toolChoice"] = {"tool": {"name": name}}
    return config


#: what a tool declared only for the calls in the history says of itself
HISTORY_TOOL_DESCRIPTION = (
    "Called earlier in this conversation; not offered for new calls."
)


def _history_tool_config(turns: list[JSON]) -> JSON | None:
    """A ``toolConfig`` for a request that declares no tools but whose turns hold
    tool blocks (Bedrock refuses those turns without one): the names of the calls
    in the history, each with an empty object schema."""
    names = [
        block["toolUse"]["name"]
        for turn in turns
        for block in turn["content"]
        if "toolUse" in block
    ]
    if not names:  # results with no call: Bedrock refuses those whatever is sent
        return None
    specs = [
        {
            "toolSpec": {
                "name": name,
                "description": HISTORY_TOOL_DESCRIPTION,
                "inputSchema": {"json": {"type": "object", "properties": {}}},
            }
        }
        for name in dict.fromkeys(names)
    ]
    return {"tools": specs}


def inference_config(body: JSON) -> JSON:
    config: JSON = {}
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            config["maxTokens"] = value
            break
    if _number(body.get("temperature")):
        config["temperature"] = body["temperature"]
    if _number(body.get("top_p")):
        config["topP"] = body["top_p"]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if isinstance(stops, list):
        kept = [s for s in stops if isinstance(s, str) and s]
        if kept:
            config["stopSequences"] = kept
    return config


def _unique_document_names(messages: list[JSON]) -> None:
    """Converse refuses two documents of one request with one name: the same file
    sent again (in a later turn, or twice in one) is named ``<name> [2]``, ``[3]``...
    in the order it appears."""
    seen: dict[str, int] = {}
    for message in messages:
        for block in message.get("content") or ():
            document = block.get("document") if isinstance(block, dict) else None
            if not isinstance(document, dict):
                continue
            name = document["name"]
            count = seen.get(name, 0) + 1
            seen[name] = count
            if count > 1:
                document["name"] = f"{name[: _NAME_MAX_CHARS - 8]} [{count}]"


def converse_body(body: JSON) -> JSON:
    """A canonical chat request -> a ``ConverseRequest`` body (a new dict)."""
    system, messages = converse_messages(
        fit_messages(body.get("messages"), BEDROCK_IDS)
    )
    _unique_document_names(messages)
    out: JSON = {"messages": messages}
    if system:
        out["system"] = system
    config = inference_config(body)
    if config:
        out["inferenceConfig"] = config
    tool_config = _tool_config(body.get("tools"), body.get("tool_choice"))
    if tool_config is None:
        tool_config = _history_tool_config(messages)
    if tool_config is not None:
        out["toolConfig"] = tool_config
    if _number(body.get("top_k")):
        out["additionalModelRequestFields"] = {"top_k": body["top_k"]}
    return out


def _inputs(body: JSON) -> list[str]:
    raw = body.get("input")
    items: list[Any] = [raw] if isinstance(raw, str) else list(raw or ())
    if items and all(isinstance(t, int) for t in items):
        items = [items]  # one list of token ids
    return [item if isinstance(item, str) else json.dumps(item) for item in items]


_COHERE = re.compile(r"(^|[./])cohere\.")


def is_cohere(model: str) -> bool:
    """A Cohere embedding model (``cohere.embed-…``, a profile or an ARN of one)."""
    return _COHERE.search(model) is not None


#: the sizes Titan Text Embeddings V2 makes (``dimensions``; 1024 is its own)
TITAN_V2_DIMENSIONS = frozenset({256, 512, 1024})
_TITAN_V2 = re.compile(r"(^|[./])amazon\.titan-embed-text-v2")
#: the sizes Cohere Embed v4 makes (``output_dimension``; 1536 is its own)
COHERE_V4_DIMENSIONS = frozenset({256, 512, 1024, 1536})
_COHERE_V4 = re.compile(r"(^|[./])cohere\.embed-v4")
#: the vector size of a model that takes no ``dimensions`` (asking it for that size
#: asks for nothing, so it is not named)
_OWN_SIZES = (
    (re.compile(r"(^|[./])cohere\.embed-(english|multilingual)-v3"), 1024),
    (re.compile(r"(^|[./])amazon\.titan-embed-(text-v1|g1-text-02)"), 1536),
)


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sends_dimensions(model: str, dimensions: int) -> bool:
    """Whether ``model``'s invoke body takes ``dimensions`` of this size: Titan V2
    takes 256, 512 and 1024 (``dimensions``), Cohere Embed v4 those and 1536
    (``output_dimension``); Cohere v3's and Titan V1's bodies have no such field."""
    if _COHERE_V4.search(model) is not None:
        return dimensions in COHERE_V4_DIMENSIONS
    return dimensions in TITAN_V2_DIMENSIONS and _TITAN_V2.search(model) is not None


def embeddings_unsent(model: str, body: JSON) -> tuple[str, ...]:
    """What ``invoke_embed_bodies`` leaves out of an OpenAI embeddings ``body`` for
    ``model``, named per attempt (spec 09 §2.6): a ``dimensions`` the model cannot
    make, unless it is the model's own size.  ``encoding_format`` is carried (the
    wire encodes the floats as base64) and ``user`` changes nothing in the answer."""
    dimensions = _size(body.get("dimensions"))
    if dimensions is None or sends_dimensions(model, dimensions):
        return ()
    for pattern, size in _OWN_SIZES:
        if size == dimensions and pattern.search(model) is not None:
            return ()
    return ("dimensions",)


#: the most texts Cohere's embed models take in one invoke on Bedrock
COHERE_TEXTS_PER_CALL = 96


def invoke_embed_bodies(body: JSON, *, model: str) -> list[JSON]:
    """An OpenAI embeddings request -> the model's own invoke bodies: Cohere's one
    per 96 texts (``COHERE_TEXTS_PER_CALL``), Titan's one per input (its
    ``inputText`` is one string)."""
    texts = _inputs(body)
    dimensions = _size(body.get("dimensions"))
    sized = dimensions is not None and sends_dimensions(model, dimensions)
    if is_cohere(model):
        output = {"output_dimension": dimensions} if sized else {}
        return [
            {
                "texts": texts[start : start + COHERE_TEXTS_PER_CALL],
                "input_type": "search_document",
                "embedding_types": ["float"],
                **output,
            }
            for start in range(0, max(len(texts), 1), COHERE_TEXTS_PER_CALL)
        ]
    extra: JSON = {}
    if sized:
        extra = {"dimensions": dimensions, "normalize": True}
    return [{"inputText": text, **extra} for text in texts]


# --- the dialect ----------------------------------------------------------------


class BedrockDialect(NoPassthrough, NoCountTokens):
    kind = "bedrock"
    label = "Amazon Bedrock"
    #: the endpoint follows from the region (``base_url`` overrides it)
    needs_base_url = False
    #: the kind is not a models.dev provider id (``amazon-bedrock`` is, which the
    #: preset sets as the provider's ``models_dev_id``)
    catalog = False
    reasoning_effort = False
    in_process = False
    ratelimit_prefixes: tuple[str, ...] = ()
    wire = "chat"
    embeddings = True
    embeddings_token_ids = False  # text only
    credentials: CredentialShape = BEDROCK_CREDENTIALS

    def connection_base_url(self, base_url: str, auth: Auth | None) -> str | None:
        """The region's runtime endpoint when the provider names no ``base_url``."""
        if base_url or auth is None:
            return None
        region = auth.setting("region")
        return runtime_url(region) if isinstance(region, str) and region else None

    def stream_decoder(self) -> EventStreamDecoder:
        return EventStreamDecoder()

    def _call(
        self,
        url: str,
        body: JSON,
        auth: Auth | None,
        *,
        operation: str = "chat",
        accept: str = "application/json",
    ) -> UpstreamCall:
        return UpstreamCall(
            url=url,
            headers={"content-type": "application/json", "accept": accept},
            body=body,
            operation=operation,
            sign=signer_for(auth),
        )

    def build_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        stream: bool,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        if stream:
            return self._call(
                model_url(base_url, model, "converse-stream"),
                converse_body(body),
                auth,
                accept=EVENT_STREAM_TYPE,
            )
        return self._call(
            model_url(base_url, model, "converse"), converse_body(body), auth
        )

    def parse_completion(self, payload: Any, *, created: int) -> JSON:
        return parse_converse_reply(payload, created=created)

    def embeddings_request(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        body: JSON,
        auth: Auth | None = None,
    ) -> UpstreamCall:
        """One call; Titan's several inputs as one call per input (``parts``)."""
        url = model_url(base_url, model, "invoke")
        headers = {"content-type": "application/json", "accept": "application/json"}
        sign = signer_for(auth)
        calls = tuple(
            UpstreamCall(
                url=url,
                headers=headers,
                body=part,
                operation="embeddings",
                sign=sign,
            )
            for part in invoke_embed_bodies(body, model=model)
        )
        if len(calls) == 1:
            return calls[0]
        return dataclasses.replace(calls[0], parts=calls)

    def list_models_request(
        self, *, base_url: str, api_key: str | None, auth: Auth | None = None
    ) -> UpstreamCall:
        """``ListFoundationModels``, then ``ListInferenceProfiles`` (``also``)."""
        control = control_url(base_url)
        sign = signer_for(auth)
        accept = {"accept": "application/json"}
        profiles = UpstreamCall(
            url=f"{control}/inference-profiles?maxResults=1000",
            headers=dict(accept),
            body={},
            method="GET",
            operation="models",
            sign=sign,
        )
        return UpstreamCall(
            url=f"{control}/foundation-models",
            headers=dict(accept),
            body={},
            method="GET",
            operation="models",
            sign=sign,
            also=(profiles,),
        )

    def parse_model_list(self, payload: Any) -> list[str]:
        return model_ids(payload)

    def parse_embeddings(
        self, payload: Any, headers: Mapping[str, str] | None = None
    ) -> JSON:
        return parse_embed_reply(payload, headers)

    def stream_translator(
        self, *, created: int, raw: bool = False
    ) -> BedrockStreamTranslator:
        return BedrockStreamTranslator(created=created, raw=raw)

    def parse_error(
        self, payload: Any, text: str, headers: Mapping[str, str] | None = None
    ) -> UpstreamError:
        return error_from_reply(payload, text, headers)
