"""Argument checks, one home for each rule: integers in a range, numbers in a range, booleans
that are booleans, and the "did you mean" of a misspelt name.

Each check returns the value when it passes and raises ``error`` (``ValueError`` unless the
caller names its own class) with one message per rule, naming the argument and what it got:
``batch_size must be a positive integer, got 0``.
"""

import difflib
import math
import numbers
import reprlib

# How close a misspelt name must be to a known one to be called a typo of it (difflib's ratio:
# "cel_clip" against "cell_clip" is 0.94; unrelated names of the same length stay under 0.6).
TYPO_RATIO = 0.8


def is_integer(value):
    """An integer (a NumPy one too), not a ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value):
    """A real number (an integer or a float, NumPy's too), not a ``bool``."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(name, value, minimum=None, maximum=None, error=ValueError):
    """``value`` if it is an integer within ``[minimum, maximum]`` (either bound optional)."""
    if is_integer(value) and (minimum is None or value >= minimum):
        if maximum is None or value <= maximum:
            return value
    raise error(f"{name} must be {_integer_rule(minimum, maximum)}, got {shown(value)}")


def _integer_rule(minimum, maximum):
    if minimum is not None and maximum is not None:
        return f"an integer from {minimum} to {maximum}"
    if maximum is not None:
        return f"an integer <= {maximum}"
    return {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}"
    )


def positive_integer(name, value, error=ValueError):
    """``value`` if it is an integer >= 1."""
    return integer(name, value, minimum=1, error=error)


def number(name, value, minimum=None, maximum=None, below=None, above=None, error=ValueError):
    """``value`` if it is a finite number, at least ``minimum`` and at most ``maximum``,
    strictly below ``below`` and strictly above ``above`` (each bound optional)."""
    ok = is_number(value) and math.isfinite(value)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    ok = ok and (below is None or value < below) and (above is None or value > above)
    if ok:
        return value
    bounds = [
        f">= {minimum}" if minimum is not None else None,
        f"> {above}" if above is not None else None,
        f"<= {maximum}" if maximum is not None else None,
        f"< {below}" if below is not None else None,
    ]
    rule = " and ".join(b for b in bounds if b)
    raise error(f"{name} must be a finite number{' ' + rule if rule else ''}, got {shown(value)}")


def boolean(name, value, error=ValueError):
    """``value`` if it is ``True`` or ``False`` (not ``1``, not ``"false"``)."""
    if isinstance(value, bool):
        return value
    raise error(f"{name} must be True or False, got {shown(value)}")


def one_of(name, value, choices, error=ValueError):
    """``value`` if it is one of ``choices``; the error names them, and the one ``value`` is a
    typo of, if any."""
    if value in choices:
        return value
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    allowed = ", ".join(map(str, choices))
    raise error(f"{name} must be one of {allowed}, got {shown(value)}{hint}")


def closest(word, known):
    """The name in ``known`` that ``word`` is a typo of, else ``None``."""
    close = difflib.get_close_matches(str(word)[:64], list(known), n=1, cutoff=TYPO_RATIO)
    return close[0] if close else None


def did_you_mean(word, known):
    """``"; did you mean 'X'?"`` for the name in ``known`` that ``word`` is a typo of, else
    ``""``."""
    close = closest(word, known)
    return f"; did you mean '{close}'?" if close else ""


# How much of a value an error message quotes: values come from files and clients, and a
# message stays one short line whatever they hold.
SHOWN_CHARS = 100


class _Abbreviated(reprlib.Repr):
    """``reprlib.Repr`` that also abbreviates subclasses of the built-in containers (an
    ``OrderedDict``, a pickle's stand-in): ``reprlib`` picks its method by the exact type's
    name and would format those whole with their own ``repr``."""

    def repr1(self, x, level):
        for base in (dict, list, tuple, set, frozenset):
            if isinstance(x, base) and type(x) is not base:
                return getattr(self, f"repr_{base.__name__}")(x, level)
        return super().repr1(x, level)


_abbreviated = _Abbreviated()
_abbreviated.maxlist = _abbreviated.maxtuple = _abbreviated.maxdict = _abbreviated.maxset = 8
_abbreviated.maxstring = _abbreviated.maxother = _abbreviated.maxlong = 40
_abbreviated.maxlevel = 3  # a deeply nested list is "[[[...]]]", not a deep recursion


def shown(value, limit=SHOWN_CHARS, quote=True):
    """``value`` as an error message quotes it: one line, whatever its size.

    A string as ``repr`` writes it (``quote=False``: its bare text, unprintable characters
    escaped as ``repr`` escapes them), its first ``limit`` characters followed by ``... (N
    characters)`` when it is longer. Any other value as ``repr`` writes it, with lists, dicts
    (and their subclasses) and long numbers abbreviated (``reprlib``: 8 items, 3 levels), cut at
    ``limit`` characters."""
    if isinstance(value, str) or not quote:
        try:
            text = str(value)
        except ValueError:  # an int too long for str() (sys.get_int_max_str_digits)
            return "<a very large integer>"
        head = text[:limit]
        if quote:
            head = repr(head)
        elif not head.isprintable():
            head = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
        if len(text) <= limit:
            return head
        more = f"... ({len(text)} characters)"
        return f"{head[:-1]}{more}{head[-1]}" if quote else head + more
    try:
        text = _abbreviated.repr(value)
    except ValueError:  # an int too long for str() (sys.get_int_max_str_digits)
        return "<a very large integer>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(error):
    """The first line of an error (an exception, or its message), stripped: the rest is a trace
    (TensorFlow's op stack, HDF5's error stack). An exception with no message: its type's
    name."""
    lines = str(error).strip().splitlines()
    if lines:
        return lines[0].strip()
    return type(error).__name__ if isinstance(error, BaseException) else ""


def error_text(error, limit=None):
    """An exception's message on one line (its whitespace runs as single spaces), cut at
    ``limit`` characters; its type's name where it has none."""
    text = " ".join(str(error).split())
    return text[:limit] if limit is not None and text else text or type(error).__name__


def with_article(noun):
    """``noun`` after its indefinite article: ``an options file``, ``a weight file``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
