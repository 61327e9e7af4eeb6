"""One redaction for every URL, error and argument pytest-roofline prints or records (docs/untrusted-history.md).

A store's URL, git's and an object store's error messages and the command line can carry a credential: user info
in a URL (an AWS secret key holds ``/`` and ``+``, so user info runs to the *last* ``@`` of the token, not to the
first ``/``), a query string (SAS tokens, presigned signatures), an option such as ``--token=...``, or the value
of a credential variable of the environment echoed back by a tool. :func:`redact` replaces each with ``***``.
Plain Python, cheap to import: the errors module uses it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

MASK = "***"
# scheme://USERINFO@ : user info runs to the last '@' before the token ends, so a secret with '/' is covered
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s'\"<>@]*(?:@[^\s'\"<>@]*)*@")
# a URL's query or fragment: signed URLs and SAS tokens carry the credential there
_QUERY = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>?#]*)[?#][^\s'\"<>]*")
# --token=VALUE, --password VALUE, -o secret_key=VALUE: an option or key whose name says it holds a secret
_SECRET_WORDS = (r"(?:token|secret|passw(?:or)?d|credential|api[_-]?key|access[_-]?key|account[_-]?key"
                 r"|private[_-]?key|authorization|auth(?![a-z])|sas(?![a-z]))")
_NAMED = re.compile(rf"(?i)(--?[a-z0-9_.-]*{_SECRET_WORDS}[a-z0-9_.-]*|\b[a-z0-9_.-]*{_SECRET_WORDS}[a-z0-9_.-]*)"
                    r"(=|:\s*|\s+)(?!\*\*\*)((?:bearer\s+|basic\s+)?[^\s'\",;&]+)")
# environment variables whose values are credentials: their values are masked wherever they appear
_SECRET_VARIABLE = re.compile(rf"(?i).*{_SECRET_WORDS}.*")
MIN_SECRET = 6  # shorter values ("1", "true") would mask ordinary words


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's credential variables (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ...),
    longest first so that a value containing another is masked whole."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_VARIABLE.fullmatch(k) and len(v) >= MIN_SECRET}
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every credential it may hold replaced by ``***``: URL user info and queries, secret-named
    options and keys, and the values of the environment's credential variables."""
    for value in secret_values(environ):
        text = text.replace(value, MASK)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _QUERY.sub(lambda m: f"{m.group(1)}?{MASK}", text)
    return _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
