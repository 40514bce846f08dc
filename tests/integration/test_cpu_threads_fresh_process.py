"""``elmo_tf.configure_threads``: TensorFlow's pools for inference, set before its first op."""

import os
import subprocess
import sys

from elmo_tf.system import cpu_threads


def test_sets_the_pools_in_a_fresh_process():
    code = (
        "import elmo_tf, tensorflow as tf\n"
        "print(elmo_tf.configure_threads(), elmo_tf.configure_threads(1, 2))\n"
        "tf.constant(1.0) + 1.0\n"  # the pools start here, with the setting
        "t = tf.config.threading\n"
        "print(t.get_intra_op_parallelism_threads(), t.get_inter_op_parallelism_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in cpu_threads.ENV_VARS}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    intra, inter = cpu_threads.recommended_threads()
    assert out == [f"({intra}, {inter}) (1, 2)", "1 2"]
