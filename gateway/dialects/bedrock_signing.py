"""Amazon Bedrock's endpoints and AWS Signature V4 (spec 10 §1), for the ``bedrock``
dialect (``gateway.dialects.bedrock``, which re-exports what it used to define here).

The runtime endpoint follows from the region
(``bedrock-runtime.{region}.amazonaws.com``), the control plane's from the
runtime's (``bedrock.`` for ``bedrock-runtime.``; any other host serves both); a
model id is percent-encoded whole in the path.  Every
request is signed (service ``bedrock``) over the exact bytes sent, the clock passed
in: botocore computes the canonical request, the string to sign and the signature,
imported on first use.  A key never appears in a ``repr``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from gateway.kernel.types import Auth

SERVICE = "bedrock"
SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"
#: the credential's secrets (spec 10 §3)
KEY_ID = "aws_access_key_id"
SECRET = "aws_secret_access_key"
SESSION_TOKEN = "aws_session_token"


def runtime_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def control_url(base_url: str) -> str:
    """The control plane's base for a runtime base URL (``bedrock-runtime.`` ->
    ``bedrock.``); any other host (a proxy, the mock) serves both."""
    parts = urlsplit(base_url.rstrip("/"))
    host = parts.netloc
    for runtime, control in (
        ("bedrock-runtime-fips.", "bedrock-fips."),
        ("bedrock-runtime.", "bedrock."),
    ):
        if host.startswith(runtime):
            host = control + host[len(runtime) :]
            break
    return parts._replace(netloc=host).geturl()


def model_url(base_url: str, model: str, action: str) -> str:
    """``{base}/model/{modelId}/{action}``, the id percent-encoded whole."""
    return f"{base_url.rstrip('/')}/model/{quote(model, safe='-_.~')}/{action}"


class AwsKey(NamedTuple):
    """What SigV4 signs with; never in a ``repr``."""

    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        return f"AwsKey(region={self.region!r})"


def sign_request(
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    key: AwsKey,
) -> dict[str, str]:
    """The SigV4 headers (``Authorization``, ``X-Amz-Date``, and
    ``X-Amz-Security-Token`` with a session token) for one request, signed over
    ``body`` at ``now`` (unix seconds); botocore computes the canonical request,
    the string to sign and the signature."""
    from botocore.auth import SigV4Auth  # first use: off the import path
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    stamp = time.strftime(SIGV4_TIMESTAMP, time.gmtime(now))
    added = {"X-Amz-Date": stamp}
    if key.session_token:
        added["X-Amz-Security-Token"] = key.session_token
    request = AWSRequest(
        method=method, url=url, data=body, headers={**headers, **added}
    )
    request.context["timestamp"] = stamp
    credentials = Credentials(key.access_key, key.secret_key, key.session_token)
    signer = SigV4Auth(credentials, SERVICE, key.region)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signed = signer.signed_headers(signer.headers_to_sign(request))
    added["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={signer.scope(request)}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return added


class _Signer:
    """A ``Signer`` bound to one credential and region (never in a ``repr``)."""

    __slots__ = ("_key",)

    def __init__(self, auth: Auth) -> None:
        self._key = AwsKey(
            str(auth.setting("region", "")),
            auth.secrets.get(KEY_ID, ""),
            auth.secrets.get(SECRET, ""),
            auth.secrets.get(SESSION_TOKEN) or None,
        )

    def __repr__(self) -> str:
        return f"<SigV4 signer {self._key.region}>"

    def __call__(
        self,
        *,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        now: float,
    ) -> dict[str, str]:
        return sign_request(
            method=method,
            url=url,
            headers=headers,
            body=body,
            now=now,
            key=self._key,
        )


def signer_for(auth: Auth | None) -> _Signer | None:
    """The signer of a credential with keys (the default chain's are resolved into
    ``secrets`` before a request is built); None when there are none."""
    if auth is None or not auth.secrets.get(KEY_ID) or not auth.secrets.get(SECRET):
        return None
    return _Signer(auth)
