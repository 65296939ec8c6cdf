"""The built-in mock LLM provider: OpenAI and Anthropic wire formats, scripted failures.

One core, two runners:

* The core (``answer()``) turns one request into a ``Reply``: a status, headers, timed
  body parts and how the exchange ends (done, TCP reset, or hang until the client
  leaves).  It does no I/O and never sleeps, so both runners send the same bytes.
* ``MockApp`` (``app`` / ``build_app()``) plays a ``Reply`` over ASGI for in-process use
  through ``httpx.ASGITransport``; a reset raises ``MockConnectionReset`` there.
* ``MockServer`` plays it over raw asyncio HTTP/1.1 (keep-alive, Content-Length request
  bodies, chunked streams), because only a real socket can send a TCP RST (``SO_LINGER``
  0, then abort) and see a client go away.  ``start_in_thread()`` runs one on a daemon
  thread for tests; ``serve()`` / ``main()`` and ``manage.py mock_upstream`` run one
  forever (uvloop if importable) as the benchmark upstream.

How a behaviour is picked: behaviours are kept per model id, with ``"*"`` as the
catch-all.  The requested model's chain is tried first, then the ``"*"`` chain, then the
built-in 200 answer.  A chain plays its counted entries (``times=N``) in the order they
were added, each until its count runs out, then its one permanent entry (the latest
added without ``times``).

Invariants: every non-control request is recorded once, as ``pending`` while in flight,
then with exactly one final outcome: ``completed``, ``error`` (a non-2xx reply or a
stream error event was sent), ``reset`` or ``cancelled`` (the client left first).  The
record keeps the newest ``MAX_RECORDS`` requests.  Nothing here imports Django, so this
module may be imported before settings are configured.
"""

from providers.mock_upstream.asgi import (
    Message,
    MockApp,
    Receive,
    Scope,
    Send,
    app,
    build_app,
)
from providers.mock_upstream.core import (
    ANY_MODEL,
    CHARS_PER_TOKEN,
    DEFAULT_BEHAVIOUR,
    DEFAULT_HOST,
    DEFAULT_MODEL_IDS,
    DEFAULT_PORT,
    JSON_TYPE,
    KNOBS,
    LISTEN_BACKLOG,
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    MAX_RECORDS,
    MS_PER_SECOND,
    RESET_MODES,
    SSE_TYPE,
    THREAD_START_TIMEOUT_SECONDS,
    THREAD_STOP_TIMEOUT_SECONDS,
    TOKEN_CACHE_SIZE,
    WAIT_POLL_SECONDS,
    Ending,
    MockBehaviour,
    MockConnectionReset,
    MockScript,
    MockState,
    Outcome,
    Part,
    Record,
    RequestLog,
    ResetMode,
)
from providers.mock_upstream.dispatch import answer, play
from providers.mock_upstream.reply import Reply, split_tokens
from providers.mock_upstream.server import (
    MockServer,
    RunningMock,
    build_parser,
    main,
    model_ids_from,
    serve,
    start_in_thread,
)

__all__ = [
    "ANY_MODEL",
    "CHARS_PER_TOKEN",
    "DEFAULT_BEHAVIOUR",
    "DEFAULT_HOST",
    "DEFAULT_MODEL_IDS",
    "DEFAULT_PORT",
    "JSON_TYPE",
    "KNOBS",
    "LISTEN_BACKLOG",
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "MAX_RECORDS",
    "MS_PER_SECOND",
    "RESET_MODES",
    "SSE_TYPE",
    "THREAD_START_TIMEOUT_SECONDS",
    "THREAD_STOP_TIMEOUT_SECONDS",
    "TOKEN_CACHE_SIZE",
    "WAIT_POLL_SECONDS",
    "Ending",
    "Message",
    "MockApp",
    "MockBehaviour",
    "MockConnectionReset",
    "MockScript",
    "MockServer",
    "MockState",
    "Outcome",
    "Part",
    "Receive",
    "Record",
    "Reply",
    "RequestLog",
    "ResetMode",
    "RunningMock",
    "Scope",
    "Send",
    "answer",
    "app",
    "build_app",
    "build_parser",
    "main",
    "model_ids_from",
    "play",
    "serve",
    "split_tokens",
    "start_in_thread",
]
