"""Official-layout ELMo weight files (bilm-tf / AllenNLP HDF5) of random values in a given
shape: what the tests, the docs and the benchmarks use in place of the published files
(``python tests/fixtures/make_weights.py {tiny|small|full|all} [outdir]`` is its command line).

Layout (as read by allennlp.modules.elmo._ElmoCharacterEncoder._load_* and
allennlp.modules.elmo_lstm.ElmoLstm.load_weights, and as found in allennlp
test_fixtures/elmo/lm_weights.hdf5): ``elmo_tf.formats.weight_file.expected_datasets`` lists it. All
float32, contiguous, no compression, no attributes.
"""

import os

import h5py
import numpy as np

OFFICIAL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


# name -> (LSTM dim, projection dim, filters, highway layers); the small and full shapes are
# those of elmo_2x1024_128_2048cnn_1xhighway and elmo_2x4096_512_2048cnn_2xhighway.
SHAPES = {
    "tiny": (32, 16, [[1, 8], [2, 8], [3, 16], [4, 16]], 1),
    "small": (1024, 128, OFFICIAL_FILTERS, 1),
    "full": (4096, 512, OFFICIAL_FILTERS, 2),
}


def options_for(name):
    """The options (bilm-tf's schema) of the shape ``name`` (``SHAPES``)."""
    if name not in SHAPES:
        raise ValueError(name)
    dim, projection_dim, filters, n_highway = SHAPES[name]
    return {
        "lstm": {
            "use_skip_connections": True,
            "projection_dim": projection_dim,
            "cell_clip": 3,
            "proj_clip": 3,
            "dim": dim,
            "n_layers": 2,
        },
        "char_cnn": {
            "activation": "relu",
            "filters": filters,
            "n_highway": n_highway,
            "embedding": {"dim": 16},
            "n_characters": 262,
            "max_characters_per_token": 50,
        },
    }


SEEDS = {"tiny": 1234, "small": 5678, "full": 9012}
SCALE_IN = float(os.environ.get("ELMO_SCALE_IN", "1.5"))
SCALE_REC = float(os.environ.get("ELMO_SCALE_REC", "0.3"))
SCALE_PROJ = float(os.environ.get("ELMO_SCALE_PROJ", "3.5"))


def write_weights(options, path, seed):
    rng = np.random.default_rng(seed)

    def normal(shape, std, mean=0.0):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)

    cnn = options["char_cnn"]
    lstm = options["lstm"]
    char_dim = cnn["embedding"]["dim"]
    filters = cnn["filters"]
    n_filters = sum(f[1] for f in filters)
    proj = lstm["projection_dim"]
    dim = lstm["dim"]
    shapes = {}
    with h5py.File(path, "w") as f:

        def put(name, arr):
            f.create_dataset(name, data=arr)
            shapes[name] = list(arr.shape)

        # 261 rows: ids 0..260 of the char vocabulary (the +1-shifted id 0 = padding is the
        # zero row the loader prepends).
        put("char_embed", normal((cnn["n_characters"] - 1, char_dim), 0.5))
        for i, (width, num) in enumerate(filters):
            fan_in = width * char_dim
            put(f"CNN/W_cnn_{i}", normal((1, width, char_dim, num), 1.0 / np.sqrt(fan_in)))
            put(f"CNN/b_cnn_{i}", normal((num,), 0.05))
        for k in range(cnn["n_highway"]):
            s = 1.0 / np.sqrt(n_filters)
            put(f"CNN_high_{k}/W_carry", normal((n_filters, n_filters), s))
            put(f"CNN_high_{k}/W_transform", normal((n_filters, n_filters), s))
            # tf: t = sigmoid(x W_carry + b_carry);
            # y = t * relu(x W_transform + b_transform) + (1 - t) * x
            put(f"CNN_high_{k}/b_carry", normal((n_filters,), 0.1, mean=-1.0))
            put(f"CNN_high_{k}/b_transform", normal((n_filters,), 0.05))
        put("CNN_proj/W_proj", normal((n_filters, proj), 1.0 / np.sqrt(n_filters)))
        put("CNN_proj/b_proj", normal((proj,), 0.05))
        for d in range(2):
            for layer in range(lstm["n_layers"]):
                g = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
                # input rows (x) and recurrent rows (h_prev) scaled separately: pre-activations
                # O(1), a few % of cells / projections hit the clips, but the recurrence stays
                # contractive (float32 round-off does not blow up over long sequences or a
                # carried state).
                w_in = normal((proj, 4 * dim), SCALE_IN / np.sqrt(proj))
                w_rec = normal((proj, 4 * dim), SCALE_REC / np.sqrt(proj))
                put(g + "W_0", np.concatenate([w_in, w_rec], axis=0))
                put(g + "B", normal((4 * dim,), 0.1))
                put(g + "W_P_0", normal((dim, proj), SCALE_PROJ / np.sqrt(dim)))
    return shapes
