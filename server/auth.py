"""Authentication: bearer tokens -> ``runtime.Principal`` (SECURITY.md).

Two kinds of ``Authorization: Bearer <token>``: API keys, configured by their SHA-256 with a
name, scopes and resources (``RUNSGATE_API_KEYS``), and JWTs (PyJWT; HS256, or RS256/ES256 from
a JWKS URL; ``sub``, ``scope``/``scp``, the resources claim, ``exp`` required). Details:
SECURITY.md "Authentication".
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from runtime import ANONYMOUS, Principal

from .settings import SecuritySettings

logger = logging.getLogger("runsgate.auth")

_TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
"""RFC 6750 ``b64token``: what a bearer token may contain."""
MAX_TOKEN_LENGTH = 8192
JWKS_COOLDOWN = 30.0
"""Seconds between two fetches of the JWKS caused by tokens naming a key id it lacks (PyJWT's cooldown)."""


class AuthenticationError(Exception):
    """No valid credentials. ``token_given`` tells a missing token from a bad one, ``malformed``
    a request RFC 6750 calls ``invalid_request`` (a credential repeated)."""

    def __init__(self, message: str, *, token_given: bool, malformed: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.token_given = token_given
        self.malformed = malformed


def authorization_header(values: Sequence[str]) -> str | None:
    """The one ``Authorization`` header among a request's ``values`` of it (``None``: none).

    Raises:
        AuthenticationError: More than one (``malformed``): which one counts is not for the
            server to guess.
    """
    if len(values) > 1:
        message = f"send one Authorization header, not {len(values)}"
        raise AuthenticationError(message, token_given=True, malformed=True)
    return values[0] if values else None


def hash_api_key(key: str) -> str:
    """The configured form of an API key: ``sha256:`` + hex SHA-256 of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    """A fresh random API key (256 bits from ``secrets``), prefixed ``rg_``."""
    return "rg_" + secrets.token_urlsafe(32)


class JwtVerifier:
    """Verifies JWTs with a shared secret or a JWKS URL (PyJWT), and maps claims to a ``Principal``.

    Args:
        secret: HS256 shared secret (exclusive with ``jwks_url``).
        jwks_url: URL of the signing keys; fetched on first use and cached (5 min).
        algorithms: Accepted ``alg`` values (never ``none``).
        audience: Required ``aud``, when set.
        issuer: Required ``iss``, when set.
        resources_claim: Claim with the allowed ``resourceId``s.
    """

    def __init__(
        self,
        *,
        secret: str | None = None,
        jwks_url: str | None = None,
        algorithms: list[str] | None = None,
        audience: str | None = None,
        issuer: str | None = None,
        resources_claim: str = "resources",
    ) -> None:
        import jwt  # PyJWT (and the cryptography it loads) only when tokens are accepted

        self._secret = secret
        self._jwks = (
            None
            if jwks_url is None
            # an unknown `kid` refreshes the set at most once per cooldown (PyJWT holds a lock meanwhile)
            else jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300, timeout=5, cooldown_duration=JWKS_COOLDOWN)
        )
        default = ["HS256"] if secret is not None else ["RS256", "ES256"]
        self._algorithms = [a for a in (algorithms or default) if a.lower() != "none"]
        self._audience = audience
        self._issuer = issuer
        self._resources_claim = resources_claim

    async def verify(self, token: str) -> Principal:
        """The principal of a valid token.

        With a JWKS URL, the key named by the token's ``kid`` is passed to PyJWT as a ``PyJWK``,
        which ties it to one algorithm: the key's ``alg`` when published, else the one its
        ``kty``/``crv`` imply (RSA: RS256, EC P-256: ES256). A token whose ``alg`` is not that
        algorithm is refused, whatever ``RUNSGATE_JWT_ALGORITHMS`` allows.

        Raises:
            AuthenticationError: Bad signature or header, an algorithm that does not match its
                key, expired, wrong audience or issuer, a claim of the wrong type (see
                ``_principal``), or the JWKS could not be fetched. Every failure of
                verification, however malformed the token, is this error (a 401), logged as
                one INFO line, except an unreachable JWKS (WARNING, the server's problem).
        """
        import jwt

        try:
            if self._jwks is not None:
                key: Any = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
            else:
                key = self._secret
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._audience,
                issuer=self._issuer,
                options={
                    "require": ["exp", "sub"],
                    "verify_aud": self._audience is not None,
                    "enforce_minimum_key_length": True,
                },
            )
        except jwt.PyJWKClientConnectionError as exc:
            logger.warning("JWKS unavailable: %s", _sentence(exc))
            raise AuthenticationError("the token's signing key could not be found", token_given=True) from None
        except jwt.PyJWKClientError as exc:
            logger.info("JWT refused: no usable signing key (%s)", _sentence(exc))
            raise AuthenticationError("the token's signing key could not be found", token_given=True) from None
        except (jwt.InvalidTokenError, jwt.PyJWKError, TypeError, ValueError) as exc:
            # PyJWT raises TypeError/ValueError (not InvalidTokenError) for some keys that do
            # not fit the header's algorithm; every one of them is a token we refuse.
            logger.info("JWT refused: %s", _sentence(exc))
            raise AuthenticationError(f"invalid token: {_sentence(exc)}", token_given=True) from None
        return self._principal(claims)

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        """The principal of verified ``claims``.

        ``sub`` must be a non-empty string; ``scope`` a space-separated string or ``scp`` a
        list of strings (both absent: no scope); the resources claim a list of strings or
        ``"*"`` (absent: no run). A claim present with another type (``"scope": 5``, ``null``,
        ``true``) refuses the token rather than guess.

        Raises:
            AuthenticationError: A claim above has the wrong type.
        """
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise _wrong_claim("`sub` must be a non-empty string")
        if "scope" in claims:
            scope = claims["scope"]
            if not isinstance(scope, str):
                raise _wrong_claim("`scope` must be a space-separated string")
            scopes = scope.split()
        elif "scp" in claims:
            scopes = claims["scp"]
            if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
                raise _wrong_claim("`scp` must be a list of strings")
        else:
            scopes = []
        allowed: frozenset[str] | None
        if self._resources_claim not in claims:
            allowed = frozenset()
        else:
            resources = claims[self._resources_claim]
            if resources == "*":
                allowed = None
            elif isinstance(resources, list) and all(isinstance(r, str) for r in resources):
                allowed = frozenset(resources)
            else:
                raise _wrong_claim(f'`{self._resources_claim}` must be a list of strings or "*"')
        return Principal(
            name=subject,
            scopes=frozenset(scopes),
            resources=allowed,
            credential="jwt",
            issuer=self._issuer,
            expires_at=_instant(claims["exp"]),
        )


def _instant(exp: Any) -> datetime:
    """A verified ``exp`` (seconds since the epoch; PyJWT checked it is a number) as a UTC
    datetime; one beyond ``datetime``'s range is the latest it holds."""
    try:
        return datetime.fromtimestamp(exp, UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return datetime.max.replace(tzinfo=UTC)


def _wrong_claim(message: str) -> AuthenticationError:
    logger.info("JWT refused: %s", message)
    return AuthenticationError(f"invalid token: {message}", token_given=True)


class Authenticator:
    """Turns an ``Authorization`` header into a ``Principal``.

    Args:
        enabled: ``False``: every request is ``runtime.ANONYMOUS`` (loopback development only).
        api_keys: Configured hash (``sha256:...``) -> principal.
        jwt_verifier: Verifies tokens that are not API keys, when JWTs are configured.
    """

    def __init__(
        self, *, enabled: bool, api_keys: Mapping[str, Principal], jwt_verifier: JwtVerifier | None = None
    ) -> None:
        self.enabled = enabled
        self._api_keys = dict(api_keys)
        self._jwt = jwt_verifier

    @classmethod
    def from_settings(cls, settings: SecuritySettings) -> Authenticator:
        """The authenticator the settings describe (``check_security`` has accepted them)."""
        keys = {
            key.hash: Principal(
                name=key.name,
                scopes=frozenset(key.scopes),
                resources=None if key.resources == "*" else frozenset(key.resources),
                credential="key",
            )
            for key in settings.api_keys
        }
        verifier = None
        if settings.jwt_secret is not None or settings.jwt_jwks_url is not None:
            verifier = JwtVerifier(
                secret=None if settings.jwt_secret is None else settings.jwt_secret.get_secret_value(),
                jwks_url=settings.jwt_jwks_url,
                algorithms=settings.jwt_algorithms,
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                resources_claim=settings.jwt_resources_claim,
            )
        return cls(enabled=settings.auth, api_keys=keys, jwt_verifier=verifier)

    async def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header value (``Bearer <token>``).

        Raises:
            AuthenticationError: Missing header (``token_given`` false), another scheme, a
                malformed token, an unknown API key or an invalid JWT.
        """
        if not self.enabled:
            return ANONYMOUS
        if not authorization:
            raise AuthenticationError("authentication required: send Authorization: Bearer <token>", token_given=False)
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("use the Bearer scheme: Authorization: Bearer <token>", token_given=True)
        if len(token) > MAX_TOKEN_LENGTH or not _TOKEN.match(token):
            raise AuthenticationError("malformed bearer token", token_given=True)
        principal = self._api_keys.get(hash_api_key(token))
        if principal is not None:
            return principal
        if self._jwt is not None and token.count(".") == 2:
            return await self._jwt.verify(token)
        raise AuthenticationError("invalid token: unknown API key", token_given=True)


def _sentence(exc: Exception) -> str:
    """An exception's message made safe for a ``WWW-Authenticate`` quoted string."""
    return re.sub(r'[^\x20-\x7e]|["\\]', "", str(exc))[:200] or type(exc).__name__


__all__ = ["AuthenticationError", "Authenticator", "JwtVerifier", "authorization_header", "hash_api_key", "new_api_key"]
