"""The backends against each other: JAX and PyTorch give TensorFlow's numbers, without
TensorFlow, and a ``.keras`` file moves between backends.

This process runs TensorFlow; each other backend runs in a child process (``KERAS_BACKEND``
is read once per process) where ``import tensorflow`` fails, as where it is not installed.
The child embeds sentences with the published ``small`` shape, loads a ``.keras`` file this
process saved, and saves one of its own; this process compares. A backend that is not
installed is skipped, naming it.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from support.numerics import REFERENCE_ATOL_ALLENNLP, assert_reordered, to_numpy
from support.paths import TINY

import elmo_tf

# Different frameworks' kernels (oneDNN, XLA, ATen) sum in different orders: the tolerance the
# suite allows between frameworks (AllenNLP's PyTorch against this TensorFlow model).
ATOL = REFERENCE_ATOL_ALLENNLP
SENTENCES = [["The", "bank", "closed", "."], ["A", "river", "bank", "by", "the", "town"], []]

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.modules["tensorflow"] = None  # import tensorflow fails, as where it is not installed
    import keras, numpy as np
    import elmo_tf

    options, weights, tf_keras_file, own_keras_file, out = sys.argv[1:6]
    sentences = json.loads(sys.argv[6])
    small = elmo_tf.load_pretrained(options, weights)
    embedded = small.embed(sentences)
    restored = keras.models.load_model(tf_keras_file)  # saved by TensorFlow
    ids = elmo_tf.batch_to_ids(sentences)
    called = {k: keras.ops.convert_to_numpy(v) for k, v in restored(ids).items()}
    mine = elmo_tf.load_pretrained(*sys.argv[7:9], num_output_representations=2)
    mine.scalar_mixes[1].scalar_weights.assign([1.0, -1.0, 0.5])
    mine.save(own_keras_file)
    own = {k: keras.ops.convert_to_numpy(v) for k, v in mine(ids).items()}
    np.savez(out, **{f"small_{k}": v for k, v in embedded.items()},
             **{f"restored_{k}": v for k, v in called.items()},
             **{f"own_{k}": v for k, v in own.items()})
    print(json.dumps({"backend": keras.config.backend(),
                      "tensorflow": [m for m in sys.modules if m.startswith("tensorflow")
                                     and sys.modules[m] is not None]}))
    """
)


@pytest.fixture(scope="module")
def tf_keras_file(tmp_path_factory):
    """A ``.keras`` file of the tiny model with two mixes and unequal weights, saved here."""
    model = elmo_tf.load_pretrained(
        TINY / "options.json", TINY / "weights.hdf5", num_output_representations=2
    )
    model.scalar_mixes[0].scalar_weights.assign([0.5, -0.25, 1.0])
    path = tmp_path_factory.mktemp("keras") / "tiny.keras"
    model.save(path)
    return path, model


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_a_backend_gives_tensorflows_numbers_without_tensorflow(
    name, tmp_path, small_official_files, tf_keras_file
):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[{name}]')")
    saved, tf_model = tf_keras_file
    own = tmp_path / f"{name}.keras"
    out = tmp_path / "out.npz"
    env = dict(os.environ, KERAS_BACKEND=name)
    argv = [*map(str, small_official_files), str(saved), str(own), str(out)]
    argv += [json.dumps(SENTENCES), str(TINY / "options.json"), str(TINY / "weights.hdf5")]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"backend": name, "tensorflow": []}
    child = dict(np.load(out))

    # the published small shape, embedded there and here
    small = elmo_tf.load_pretrained(*small_official_files).embed(SENTENCES)
    for key, value in small.items():
        np.testing.assert_allclose(child[f"small_{key}"], value, rtol=0, atol=ATOL, err_msg=key)
    # a .keras file saved by TensorFlow, called there
    ids = elmo_tf.batch_to_ids(SENTENCES)
    for key, value in tf_model(ids).items():
        np.testing.assert_allclose(
            child[f"restored_{key}"], to_numpy(value), rtol=0, atol=ATOL, err_msg=key
        )
    # and the other way: a .keras file saved there, loaded and called here
    restored = keras.models.load_model(own)
    assert restored.num_output_representations == 2
    for key, value in restored(ids).items():
        np.testing.assert_allclose(
            to_numpy(value), child[f"own_{key}"], rtol=0, atol=ATOL, err_msg=key
        )
    assert_reordered(
        restored.scalar_mixes[1].scalar_weights.numpy(), np.array([1.0, -1.0, 0.5], np.float32)
    )
