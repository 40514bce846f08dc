"""What the model server's modules need, checked once, before any of it is imported.

- the ``[serving]`` extra (grpcio, tensorflow-serving-api, aiohttp): without it, one line naming
  what is missing and the command that installs it (``elmo_tf.system.extras``);
- Keras on TensorFlow: on another backend, one line naming it (``elmo_tf.backend``), before
  TensorFlow is imported.

Each module of the server imports this one first, then its dependencies plainly (the isort
section ``serving-requirements`` in ``pyproject.toml`` keeps this import above them).
``options``, ``addresses`` and ``request_limits`` import neither, so the command line builds
``elmo-tf serve``'s flags without the extra; the gRPC client (``client``) needs the extra but
not Keras, and says so through ``elmo-tf client``'s own check.
"""

from elmo_tf import backend
from elmo_tf.system import extras

extras.require("serving", "elmo_tf.serving")
backend.require_tensorflow("serving")
