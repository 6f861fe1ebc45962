"""Authentication (SECURITY.md): bearer API keys and JWTs, 401s, and when auth may be off.

In-process through ``httpx.ASGITransport``, with the app's lifespan entered; the JWKS case
serves its key set from a small HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette

from server.app import create_app
from server.cli.main import main
from server.settings import DEMO_AGENTS, ApiKeyConfig, ConfigError, Settings, load_settings

from .._auth import ADMIN, TestKey
from .._graphql import REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS
from ._cli import serve_with_only

READER = TestKey("test-two-headers", "rg_test_two_headers_0123456789abcdefghijklmnopqrstuv", scopes=("runs:read",))
"""A second valid key, which a request may not send beside another."""
SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
LIST = 'query { suspendedRuns(agentId: "refund-agent") { totalCount nodes { runId resourceId } } }'


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app: Starlette = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client,
    ):
        yield client


def keyed(*keys: TestKey, **more: Any) -> Settings:
    return Settings(
        agents=DEMO_AGENTS, mongodb_uri=None, api_keys=[ApiKeyConfig.model_validate(k.entry()) for k in keys], **more
    )


def token(claims: dict[str, Any], key: Any = SECRET, algorithm: str = "HS256", **headers: Any) -> str:
    return jwt.encode({"exp": int(time.time()) + 300, **claims}, key, algorithm=algorithm, headers=headers or None)


async def post(client: httpx.AsyncClient, document: str, bearer: str | None = None, **variables: Any) -> httpx.Response:
    headers = {} if bearer is None else {"Authorization": f"Bearer {bearer}"}
    return await client.post("/graphql", json={"query": document, "variables": variables}, headers=headers)


# -- API keys ---------------------------------------------------------------------------------
async def test_a_request_without_credentials_gets_401_with_a_bearer_challenge_and_does_nothing() -> None:
    async with running(keyed(ADMIN)) as client:
        # when a run is started without an Authorization header
        refused = await post(client, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})

        # then 401 with WWW-Authenticate: Bearer, a GraphQL-shaped error, and no run was started
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="runsgate"'
        assert refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        listed = await post(client, SUSPENDED_RUNS, ADMIN.key, agentId=REFUND)
        assert listed.json()["data"]["suspendedRuns"]["totalCount"] == 0


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer rg_not_a_configured_key",
        f"Basic {ADMIN.key}",
        "Bearer",
        f"Bearer {ADMIN.key} extra",
        "Bearer " + "a" * 9000,
        "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl",
    ],
    ids=["unknown-key", "basic-scheme", "no-token", "two-tokens", "too-long", "jwt-without-jwt-config"],
)
async def test_bad_credentials_get_401_invalid_token(authorization: str) -> None:
    async with running(keyed(ADMIN)) as client:
        response = await client.post(
            "/graphql", json={"query": "{ agents { id } }"}, headers={"Authorization": authorization}
        )

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="runsgate", error="invalid_token"')
    assert "data" not in response.json()


async def test_a_token_with_bytes_outside_ascii_is_refused() -> None:
    async with running(keyed(ADMIN)) as client:
        response = await client.post(
            "/graphql", json={"query": "{ agents { id } }"}, headers=[(b"authorization", b"Bearer rg_\xff\xfe")]
        )

    assert response.status_code == 401


async def test_a_get_query_needs_credentials_but_the_graphiql_page_does_not() -> None:
    async with running(keyed(ADMIN, graphiql=True)) as client:
        page = await client.get("/graphql", headers={"Accept": "text/html"})
        query = await client.get("/graphql", params={"query": "{ agents { id } }"})
        authenticated = await client.get("/graphql", params={"query": "{ agents { id } }"}, headers=ADMIN.headers)

    assert page.status_code == 200
    assert "graphiql" in page.text.lower()
    assert query.status_code == 401
    assert authenticated.status_code == 200
    assert authenticated.json()["data"]["agents"][0] == {"id": "refund-agent"}


async def test_an_api_key_is_the_principal_that_decides() -> None:
    async with running(keyed(ADMIN)) as client:
        started = (await post(client, START_RUN, ADMIN.key, input={"agentId": REFUND, "prompt": REFUND_PROMPT})).json()
        run = started["data"]["startRun"]["run"]
        events = (
            await post(
                client,
                "query($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { type by } }",
                ADMIN.key,
                a=REFUND,
                r=run["runId"],
            )
        ).json()

    assert events["data"]["runEvents"][0] == {"type": "started", "by": f"key:{ADMIN.name}"}


async def test_two_authorization_headers_get_400_invalid_request_and_run_nothing() -> None:
    async with running(keyed(ADMIN, READER)) as client:
        # when a request sends two credentials, each valid on its own
        headers = [("Authorization", f"Bearer {READER.key}"), ("Authorization", f"Bearer {ADMIN.key}")]
        body = {"query": START_RUN, "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT}}}
        refused = await client.post("/graphql", json=body, headers=headers)
        listed = (await post(client, LIST, ADMIN.key)).json()

    # then it is refused as RFC 6750 refuses a repeated credential, before anything runs
    assert refused.status_code == 400, refused.text
    assert "one Authorization header" in refused.json()["errors"][0]["message"], refused.text
    assert 'error="invalid_request"' in refused.headers["www-authenticate"], refused.headers
    assert listed["data"]["suspendedRuns"]["totalCount"] == 0, listed


# -- JWT --------------------------------------------------------------------------------------
async def test_an_hs256_jwt_gives_its_subject_scopes_and_resources() -> None:
    settings = Settings(
        agents=DEMO_AGENTS, mongodb_uri=None, jwt_secret=SECRET, api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())]
    )
    async with running(settings) as client:
        for resource in ("tenant-a", "tenant-b"):
            await post(
                client, START_RUN, ADMIN.key, input={"agentId": REFUND, "prompt": REFUND_PROMPT, "resourceId": resource}
            )
        alice = token({"sub": "alice", "scope": "runs:read runs:decide", "resources": ["tenant-a"]})
        everything = token({"sub": "ops", "scp": ["runs:read"], "resources": "*"})
        nothing = token({"sub": "nobody", "scope": "runs:read"})

        mine = (await post(client, LIST, alice)).json()["data"]["suspendedRuns"]
        all_runs = (await post(client, LIST, everything)).json()["data"]["suspendedRuns"]
        none = (await post(client, LIST, nothing)).json()["data"]["suspendedRuns"]
        cannot_start = (await post(client, START_RUN, alice, input={"agentId": REFUND, "prompt": "x"})).json()

    assert [n["resourceId"] for n in mine["nodes"]] == ["tenant-a"]
    assert mine["totalCount"] == 1
    assert all_runs["totalCount"] == 2
    assert none == {"totalCount": 0, "nodes": []}  # no resources claim: no run
    assert cannot_start["errors"][0]["extensions"]["code"] == "FORBIDDEN"


@pytest.mark.parametrize(
    "bad",
    [
        lambda: token({"sub": "alice", "exp": int(time.time()) - 10}),
        lambda: token({"sub": "alice"}, key="another-secret-another-secret-another-secret"),
        lambda: jwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, None, algorithm="none"),
        lambda: jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"),
        lambda: token({"scope": "runs:read"}),
        lambda: token({"sub": "alice", "aud": "someone-else"}),
    ],
    ids=["expired", "wrong-secret", "alg-none", "no-exp", "no-sub", "wrong-audience"],
)
async def test_an_invalid_jwt_gets_401(bad: Any) -> None:
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_secret=SECRET, jwt_audience="runsgate")
    async with running(settings) as client:
        response = await post(client, "{ agents { id } }", bad())

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


@contextmanager
def jwks_server(keys: list[dict[str, Any]], hits: list[float] | None = None) -> Iterator[str]:
    """Serve ``{"keys": keys}`` on 127.0.0.1; yields its URL. Each fetch's time goes to ``hits``."""
    document = json.dumps({"keys": keys}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hits is not None:
                hits.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/jwks.json"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


async def test_an_rs256_jwt_is_checked_against_the_jwks_url() -> None:
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signer.public_key()))
    with jwks_server([{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]) as url:
        async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_jwks_url=url)) as client:
            good = token({"sub": "ops", "scope": "runs:read", "resources": "*"}, signer, "RS256", kid="k1")
            forged = token({"sub": "ops", "scope": "runs:read", "resources": "*"}, impostor, "RS256", kid="k1")
            unknown_kid = token({"sub": "ops", "scope": "runs:read"}, signer, "RS256", kid="k2")
            hmac_with_public_key = token({"sub": "ops", "scope": "runs:read"}, SECRET, "HS256", kid="k1")

            accepted = await post(client, LIST, good)
            refused = [await post(client, LIST, t) for t in (forged, unknown_kid, hmac_with_public_key)]

    assert accepted.status_code == 200
    assert accepted.json()["data"]["suspendedRuns"]["totalCount"] == 0
    assert [r.status_code for r in refused] == [401, 401, 401]


async def test_tokens_naming_unknown_keys_make_runsgate_fetch_the_jwks_at_most_once_per_cooldown() -> None:
    # a shared budget: each unknown `kid` would otherwise send one request to the identity
    # provider and hold a worker thread while it waits
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signer.public_key()))
    hits: list[float] = []
    with jwks_server([{**public, "kid": "k1", "use": "sig", "alg": "RS256"}], hits) as url:
        async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_jwks_url=url)) as client:
            good = token({"sub": "ops", "scope": "runs:read", "resources": "*"}, signer, "RS256", kid="k1")
            assert (await post(client, LIST, good)).status_code == 200
            unknown = [token({"sub": "ops"}, signer, "RS256", kid=f"forged-{n}") for n in range(30)]
            refused = await asyncio.gather(*(post(client, LIST, t) for t in unknown))
            again = await post(client, LIST, good)

    assert [r.status_code for r in refused] == [401] * 30
    assert again.status_code == 200
    assert len(hits) <= 2  # the first fetch, and at most one refresh within the 30 s cooldown


async def test_an_unreachable_jwks_url_gets_401_not_a_server_error() -> None:
    with jwks_server([]) as url:
        pass  # stopped: nothing listens there any more
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_jwks_url=url)) as client:
        response = await post(client, LIST, token({"sub": "ops"}, signer, "RS256", kid="k1"))

    assert response.status_code == 401


# -- when authentication may be off -------------------------------------------------------------
@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.com"])
def test_auth_off_on_a_non_loopback_host_is_a_config_error(host: str) -> None:
    with pytest.raises(ConfigError, match="RUNSGATE_AUTH is off"):
        create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, host=host))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
async def test_auth_off_on_loopback_serves_everyone_as_anonymous_with_a_warning(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="runsgate"):
        async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, host=host)) as client:
            started = (await post(client, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})).json()

    assert started["data"]["startRun"]["status"] == "SUSPENDED"
    assert any("authentication is OFF" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("dev-proxy.internal, Other.Local", ["dev-proxy.internal", "other.local"]),
        (
            '["dev-proxy.internal", "::1", "[fe80::1]", "10.0.0.5"]',
            ["dev-proxy.internal", "[::1]", "[fe80::1]", "10.0.0.5"],
        ),
        ("", []),
    ],
)
def test_allowed_hosts_are_names_comma_separated_or_a_json_list(
    monkeypatch: pytest.MonkeyPatch, value: str, names: list[str]
) -> None:
    monkeypatch.setenv("RUNSGATE_ALLOWED_HOSTS", value)

    assert Settings(mongodb_uri=None).allowed_hosts == names


@pytest.mark.parametrize("value", ["http://proxy.local", "proxy.local:8080", "proxy.local/path", "a b"])
def test_an_allowed_host_that_is_not_a_name_is_a_config_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RUNSGATE_ALLOWED_HOSTS", value)

    with pytest.raises(ConfigError, match="RUNSGATE_ALLOWED_HOSTS"):
        load_settings(mongodb_uri=None)


def test_auth_on_without_any_credential_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no credential is configured"):
        create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None))


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"RUNSGATE_AUTH": "off", "RUNSGATE_HOST": "0.0.0.0"}, "RUNSGATE_AUTH is off"),
        ({"RUNSGATE_AUTH": "on"}, "no credential is configured"),
        ({"RUNSGATE_API_KEYS": "[not json"}, "RUNSGATE_API_KEYS"),
        (
            {"RUNSGATE_API_KEYS": '[{"name": "x", "hash": "md5:00", "scopes": [], "resources": "*"}]'},
            "RUNSGATE_API_KEYS",
        ),
        ({"RUNSGATE_TOOL_RULES": '[{"tool": "t"}]'}, "RUNSGATE_TOOL_RULES"),
        ({"RUNSGATE_MAX_BODY_BYTES": "10"}, "RUNSGATE_MAX_BODY_BYTES"),
    ],
)
def test_the_serve_command_refuses_insecure_or_invalid_security_settings(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    expected: str,
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, variables)

    out, err = capsys.readouterr()
    assert status == 2
    assert expected in err
    assert "Traceback" not in err
    assert "Uvicorn running" not in out + err


def test_the_host_flag_counts_for_the_loopback_rule(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off"}, "--host", "0.0.0.0")

    assert status == 2
    assert "'0.0.0.0', which is not a loopback address" in capsys.readouterr().err


async def test_new_key_prints_a_key_and_the_entry_that_accepts_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-key", "--name", "ops", "--scopes", "runs:read", "--resources", "tenant-a,tenant-b"]) == 0
    out = capsys.readouterr().out
    key = out.split("): ", 1)[1].splitlines()[0].strip()
    entry = json.loads(out.split("RUNSGATE_API_KEYS entry: ", 1)[1])

    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, api_keys=[ApiKeyConfig.model_validate(entry)])
    async with running(settings) as client:
        response = await post(client, LIST, key)

    assert entry["resources"] == ["tenant-a", "tenant-b"]
    assert entry["scopes"] == ["runs:read"]
    assert response.status_code == 200
    assert response.json()["data"]["suspendedRuns"]["totalCount"] == 0


def test_new_key_puts_a_valid_email_in_the_entry_and_refuses_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-key", "--name", "ops", "--email", "ops@example.com"]) == 0
    entry = json.loads(capsys.readouterr().out.split("RUNSGATE_API_KEYS entry: ", 1)[1])
    assert entry["email"] == "ops@example.com"
    assert ApiKeyConfig.model_validate(entry).email == "ops@example.com"

    with pytest.raises(SystemExit) as refused:
        main(["new-key", "--name", "ops", "--email", "ops at example.com"])
    assert refused.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("runsgate: invalid configuration: --email: ")
    assert "ops at example.com" in err


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [("--name", "", "at least 1 character"), ("--scopes", "runs:read,not a scope", "not a scope")],
)
def test_new_key_refuses_what_the_server_would_refuse(
    option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # given an option the key's entry cannot hold (RUNSGATE_API_KEYS refuses it at the server's start)
    argv = ["new-key", "--name", "ops", option, value]
    # when a key is asked for, then nothing is printed on stdout and the option is named (exit status 2)
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"runsgate: invalid configuration: {option}: "), err
    assert said in err, err


# -- odd tokens never reach a 500 (issue: security, second pass) ---------------------------------
async def test_a_jwks_token_whose_alg_does_not_match_its_key_gets_401_and_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signer.public_key()))
    ec_signer = ec.generate_private_key(ec.SECP256R1())
    with jwks_server([{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]) as url:
        async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_jwks_url=url)) as client:
            # an ES256 header naming the kid of an RSA key (PyJWT raised TypeError: a 500)
            es256_on_rsa = token({"sub": "ops", "scope": "runs:read"}, ec_signer, "ES256", kid="k1")
            with caplog.at_level(logging.INFO, logger="runsgate"):
                caplog.clear()
                response = await post(client, LIST, es256_on_rsa)

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    auth_lines = [r for r in caplog.records if r.name == "runsgate.auth"]
    assert [r.levelname for r in auth_lines] == ["INFO"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_a_jwks_key_published_without_alg_verifies_only_its_own_kind_of_algorithm() -> None:
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signer.public_key()))
    public.pop("alg", None)
    with jwks_server([{**public, "kid": "k1", "use": "sig"}]) as url:
        async with running(
            Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_jwks_url=url, jwt_algorithms=["RS256", "PS256"])
        ) as client:
            rs256 = await post(client, LIST, token({"sub": "ops", "scope": "runs:read"}, signer, "RS256", kid="k1"))
            ps256 = await post(client, LIST, token({"sub": "ops", "scope": "runs:read"}, signer, "PS256", kid="k1"))

    assert rs256.status_code == 200  # an RSA key without `alg` is an RS256 key (PyJWK infers it from `kty`)
    assert ps256.status_code == 401


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "alice", "scope": 5},
        {"sub": "alice", "scope": None},
        {"sub": "alice", "scope": True},
        {"sub": "alice", "scp": "runs:read"},
        {"sub": "alice", "scp": ["runs:read", 7]},
        {"sub": "alice", "scope": "runs:read", "resources": 3},
        {"sub": "alice", "scope": "runs:read", "resources": ["tenant-a", None]},
        {"sub": 12},
        {"sub": ["alice"]},
    ],
    ids=[
        "scope-int",
        "scope-null",
        "scope-true",
        "scp-string",
        "scp-list-int",
        "resources-int",
        "resources-list-null",
        "sub-int",
        "sub-list",
    ],
)
async def test_a_signed_token_with_claims_of_the_wrong_type_gets_401(
    claims: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    async with running(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_secret=SECRET)) as client:
        with caplog.at_level(logging.INFO, logger="runsgate"):
            response = await post(client, LIST, token(claims))

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("secret", ["", "short", "x" * 31])
def test_a_jwt_secret_shorter_than_32_bytes_is_refused_at_start(secret: str) -> None:
    with pytest.raises(ConfigError, match="RUNSGATE_JWT_SECRET"):
        create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, jwt_secret=secret))
