"""Fuzz the MCP endpoint's OAuth routes (outside the OpenAPI schema) on a live server.

Sends a seeded stream of odd requests to the authorization server's metadata, dynamic client
registration, token, revocation and authorization (consent) routes, and to the root
``/.well-known/`` documents: JSON of every type and depth, form bodies with random grant types,
codes, verifiers, resources and client ids (https URLs among them: client ID metadata documents
that the outbound-address policy refuses), other HTTP methods. Fails on any 5xx.

    python .ci/fuzz_oauth.py --url http://127.0.0.1:8614 --cookie <sessionid> --seed 14
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
from urllib.parse import urlencode, urlsplit

PREFIX = "/ahentic/v1/oauth"
WORDS = [
    "",
    "a",
    "x" * 300,
    "\u00e9\u4e2d",
    "null",
    "https://localhost/c.json",
    "https://127.0.0.1/c.json",
    "https://client.example/m.json",
    "http://localhost:1/cb",
    "S256",
    "plain",
    "code",
    "token",
    "authorization_code",
    "refresh_token",
    "client_credentials",
    "password",
    "tools:read",
    "tools:write",
    "agent:default",
    "https://elsewhere.example/api",
    "\x00",
    "%00",
    "' OR 1=1 --",
]


def value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 4 else 4)
    if kind == 0:
        return rng.choice(WORDS)
    if kind == 1:
        return rng.randint(-(2**63), 2**63)
    if kind == 2:
        return rng.choice([None, True, False, 1.5])
    if kind == 3:
        return [rng.choice(WORDS) for _ in range(rng.randrange(4))]
    if kind in (4, 5):
        keys = [
            "redirect_uris",
            "client_name",
            "grant_types",
            "response_types",
            "token_endpoint_auth_method",
            "scope",
            "client_id",
            *WORDS[:4],
        ]
        return {rng.choice(keys): value(rng, depth + 1) for _ in range(rng.randrange(5))}
    return [value(rng, depth + 1) for _ in range(rng.randrange(3))]


def form(rng: random.Random) -> dict:
    keys = [
        "grant_type",
        "code",
        "redirect_uri",
        "client_id",
        "client_secret",
        "code_verifier",
        "refresh_token",
        "resource",
        "scope",
        "token",
        "token_type_hint",
        "response_type",
        "code_challenge",
        "code_challenge_method",
        "state",
        "allow",
        "agent",
        "write",
    ]
    return {rng.choice(keys): str(rng.choice(WORDS)) for _ in range(rng.randrange(8))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--cookie", default="")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--cases", type=int, default=300)
    args = parser.parse_args()
    parts = urlsplit(args.url)
    rng = random.Random(args.seed)
    failures = []
    csrf = "fuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzz"
    for case in range(args.cases):
        route = rng.choice(["register", "token", "revoke", "authorize", "", "metadata", "root"])
        method = rng.choice(["POST", "POST", "GET", "PUT", "DELETE"])
        headers = {}
        path = {
            "metadata": PREFIX,
            "root": rng.choice(
                [
                    f"/.well-known/oauth-authorization-server{PREFIX}",
                    "/.well-known/oauth-protected-resource/ahentic/v1/mcp",
                    "/.well-known/oauth-authorization-server/x/y",
                ]
            ),
        }.get(route, f"{PREFIX}/{route}".rstrip("/"))
        body = b""
        if route == "register":
            raw = json.dumps(value(rng)).encode()
            body = raw if rng.random() < 0.9 else raw[: rng.randrange(len(raw) + 1)]
            headers["Content-Type"] = "application/json"
        elif method == "POST":
            body = urlencode(form(rng)).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if route == "authorize":
            path += "?" + urlencode(form(rng))
            if args.cookie and rng.random() < 0.8:
                headers["Cookie"] = f"sessionid={args.cookie}; csrftoken={csrf}"
                headers["X-CSRFToken"] = csrf
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=60)
        try:
            connection.request(method, path, body=body or None, headers=headers)
            status = connection.getresponse().status
        finally:
            connection.close()
        if status >= 500:
            failures.append(f"case {case}: {method} {path[:120]} -> {status} ({body[:200]!r})")
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"fuzz_oauth: {args.cases} requests, {len(failures)} server errors")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
