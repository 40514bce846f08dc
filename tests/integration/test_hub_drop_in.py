"""Code written for TF Hub's ``google/elmo/3`` runs on an elmo-tf export with only the URL
replaced by the export's path: the six forms most often found in public code."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from support.extras import installed

from elmo_tf.cli.main import main

pytestmark = [
    pytest.mark.skipif(not installed("tensorflow_hub", "tf_keras"), reason="needs [hub]"),
]

# Each form as public code writes it, with ELMO standing where the TF Hub URL stood. Every
# form appends (name, result shape) to RESULTS.
FORMS = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub

    ELMO = sys.argv[1]
    RESULTS = []
    sentences = ["the cat sat on the mat", "a bank by the river", "hello"]
    labels = np.array([1, 0, 1])

    # 1. Sequential with input_shape, predict on a list of strings
    model = tf.keras.Sequential([hub.KerasLayer(ELMO, input_shape=[], dtype=tf.string)])
    RESULTS.append(("sequential_predict", model.predict(np.array(sentences), verbose=0).shape))

    # 2. Input(shape=()) -> frozen KerasLayer -> Dense -> fit
    inputs = tf.keras.layers.Input(shape=(), dtype=tf.string)
    vectors = hub.KerasLayer(ELMO, trainable=False)(inputs)
    classifier = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="softmax")(vectors))
    classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    classifier.fit(np.array(sentences), labels, epochs=1, verbose=0)
    RESULTS.append(("functional_fit", classifier.predict(np.array(sentences), verbose=0).shape))

    # 3. Input(shape=(1,)) -> squeeze -> KerasLayer, trainable: the mix weights move and the
    # export's regularization loss is collected
    inputs = tf.keras.layers.Input(shape=(1,), dtype=tf.string)
    elmo = hub.KerasLayer(ELMO, trainable=True)
    vectors = elmo(tf.squeeze(tf.cast(inputs, tf.string), axis=1))
    classifier = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="softmax")(vectors))
    classifier.compile(optimizer=tf.keras.optimizers.Adam(0.05),
                       loss="sparse_categorical_crossentropy")
    before = [w.numpy().copy() for w in elmo.trainable_weights]
    classifier.fit(np.array(sentences)[:, None], labels, epochs=3, verbose=0)
    moved = max(float(np.abs(w.numpy() - b).max()) for w, b in zip(elmo.trainable_weights, before))
    RESULTS.append(("squeeze_trainable_fit", classifier.predict(
        np.array(sentences)[:, None], verbose=0).shape))
    RESULTS.append(("trainable_weights", (len(elmo.trainable_weights),)))
    RESULTS.append(("regularization_losses", (len(elmo.losses),)))
    RESULTS.append(("mix_weights_moved", (int(moved > 1e-4),)))

    # 4. The default signature, all outputs as a dict
    outputs = hub.KerasLayer(ELMO, signature="default", signature_outputs_as_dict=True)(
        np.array(sentences))
    RESULTS.append(("signature_dict_elmo", tuple(outputs["elmo"].shape)))

    # 5. hub.load + signatures["default"]
    loaded = hub.load(ELMO)
    RESULTS.append(("load_default_elmo",
                    tuple(loaded.signatures["default"](tf.constant(sentences))["elmo"].shape)))

    # 6. hub.load + signatures["tokens"]
    tokens = [s.split() for s in sentences]
    width = max(map(len, tokens))
    padded = tf.constant([t + [""] * (width - len(t)) for t in tokens])
    lengths = tf.constant([len(t) for t in tokens], tf.int32)
    out = loaded.signatures["tokens"](tokens=padded, sequence_len=lengths)
    RESULTS.append(("load_tokens_elmo", tuple(out["elmo"].shape)))

    # The other outputs the TF Hub way: as_dict through arguments, then output_key
    lstm = hub.KerasLayer(ELMO, arguments={"as_dict": True}, output_key="lstm_outputs1")
    RESULTS.append(("arguments_as_dict", tuple(lstm(tf.constant(sentences)).shape)))

    print("RESULTS " + json.dumps([(name, list(shape)) for name, shape in RESULTS]))
    """
)


@pytest.mark.stress
def test_six_tf_hub_forms_run_unchanged(tmp_path):
    path = tmp_path / "elmo"
    # the bundled model (2P = 256), with the paper's lambda so a regularization loss exists
    assert main(["export", "saved-model", str(path), "--l2-coefficient", "0.001"]) == 0
    script = tmp_path / "forms.py"
    script.write_text(FORMS, encoding="utf-8")
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")  # tf.keras is Keras 2, as TF Hub needs
    done = subprocess.run(
        [sys.executable, str(script), str(path / "1")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")]
    results = {name: tuple(shape) for name, shape in json.loads(line[len("RESULTS ") :])}
    assert results == {
        "sequential_predict": (3, 256),
        "functional_fit": (3, 2),
        "squeeze_trainable_fit": (3, 2),
        "trainable_weights": (2,),  # the ScalarMix weights and gamma
        "regularization_losses": (1,),
        "mix_weights_moved": (1,),
        "signature_dict_elmo": (3, 6, 256),
        "load_default_elmo": (3, 6, 256),
        "load_tokens_elmo": (3, 6, 256),
        "arguments_as_dict": (3, 6, 256),
    }
