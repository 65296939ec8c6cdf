"""Throwaway Google service accounts for the vertex tests: an RSA key made at test
time (never a key file in the repository) and the key file's JSON around it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

KEY_BITS = 2048


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    client_email: str
    public_pem: bytes
    json_text: str


def make_account(
    token_uri: str, name: str = "gateway", *, quota_project_id: str | None = None
) -> ServiceAccount:
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    email = f"{name}@test-project.iam.gserviceaccount.com"
    info = {
        "type": "service_account",
        "project_id": "test-project",
        "private_key_id": "0" * 40,
        "private_key": private_pem,
        "client_email": email,
        "client_id": "1" * 21,
        "token_uri": token_uri,
    }
    if quota_project_id:
        info["quota_project_id"] = quota_project_id
    return ServiceAccount(email, public_pem, json.dumps(info))
