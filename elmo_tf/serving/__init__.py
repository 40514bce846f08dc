"""Serving ELMo over TF Serving's protocol: deployment assets and a Python model server.

- The repository's ``serving/`` folder: ``models.config``, ``batching_parameters.txt``,
  ``monitoring.config``, ``docker-compose.yml``:
  run the official TF Serving image on a model exported with ``elmo-tf export saved-model``.
- ``elmo_tf.serving.server``: a model server with TF Serving's gRPC (``PredictionService``,
  ``ModelService``) and REST APIs, version polling and dynamic batching (``elmo-tf serve``).
- ``elmo_tf.serving.client``: ``embed(server, sentences)`` on the stock TF Serving stubs
  (``elmo-tf client``); it works against either server.
- ``serving/loadtest.py``: a bounded load test.

See ``serving/README.md``. Importing this package imports nothing heavy: ``options``,
``addresses`` and ``request_limits`` need nothing more, and the server's modules check the
``[serving]`` extra and the Keras backend once, in ``_deps``, before their imports.
"""
