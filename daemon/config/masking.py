"""Hiding secrets in text by its structure, never by searching for the secret's characters anywhere.

Replacing every occurrence of a secret turns a short one into a give-away: a
password ``s`` masked everywhere prints ``sqlit***:///…`` and tells the
reader what it is. So a text is masked where it is shaped like a secret:

* in a URL (``scheme://…``): the password of its userinfo, the value of every
  query parameter named like a credential (``password``, ``secret``,
  ``token``, ``key``, …), and any part — user, host, path segment, query
  value — that is exactly one of the configured secrets;
* outside URLs: ``name=value`` where the name is a credential's
  (``password=…`` in a libpq connection string);
* a whole text that is exactly a configured secret;
* a configured secret of at least ``LONG_SECRET`` characters standing as a
  word of its own (an error message that quotes it): long enough that
  hiding it says nothing about the text around it.
"""

from __future__ import annotations

import re
from typing import Collection
from urllib.parse import unquote

REDACTED = "***"

LONG_SECRET = 8
"""A secret this long is hidden wherever it stands as a word; a shorter one only by structure."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
CREDENTIAL_NAME = re.compile(r"pass|pwd|secret|token|key|auth|credential|signature|^sig$", re.IGNORECASE)
"""A URL query parameter named like this holds a credential."""
_CREDENTIAL_PAIR = re.compile(
    r"(?<![\w/?&])([A-Za-z_]*(?:password|passwd|pwd|secret|token|api_?key)[A-Za-z_]*)=([^\s&;,'\"]+)", re.IGNORECASE
)


def redact_text(text: str, secrets: Collection[str] = ()) -> str:
    """``text`` with every secret in it replaced by ``***``, found by structure (see the module)."""
    if text in secrets:
        return REDACTED
    text = _URL.sub(lambda match: redact_url(match[0], secrets), text)
    text = _CREDENTIAL_PAIR.sub(lambda match: f"{match[1]}={REDACTED}", text)
    for secret in sorted((s for s in secrets if len(s) >= LONG_SECRET), key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(secret)}(?![\w])", REDACTED, text)
    return text


def _secret(part: str, secrets: Collection[str]) -> bool:
    return bool(part) and (part in secrets or unquote(part) in secrets)


def redact_url(url: str, secrets: Collection[str] = ()) -> str:
    """One URL with its credentials hidden: userinfo password, credential query values, parts that are secrets."""
    if _secret(url, secrets):
        return REDACTED
    scheme, _, rest = url.partition("://")
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends, default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        user = REDACTED if _secret(user, secrets) else user
        userinfo = f"{user}:{REDACTED}" if colon and password else user + colon
    host = REDACTED if _secret(host, secrets) else host
    before_query, question, after = tail.partition("?")
    query, hash_sign, fragment = after.partition("#")
    path = "/".join(REDACTED if _secret(segment, secrets) else segment for segment in before_query.split("/"))
    if question:
        query = "&".join(_parameter(item, secrets) for item in query.split("&"))
    return f"{scheme}://{userinfo}{at}{host}{path}{question}{query}{hash_sign}{fragment}"


def _parameter(item: str, secrets: Collection[str]) -> str:
    name, equals, value = item.partition("=")
    if equals and value and (CREDENTIAL_NAME.search(name) or _secret(value, secrets)):
        return f"{name}={REDACTED}"
    return item
