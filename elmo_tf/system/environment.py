"""The ``ELMO_TF_*`` environment variables: each one's values, read and checked in one place.

=============================  ==========================================================
variable                       values
=============================  ==========================================================
``ELMO_TF_CACHE_DIR``          a directory for downloaded models (``elmo_tf.presets.cache``)
``ELMO_TF_MODEL_BASE_URL``     an ``http://`` or ``https://`` mirror of the published models
``ELMO_TF_NLPL_BASE_URL``      an ``http://`` or ``https://`` mirror of the NLPL repository
                               (``elmo_tf.presets.nlpl``)
``ELMO_TF_OFFLINE``            ``1``, ``true``, ``yes`` (never touch the network) or ``0``,
                               ``false``, ``no``, empty
``ELMO_TF_LSTM_LAYOUT``        ``per_gate`` or ``fused`` (``layers.lstm_layout``)
``ELMO_TF_MAX_PARAMETERS``,    positive integers raising the bounds on a model's size
``ELMO_TF_MAX_DIMENSION``,     (``elmo_tf.config``)
``ELMO_TF_MAX_LAYERS``
=============================  ==========================================================

``check()`` reads them all at once (the ``elmo-tf`` command at start-up, ``import elmo_tf``):
a value that is not one of its variable's, or a name that is none of them (a typo, which would
otherwise be ignored), is an ``EnvironmentVariableError`` of one line naming the variable and
what it may be. ``value(name)`` reads one, checked the same way.
"""

import os

from elmo_tf import checks
from elmo_tf.errors import ElmoError
from elmo_tf.system import urls

PREFIX = "ELMO_TF_"
_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")
# The LSTM step's layouts (elmo_tf.layers.lstm_layout imports them): declared with the
# variable that names one, which is checked before TensorFlow (or Keras) is imported.
LAYOUTS = ("per_gate", "fused")


class EnvironmentVariableError(ElmoError, ValueError):
    """An ``ELMO_TF_*`` variable whose value is not one of its values, or an unknown one."""


def _text(name, text):
    return text


def _url(name, text):
    shown = checks.shown(urls.public_url(text))
    if text and not urls.is_url(text):
        raise EnvironmentVariableError(f"{name} must be an http:// or https:// URL, got {shown}")
    if text and (problem := urls.problem(text)):
        raise EnvironmentVariableError(f"{name} is not a usable URL ({problem}): {shown}")
    return text


def _switch(name, text):
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    allowed = ", ".join(_TRUE + _FALSE[1:])
    raise EnvironmentVariableError(
        f"{name} must be one of {allowed} (or empty), got {checks.shown(text)}"
    )


def _layout(name, text):
    word = text.strip().lower()
    return checks.one_of(name, word, LAYOUTS, error=EnvironmentVariableError) if word else None


def _limit(name, text):
    try:
        number = int(text)
    except ValueError:
        number = text
    return checks.positive_integer(name, number, error=EnvironmentVariableError)


# name -> (reader of its text, value when unset)
VARIABLES = {
    "ELMO_TF_CACHE_DIR": (_text, None),
    "ELMO_TF_MODEL_BASE_URL": (_url, None),
    "ELMO_TF_NLPL_BASE_URL": (_url, None),
    "ELMO_TF_OFFLINE": (_switch, False),
    "ELMO_TF_LSTM_LAYOUT": (_layout, None),
    "ELMO_TF_MAX_PARAMETERS": (_limit, None),
    "ELMO_TF_MAX_DIMENSION": (_limit, None),
    "ELMO_TF_MAX_LAYERS": (_limit, None),
}


def value(name):
    """The value of the variable ``name`` (its default when unset or empty), checked."""
    reader, default = VARIABLES[name]
    text = os.environ.get(name)
    if text is None or (text == "" and name != "ELMO_TF_OFFLINE"):
        return default
    return reader(name, text)


def check():
    """Reads every ``ELMO_TF_*`` variable set; raises ``EnvironmentVariableError`` for the
    first that holds no value of its own or is no variable of elmo-tf (naming the one it is a
    typo of)."""
    for name in sorted(os.environ):
        if not name.startswith(PREFIX):
            continue
        if name not in VARIABLES:
            hint = checks.did_you_mean(name, VARIABLES)
            raise EnvironmentVariableError(
                f"{name} is not a variable of elmo-tf{hint or ''} (they are "
                f"{', '.join(sorted(VARIABLES))}); unset it"
            )
        value(name)
