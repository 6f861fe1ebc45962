"""No token, however malformed, is anything but a principal or a 401 (SECURITY.md).

Hypothesis builds JWTs with arbitrary JSON headers and claim values, validly signed with the
HS256 secret where the header says HS256, and against a JWKS of an RSA and an EC key with any
``alg``/``kid`` in the header. ``Authenticator.authenticate`` must return a ``Principal`` or
raise ``AuthenticationError``; any other exception would be a 500 over HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import Principal
from server.auth import AuthenticationError, Authenticator, JwtVerifier

from .test_auth import SECRET, jwks_server

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
CLAIM_NAMES = ["sub", "scope", "scp", "resources", "exp", "nbf", "iat", "aud", "iss"]
ALG_NAMES = ["HS256", "HS384", "RS256", "RS512", "ES256", "ES384", "PS256", "EdDSA", "none", "", "hs256"]
VALID_CLAIMS = {"sub": "alice", "scope": "runs:read", "resources": "*"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@st.composite
def headers(draw: st.DrawFn, *, algs: st.SearchStrategy[Any], kids: st.SearchStrategy[Any]) -> dict[str, Any]:
    extra = st.dictionaries(st.sampled_from(["typ", "cty", "crit", "jku", "x5u", "b64"]), JSON, max_size=2)
    header: dict[str, Any] = draw(st.one_of(st.just({}), extra))
    header["alg"] = draw(algs)
    if draw(st.booleans()):
        header["kid"] = draw(kids)
    return header


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    values: dict[str, Any] = {"sub": "alice", "exp": int(time.time()) + 300}
    for name in draw(st.lists(st.sampled_from(CLAIM_NAMES), unique=True, min_size=1, max_size=3)):
        values[name] = draw(JSON)
    return values


def _signed(header: dict[str, Any], body: dict[str, Any], algorithm: str, key: Any) -> str:
    """A JWS over exactly ``header`` and ``body``, signed with a real key, whatever the header says."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}"
    signature = jwt.get_algorithm_by_name(algorithm).sign(signing_input.encode(), key)
    return f"{signing_input}.{_b64(signature)}"


def _check(authenticator: Authenticator, token: str) -> None:
    try:
        principal = asyncio.run(authenticator.authenticate(f"Bearer {token}"))
    except AuthenticationError:
        return
    assert isinstance(principal, Principal)


def _hs256() -> Authenticator:
    return Authenticator(enabled=True, api_keys={}, jwt_verifier=JwtVerifier(secret=SECRET))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(body=claims())
def test_any_claims_of_a_validly_signed_token_give_a_principal_or_a_refusal(body: dict[str, Any]) -> None:
    _check(_hs256(), _signed({"alg": "HS256", "typ": "JWT"}, body, "HS256", SECRET.encode()))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(header=headers(algs=st.sampled_from(ALG_NAMES) | JSON, kids=JSON))
def test_any_header_of_an_hs256_signed_token_gives_a_principal_or_a_refusal(header: dict[str, Any]) -> None:
    _check(_hs256(), _signed(header, {**VALID_CLAIMS, "exp": int(time.time()) + 300}, "HS256", SECRET.encode()))


@pytest.fixture(scope="module")
def jwks() -> Iterator[tuple[str, rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey]]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    keys = [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())), "kid": "rsa", "alg": "RS256"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())), "kid": "ec"},
    ]
    with jwks_server(keys) as url:
        yield url, rsa_key, ec_key


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    header=headers(algs=st.sampled_from(ALG_NAMES), kids=st.sampled_from(["rsa", "ec", "missing"]) | JSON),
    signer=st.sampled_from(["rsa", "ec", "hmac"]),
)
def test_any_header_against_a_jwks_gives_a_principal_or_a_refusal(
    jwks: tuple[str, rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey], header: dict[str, Any], signer: str
) -> None:
    url, rsa_key, ec_key = jwks
    authenticator = Authenticator(enabled=True, api_keys={}, jwt_verifier=JwtVerifier(jwks_url=url))
    key: Any = {"rsa": rsa_key, "ec": ec_key, "hmac": SECRET.encode()}[signer]
    algorithm = {"rsa": "RS256", "ec": "ES256", "hmac": "HS256"}[signer]
    _check(authenticator, _signed(header, {**VALID_CLAIMS, "exp": int(time.time()) + 300}, algorithm, key))
