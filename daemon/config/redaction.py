"""Which values of a configuration are secrets, found from the keys declared secret.

A key declared ``secret="password"`` (a database URL) hides the password in
it, in both its written and its decoded form, and the value of every query
parameter named like a credential (``?password=…``); ``secret="value"`` (an HMAC key)
hides the whole value; and whatever the environment put into a secret key is
a secret too. ``Config.redact`` and ``Config.public`` then never show them.
"""

from __future__ import annotations

from typing import Iterable
from urllib.parse import parse_qsl, unquote, urlsplit

from .document import Config, sections
from .errors import Key
from .keys import key_values
from .masking import CREDENTIAL_NAME


def find_secrets(config: Config, substituted: dict[Key, list[str]]) -> frozenset[str]:
    """The secrets of ``config``; ``substituted`` holds what the environment put in, by key path."""
    found: set[str] = set()
    for name, value, spec in sections(config):
        for key, setting, item in key_values(value, spec, (name,)):
            if setting.secret is None or not isinstance(item, str):
                continue
            found.update(_secret_parts(item, setting.secret))
            found.update(substituted.get(key, ()))
    return frozenset(s for s in found if s)


def _secret_parts(value: str, how: str) -> Iterable[str]:
    if how == "value":
        return (value,)
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:  # not a URL the standard library can split; the store's check names the problem
        return ()
    found = [password, unquote(password)] if password else []
    found += [v for name, v in parse_qsl(parts.query) if CREDENTIAL_NAME.search(name)]
    return found
