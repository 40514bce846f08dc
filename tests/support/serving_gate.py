"""``gate_servable_run``: holds requests inside the model until the test lets them go.

Shared by ``test_serving.py`` and ``test_serving_robustness.py``, which fill the batch queue
(or let a request wait in it) behind a request that is being computed.
"""

import threading

from elmo_tf.serving.model_manager import Servable


def gate_servable_run(monkeypatch, timeout):
    """Patches ``Servable.run`` (undone by ``monkeypatch``) so that each call sets ``entered``
    and then waits for ``release`` (at most ``timeout`` seconds, else it fails) before it runs
    the model; returns ``(entered, release)``, two ``threading.Event``."""
    entered, release = threading.Event(), threading.Event()
    run = Servable.run

    def gated_run(self, key, inputs):
        entered.set()
        assert release.wait(timeout)
        return run(self, key, inputs)

    monkeypatch.setattr(Servable, "run", gated_run)
    return entered, release
