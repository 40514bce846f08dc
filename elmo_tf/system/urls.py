"""URLs of model files: which are downloaded, how one is shown and keyed (without its user and
password), and what is wrong with one that cannot be used."""

import re
import urllib.parse

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def other_scheme(path):
    """Whether ``path`` is a URL of a scheme the cache does not download (``ftp://``,
    ``file://``, ``s3://``): such a name is no local file either."""
    return isinstance(path, str) and bool(_SCHEME.match(path)) and not is_url(path)


def is_url(path):
    """Whether ``path`` is an ``http://`` or ``https://`` URL (what the cache downloads)."""
    return isinstance(path, str) and path.lower().startswith(("http://", "https://"))


HIDDEN = "<hidden>"  # what is shown for a user and password that cannot be told apart


def public_url(url):
    """``url`` without a user or password: how it is shown, recorded and keyed. Never raises,
    whatever ``url`` holds (an invalid port or IPv6 address is shown as written). A user or
    password holding an unescaped ``/``, ``?`` or ``#`` cannot be told from the path: then
    all from ``://`` to the last ``@`` is hidden (``problem`` refuses such a URL)."""
    scheme, separator, rest = url.partition("://")
    if not separator or "@" not in rest:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority = rest[:end]
    if "@" in authority:
        return f"{scheme}://{authority.rpartition('@')[2]}{rest[end:]}"
    return f"{scheme}://{HIDDEN}@{rest.rpartition('@')[2]}"


def problem(url):
    """What makes ``url`` unusable as an ``http(s)://`` address (its words), or ``None``."""
    if not is_url(url):
        return "not an http:// or https:// URL"
    if public_url(url).startswith(url.partition("://")[0] + "://" + HIDDEN):
        return (
            "an '@' past the host: percent-encode '/', '?', '#' and '@' in a user or password "
            "(%2F, %3F, %23, %40)"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (parsing the port is the check: out of range raises)
    except ValueError as e:
        return str(e)
    if not parts.hostname:
        return "no host name"
    return None
