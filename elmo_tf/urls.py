"""URLs of model files: which are downloaded, how one is shown and keyed (without its user and
password), and what is wrong with one that cannot be used."""

import urllib.parse


def is_url(path):
    """Whether ``path`` is an ``http://`` or ``https://`` URL (what the cache downloads)."""
    return isinstance(path, str) and path.lower().startswith(("http://", "https://"))


def public_url(url):
    """``url`` without a user or password: how it is shown, recorded and keyed. Never raises,
    whatever ``url`` holds (an invalid port or IPv6 address is shown as written)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends, default=len(rest))
    authority = rest[:end]
    if "@" not in authority:
        return url
    return f"{scheme}://{authority.rpartition('@')[2]}{rest[end:]}"


def problem(url):
    """What makes ``url`` unusable as an ``http(s)://`` address (its words), or ``None``."""
    if not is_url(url):
        return "not an http:// or https:// URL"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (parsing the port is the check: out of range raises)
    except ValueError as e:
        return str(e)
    if not parts.hostname:
        return "no host name"
    return None
