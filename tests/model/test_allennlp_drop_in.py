"""``elmo_tf.allennlp``: AllenNLP's ``Elmo`` and ``batch_to_ids`` for PyTorch code.

Against AllenNLP's own modules' outputs and checkpoints (tests/fixtures/allennlp, made by its
``make_fixture.py`` with AllenNLP's code) and bilm-tf's stored outputs (tests/fixtures/
bilm_fixture). PyTorch code: CI runs this file with ``KERAS_BACKEND=torch``.
"""

import json
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
from support.numerics import REFERENCE_ATOL_ALLENNLP, REFERENCE_ATOL_BILM_TF
from support.paths import BILM, FIXTURES, TINY, bilm_tf_outputs

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="PyTorch code (CI runs it with KERAS_BACKEND=torch)"
)
if keras.config.backend() == "torch":
    import torch

    from elmo_tf.allennlp import Elmo, batch_to_ids

ALLENNLP = FIXTURES / "allennlp"
OPTIONS, WEIGHTS = str(TINY / "options.json"), str(TINY / "weights.hdf5")
ATOL = REFERENCE_ATOL_ALLENNLP
# AllenNLP's own tests hold its Elmo to bilm-tf's stored outputs within 1e-6, which its own
# code meets on some CPUs only (it differs from them by up to 1.2e-6; ours by 1.1e-6 on an AMD
# EPYC Zen 3): the suite's bound for bilm-tf's outputs holds across CPUs (tests/numerics.py).
ALLENNLP_TEST_ATOL = REFERENCE_ATOL_BILM_TF


@pytest.fixture(scope="module")
def reference():
    with open(ALLENNLP / "cases.json", encoding="utf-8") as f:
        cases = json.load(f)
    return cases, dict(np.load(ALLENNLP / "outputs.npz"))


class Tagger(torch.nn.Module if keras.config.backend() == "torch" else object):
    """The tagger of make_fixture.py: Elmo, fine-tuned, and a Linear on top."""

    def __init__(self):
        super().__init__()
        self.elmo = Elmo(OPTIONS, WEIGHTS, 1, requires_grad=True, dropout=0.1)
        self.tag = torch.nn.Linear(self.elmo.get_output_dim(), 5)

    def forward(self, char_ids):
        out = self.elmo(char_ids)
        return self.tag(out["elmo_representations"][0]), out["mask"]


def _word_ids(batch, vocab):
    longest = max(len(s) for s in batch)
    ids = [[vocab.index(w) if w in vocab else len(vocab) + 5 for w in s] for s in batch]
    return torch.tensor([row + [0] * (longest - len(row)) for row in ids])


# ---------------------------------------------------------------- checkpoints


def test_parameters_and_state_dict_are_allennlps():
    """Same keys in the same order, same shapes, and bitwise the same values as AllenNLP's
    Elmo built from the same files; the parameter names are the keys."""
    expected = torch.load(ALLENNLP / "elmo.pt")
    ours = Elmo(OPTIONS, WEIGHTS, 2).state_dict()
    assert list(ours) == list(expected)
    for key, value in expected.items():
        assert ours[key].dtype == value.dtype and torch.equal(ours[key], value), key
    assert [name for name, _ in Elmo(OPTIONS, WEIGHTS, 2).named_parameters()] == list(expected)


def test_allennlp_checkpoint_loads_strict_and_gives_its_outputs(reference):
    """A checkpoint of a model that embedded AllenNLP's Elmo (fine-tuned: every weight moved)
    loads with strict=True and computes AllenNLP's logits."""
    cases, arrays = reference
    tagger = Tagger()
    state = torch.load(ALLENNLP / "tagger.pt")
    assert not torch.equal(
        state["elmo._elmo_lstm._token_embedder._projection.weight"],
        tagger.state_dict()["elmo._elmo_lstm._token_embedder._projection.weight"],
    )
    tagger.load_state_dict(state, strict=True)
    tagger.eval()
    with torch.no_grad():
        logits, _ = tagger(batch_to_ids(cases["batches"][1]))
    np.testing.assert_allclose(logits.numpy(), arrays["tagger/logits"], atol=ATOL, rtol=0)


def test_our_checkpoint_has_allennlps_layout_after_training():
    """After training, our state_dict holds exactly the keys, shapes and dtypes AllenNLP's
    tagger checkpoint holds (so AllenNLP's Elmo loads it with strict=True), and loads back."""
    torch.manual_seed(0)
    tagger = Tagger()
    optimizer = torch.optim.Adam(tagger.parameters(), lr=0.01)
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hello", "!"]])
    before = {k: v.clone() for k, v in tagger.state_dict().items()}
    logits, mask = tagger(ids)
    logits[mask].sum().backward()
    optimizer.step()
    state = tagger.state_dict()
    expected = torch.load(ALLENNLP / "tagger.pt")
    assert list(state) == list(expected)
    assert {k: (v.shape, v.dtype) for k, v in state.items()} == {
        k: (v.shape, v.dtype) for k, v in expected.items()
    }
    moved = [k for k in state if not torch.equal(state[k], before[k])]
    assert "elmo._elmo_lstm._elmo_lstm.forward_layer_1.state_linearity.weight" in moved
    other = Tagger()
    other.load_state_dict(state, strict=True)
    for key, value in other.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_state_dict_round_trips_across_processes(tmp_path):
    """Keys do not depend on how many models a process built: a checkpoint saved after
    building three loads into the first model of a new process."""
    for _ in range(2):
        Elmo(OPTIONS, WEIGHTS, 1)
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, stateful=False).eval()
    with torch.no_grad():
        elmo.scalar_mix_0.gamma.fill_(2.5)
    torch.save(elmo.state_dict(), tmp_path / "elmo.pt")
    ids = batch_to_ids([["Hello", "world", "!"]])
    with torch.no_grad():
        expected = elmo(ids)["elmo_representations"][0].numpy()
    np.save(tmp_path / "ids.npy", ids.numpy())
    script = f"""
import os
os.environ["KERAS_BACKEND"] = "torch"
import numpy as np, torch
from elmo_tf.allennlp import Elmo
elmo = Elmo({OPTIONS!r}, {WEIGHTS!r}, 1, dropout=0.0).eval()
elmo.load_state_dict(torch.load({str(tmp_path / "elmo.pt")!r}), strict=True)
with torch.no_grad():
    out = elmo(torch.from_numpy(np.load({str(tmp_path / "ids.npy")!r})))
np.save({str(tmp_path / "out.npy")!r}, out["elmo_representations"][0].numpy())
"""
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)


# ---------------------------------------------------------------- outputs


@pytest.mark.parametrize("case", ["default", "layer_norm", "boundaries", "fixed_mix", "vocab"])
def test_outputs_equal_allennlps_statefully(reference, case):
    """Each case a fresh Elmo run on its batches in order, the LSTM state carried from batch
    to batch row by row, as AllenNLP does."""
    cases, arrays = reference
    kwargs = cases["cases"][case]
    elmo = Elmo(OPTIONS, WEIGHTS, dropout=0.0, **kwargs).eval()
    for i, batch in enumerate(cases["batches"]):
        words = _word_ids(batch, cases["vocab"]) if case == "vocab" else None
        with torch.no_grad():
            out = elmo(batch_to_ids(batch), words)
        np.testing.assert_array_equal(out["mask"].numpy(), arrays[f"{case}/{i}/mask"])
        assert out["mask"].dtype == torch.bool
        assert len(out["elmo_representations"]) == kwargs["num_output_representations"]
        for k, representation in enumerate(out["elmo_representations"]):
            np.testing.assert_allclose(
                representation.numpy(), arrays[f"{case}/{i}/{k}"], atol=ATOL, rtol=0,
                err_msg=f"{case}, batch {i}, representation {k}",
            )  # fmt: skip


def test_four_d_input(reference):
    _, arrays = reference
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0).eval()
    ids = torch.from_numpy(arrays["four_d/ids"])
    with torch.no_grad():
        out = elmo(ids)
    assert out["mask"].shape == ids.shape[:-1]
    np.testing.assert_allclose(
        out["elmo_representations"][0].numpy(), arrays["four_d/0"], atol=ATOL, rtol=0
    )


def test_stateless_keyword_and_reset_states():
    """stateful=False: a sentence's vectors depend on it alone (not on earlier calls, nor on
    its batch); the default carries state, which reset_states() forgets."""
    first, second = [["The", "bank", "closed", "."]], [["A", "river", "bank"], ["Hello", "!"]]
    stateless = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, stateful=False).eval()
    stateful = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0).eval()
    with torch.no_grad():
        alone = stateless(batch_to_ids(second))["elmo_representations"][0]
        stateless(batch_to_ids(first))
        after = stateless(batch_to_ids(second))["elmo_representations"][0]
        reversed_batch = stateless(batch_to_ids(second[::-1]))["elmo_representations"][0]
        torch.testing.assert_close(after, alone, rtol=0, atol=0)
        torch.testing.assert_close(reversed_batch[1, :3], alone[0], rtol=0, atol=1e-6)
        fresh = stateful(batch_to_ids(second))["elmo_representations"][0]
        carried = stateful(batch_to_ids(second))["elmo_representations"][0]
        assert not torch.allclose(carried, fresh, atol=1e-4)
        stateful.reset_states()
        again = stateful(batch_to_ids(second))["elmo_representations"][0]
    torch.testing.assert_close(again, fresh, rtol=0, atol=0)
    torch.testing.assert_close(fresh, alone, rtol=0, atol=1e-6)


# ---------------------------------------------------------------- a torch.nn.Module


@pytest.mark.parametrize("requires_grad", [True, False])
def test_requires_grad_decides_what_trains(requires_grad):
    """AllenNLP's TestElmoRequiresGrad: the biLM's gradients exist exactly when asked for;
    the scalar mix always trains."""
    elmo = Elmo(OPTIONS, WEIGHTS, 1, requires_grad=requires_grad)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 262, (3, 4, 50)))
    elmo(ids)["elmo_representations"][0].sum().backward()
    grads = {name: p.grad for name, p in elmo.named_parameters()}
    bilm = [g for name, g in grads.items() if "_elmo_lstm" in name]
    assert len(bilm) == 29  # 1 + 4 x 2 + 2 + 2 + 2 x 2 x 4: every biLM tensor of the tiny model
    assert all((g is not None) == requires_grad for g in bilm)
    assert grads["scalar_mix_0.gamma"] is not None
    assert all(p.requires_grad == requires_grad for n, p in elmo.named_parameters() if "_elmo" in n)


def test_fixed_scalar_mix_does_not_train():
    elmo = Elmo(OPTIONS, WEIGHTS, 1, scalar_mix_parameters=[0.0, 1.0, 2.0])
    assert [p.requires_grad for p in elmo.scalar_mix_0.parameters()] == [False] * 4


def test_train_and_eval_switch_dropout():
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.5, stateful=False)
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hello", "!"]])
    assert elmo.training  # a new module is in training mode, as AllenNLP's
    with torch.no_grad():
        trained = elmo(ids)["elmo_representations"][0]
        elmo.eval()
        inferred = [elmo(ids)["elmo_representations"][0] for _ in range(2)]
    torch.testing.assert_close(inferred[0], inferred[1], rtol=0, atol=0)
    dropped = (trained == 0) & (inferred[0] != 0)
    assert 0.3 < dropped.sum() / (inferred[0] != 0).sum() < 0.7
    kept = trained != 0
    torch.testing.assert_close(trained[kept], 2 * inferred[0][kept])


def test_float64_and_devices():
    """.double() computes in float64 (within float32's round-off of float32's result);
    .to("cpu") and .to(torch.float32) bring it back."""
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, stateful=False).eval()
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hello", "!"]])
    with torch.no_grad():
        single = elmo(ids)["elmo_representations"][0]
        double = elmo.double()(ids)["elmo_representations"][0]
        back = elmo.to("cpu").to(torch.float32)(ids)["elmo_representations"][0]
    assert double.dtype == torch.float64 and single.dtype == torch.float32
    np.testing.assert_allclose(double.numpy(), single.numpy(), atol=1e-5, rtol=0)
    torch.testing.assert_close(back, single, rtol=0, atol=0)


# The drop-in in bfloat16 (.to(torch.bfloat16)) against float32, the bundled model's
# representations of the probe set's sentences: measured on an AMD EPYC Zen 4 (AVX-512 BF16),
# mean per-token cosine 0.99998, 1st percentile 0.99996; the bounds leave 20x in 1 - cosine.
@pytest.mark.numerics
def test_bfloat16_keeps_the_interface_within_its_fidelity_bound(monkeypatch):
    from elmo_tf import precision
    from elmo_tf.presets import preset_files
    from elmo_tf.probes import fidelity, word_senses

    if not precision.native_bf16("torch"):
        pytest.skip("this CPU has no native bfloat16")
    sentences = [list(e.tokens) for e in word_senses.load_examples()]
    elmo = Elmo(*map(str, preset_files("sotu")), 2, dropout=0.0, stateful=False).eval()
    ids = batch_to_ids(sentences)
    with torch.no_grad():
        exact = elmo(ids)
        keys = list(elmo.state_dict())
        half = elmo.to(torch.bfloat16)
        approx = half(ids)
    assert list(half.state_dict()) == keys  # the same module, in bfloat16
    assert [x.dtype for x in approx["elmo_representations"]] == [torch.bfloat16] * 2
    torch.testing.assert_close(approx["mask"], exact["mask"], rtol=0, atol=0)
    lengths = exact["mask"].sum(dim=1).numpy()
    for a, b in zip(exact["elmo_representations"], approx["elmo_representations"]):
        row = fidelity.token_fidelity(a.numpy(), b.float().numpy(), lengths)
        assert row.cos_mean >= 0.9995 and row.cos_p1 >= 0.999, row

    # Where the CPU has no native bfloat16, one warning says so (once).
    monkeypatch.setattr(precision, "native_bf16", lambda *a, **k: False)
    fresh = Elmo(*map(str, preset_files("sotu")), 1, dropout=0.0).to(torch.bfloat16)
    with pytest.warns(UserWarning, match="bfloat16 needs a CPU with AVX-512 BF16 or AMX"):
        fresh(batch_to_ids([["Hi"]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh(batch_to_ids([["Hi"]]))


@pytest.mark.skipif(
    keras.config.backend() != "torch" or not torch.cuda.is_available(), reason="no CUDA device"
)
def test_cuda():
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, stateful=False).eval()
    ids = batch_to_ids([["The", "bank", "closed", "."], ["Hello", "!"]])
    with torch.no_grad():
        on_cpu = elmo(ids)["elmo_representations"][0]
        on_gpu = elmo.cuda()(ids.cuda())["elmo_representations"][0]
    assert on_gpu.is_cuda
    np.testing.assert_allclose(on_gpu.cpu().numpy(), on_cpu.numpy(), atol=ATOL, rtol=0)


def test_a_pytorch_training_loop_learns():
    """The tagger trains with Adam in a plain PyTorch loop (the loss falls), and the biLM's
    weights stay frozen by default."""
    torch.manual_seed(0)
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0)
    head = torch.nn.Linear(elmo.get_output_dim(), 3)
    frozen = elmo._elmo_lstm._token_embedder._projection.weight.clone()
    params = [p for p in [*elmo.parameters(), *head.parameters()] if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=0.05)
    ids = batch_to_ids([["The", "bank", "closed", "."], ["A", "river", "bank"]])
    labels = torch.tensor([[0, 1, 2, 0], [1, 2, 1, 0]])
    losses = []
    for _ in range(15):
        out = elmo(ids)
        logits = head(out["elmo_representations"][0])[out["mask"]]
        loss = torch.nn.functional.cross_entropy(logits, labels[out["mask"]])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert torch.equal(elmo._elmo_lstm._token_embedder._projection.weight, frozen)


def test_get_output_dim_and_batch_to_ids(golden):
    assert Elmo(OPTIONS, WEIGHTS, 1).get_output_dim() == 32
    meta, arrays = golden
    for name in ("mixed", "with_empty", "special"):
        ids = batch_to_ids([meta["sentences"][s] for s in meta["batches"][name]])
        assert ids.dtype == torch.int64
        np.testing.assert_array_equal(ids.numpy(), arrays[f"{name}__char_ids"])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e(torch.zeros(3, 50, dtype=torch.long)), "character ids"),
        (lambda e: e(torch.full((1, 2, 50), 262)), "from 0 to 261"),
        (lambda e: e(torch.full((1, 2, 50), 1.5)), "whole numbers"),
        (lambda e: e(torch.ones(1, 2, 7, dtype=torch.long)), "(batch, tokens, 50)"),
    ],
)
def test_bad_inputs_are_one_line(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(Elmo(OPTIONS, WEIGHTS, 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_output_representations": -1}, "integer from 0 to 64"),
        ({"num_output_representations": 1, "scalar_mix_parameters": [1.0]}, "hold 3 values"),
        ({"num_output_representations": 1, "module": object()}, "module=.* is not supported"),
        ({"num_output_representations": True}, "integer from 0 to 64, got True"),
        # A NaN or infinite mix weight made every representation NaN, silently.
        (
            {"num_output_representations": 1, "scalar_mix_parameters": [float("nan"), 0, 0]},
            r"scalar_mix_parameters\[0\] must be a finite number, got nan",
        ),
        (
            {"num_output_representations": 1, "scalar_mix_parameters": [0, float("inf"), 0]},
            r"scalar_mix_parameters\[1\] must be a finite number, got inf",
        ),
        (
            {"num_output_representations": 1, "scalar_mix_parameters": "123"},
            "scalar_mix_parameters must be a list of 3 numbers",
        ),
        (
            {"num_output_representations": 1, "scalar_mix_parameters": ["a", 0, 0]},
            r"scalar_mix_parameters\[0\] must be a finite number, got 'a'",
        ),
        ({"num_output_representations": 1, "dropout": "0.5"}, "dropout must be a finite number"),
        ({"num_output_representations": 1, "dropout": float("nan")}, "dropout must be a finite"),
        ({"num_output_representations": 1, "requires_grad": "false"}, "requires_grad must be True"),
        ({"num_output_representations": 1, "stateful": "no"}, "stateful must be True or False"),
        (
            {"num_output_representations": 1, "keep_sentence_boundaries": 1},
            "keep_sentence_boundaries must be True or False, got 1",
        ),
    ],
)
def test_bad_arguments_are_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Elmo(OPTIONS, WEIGHTS, **kwargs)


@pytest.mark.parametrize(
    ("files", "error", "message"),
    [
        ((None, WEIGHTS), TypeError, "options_file must be a path or an http.s. URL, got NoneType"),
        ((OPTIONS, 123), TypeError, "weight_file must be a path or an http.s. URL, got int"),
        (("", WEIGHTS), ValueError, "options_file is empty"),
    ],
)
def test_files_that_are_no_path_are_named(files, error, message):
    with pytest.raises(error, match=message):
        Elmo(*files, 1)


@pytest.mark.parametrize("inputs", [None, "Hello world", b"ids"])
def test_inputs_that_are_no_ids_are_named(inputs):
    with pytest.raises(TypeError, match="inputs must be character ids .* got (NoneType|str|bytes)"):
        Elmo(OPTIONS, WEIGHTS, 1)(inputs)


def test_vocab_to_cache_that_is_one_string_is_refused():
    # It was read as one token per character.
    with pytest.raises(TypeError, match="vocab_to_cache must be a list of tokens, got one string"):
        Elmo(OPTIONS, WEIGHTS, 1, vocab_to_cache="abc")


@pytest.mark.parametrize(
    "vocab", [{"a", "b"}, (w for w in ["a", "b"]), {"a": 0}], ids=["set", "generator", "dict"]
)
def test_vocab_to_cache_without_an_order_is_refused_in_one_line(vocab):
    """A word's index is its place in the list: a set or a dict has no place to give, a
    generator is read once (they raised bare TypeErrors from deep in the cache)."""
    with pytest.raises(TypeError, match=r"vocab_to_cache must be a list of tokens \(a word's"):
        Elmo(OPTIONS, WEIGHTS, 1, vocab_to_cache=vocab)


def test_bfloat16_ids_are_refused_in_one_line():
    """bfloat16 holds 8 bits of mantissa: ids 257 to 261 are not there (it raised "Got
    unsupported ScalarType BFloat16"); float16 and float32 ids stay accepted."""
    ids = batch_to_ids([["<S>", "a"]])
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0)
    with pytest.raises(TypeError, match="got bfloat16, which cannot hold ids above 256 exactly"):
        elmo(ids.to(torch.bfloat16))
    with torch.no_grad():
        expected = elmo(ids)["elmo_representations"][0].numpy()
        for dtype in (torch.float16, torch.float32):
            elmo.reset_states()
            got = elmo(ids.to(dtype))["elmo_representations"][0].numpy()
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("shape", [(2, 0, 50), (0, 0, 50), (3, 2, 0, 50)])
def test_a_batch_of_empty_sentences_gives_empty_representations(shape):
    # backends.md: batch_to_ids of empty sentences gives (batch, 0, 50); the reshape to
    # (-1, 0, 50) failed ("the unspecified dimension size -1 can be any value").
    elmo = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, stateful=False)
    out = elmo(torch.zeros(shape, dtype=torch.long))
    assert tuple(out["elmo_representations"][0].shape) == (*shape[:-1], elmo.get_output_dim())
    assert tuple(out["mask"].shape) == shape[:-1]
    assert tuple(batch_to_ids([[], []]).shape) == (2, 0, 50)


def test_word_inputs_of_another_shape_are_refused():
    elmo = Elmo(OPTIONS, WEIGHTS, 1, vocab_to_cache=["@@PADDING@@", "a"])
    with pytest.raises(ValueError, match="do not match"):
        elmo(batch_to_ids([["a", "a"]]), torch.ones(1, 3, dtype=torch.long))
    # the shape as given, not as reshaped to (rows, timesteps)
    with pytest.raises(ValueError, match=r"word_inputs of shape \(1, 2, 3\) do not match"):
        elmo(batch_to_ids([["a", "a"]]), torch.ones(1, 2, 3, dtype=torch.long))


# ---------------------------------------------------------------- AllenNLP's own tests
# allennlp/tests/modules/elmo_test.py, moved onto the public interface: the private biLM and
# character encoder are read through Elmo with fixed mixes that select one layer.

BILM_OPTIONS, BILM_WEIGHTS = str(BILM / "options.json"), str(BILM / "lm_weights.hdf5")
ONLY = {0: [1e10, -1e10, -1e10], 2: [-1e10, -1e10, 1e10]}  # softmax: exactly one layer


def test_elmo_bilm_statefully_against_bilm_tf():
    """TestElmoBiLm.test_elmo_bilm: the top layer over the ten batches in order, state carried."""
    sentences, expected = bilm_tf_outputs()
    elmo = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 1, dropout=0.0, scalar_mix_parameters=ONLY[2])
    for i in range(10):
        batch = [sentences[k][i].split() for k in range(3)]
        with torch.no_grad():
            out = elmo(batch_to_ids(batch))
        lengths = out["mask"].sum(dim=1).tolist()
        assert lengths == [len(s) for s in batch]
        for k in range(3):
            np.testing.assert_allclose(
                out["elmo_representations"][0][k, : lengths[k]].numpy(), expected[k][i],
                atol=ALLENNLP_TEST_ATOL, rtol=0, err_msg=f"batch {i}, row {k}",
            )  # fmt: skip


def test_elmo_token_representation():
    """TestElmoTokenRepresentation: the context-free token vectors of vocab_test.txt against
    bilm-tf's, in ten batches of 50 tokens."""
    import h5py

    words = (BILM / "vocab_test.txt").read_text(encoding="utf-8").strip().split("\n")
    elmo = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 1, dropout=0.0, scalar_mix_parameters=ONLY[0],
                stateful=False)  # fmt: skip
    vectors = []
    for k in range(10):
        with torch.no_grad():
            out = elmo(batch_to_ids([words[k * 50 : (k + 1) * 50]]))
        vectors.append(out["elmo_representations"][0][0, :, :16].numpy())  # layer 0 is [t; t]
    with h5py.File(BILM / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    actual = np.concatenate(vectors)
    np.testing.assert_allclose(actual[: len(words)], expected, atol=ALLENNLP_TEST_ATOL, rtol=0)


def test_elmo_token_representation_bos_eos():
    """The <S> and </S> positions (keep_sentence_boundaries) equal the literal tokens."""
    elmo = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 1, dropout=0.0, scalar_mix_parameters=ONLY[0],
                keep_sentence_boundaries=True, stateful=False)  # fmt: skip
    for index, token in [(0, "<S>"), (2, "</S>")]:
        with torch.no_grad():
            out = elmo(batch_to_ids([[token]]))["elmo_representations"][0]
        torch.testing.assert_close(out[0, index], out[0, 1], rtol=0, atol=1e-6)


def test_elmo_shapes_with_and_without_boundaries():
    """TestElmo.test_elmo and test_elmo_keep_sentence_boundaries."""
    sentences = [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from",
                                            "Elmo", "."]]  # fmt: skip
    for keep, steps in ((False, 7), (True, 9)):
        elmo = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 2, dropout=0.0, keep_sentence_boundaries=keep)
        out = elmo(batch_to_ids(sentences))
        assert [list(r.size()) for r in out["elmo_representations"]] == [[2, steps, 32]] * 2
        assert list(out["mask"].size()) == [2, steps]


def test_elmo_4d_input_equals_each_batch_alone():
    """TestElmo.test_elmo_4D_input (reset_states() in place of AllenNLP's private call)."""
    groups = [
        [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo"]],
        [["1", "2"], ["1", "2", "3", "4", "5", "6", "7"]],
        [["1", "2", "3", "4", "50", "60", "70"], ["The"]],
    ]
    elmo = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 2, dropout=0.0)
    each = [batch_to_ids(g) for g in groups]
    steps = max(ids.shape[1] for ids in each)
    each = [torch.nn.functional.pad(ids, (0, 0, 0, steps - ids.shape[1])) for ids in each]
    with torch.no_grad():
        four_d = elmo(torch.stack(each, dim=1))["elmo_representations"][0]
        for k, ids in enumerate(each):
            elmo.reset_states()
            alone = elmo(ids)["elmo_representations"][0]
            np.testing.assert_array_almost_equal(four_d[:, k].numpy(), alone.numpy())


def test_elmo_vocab_cache_equals_characters_and_falls_back():
    """test_elmo_bilm_can_cache_char_cnn_embeddings, ..._does_not_raise_error_for_uncached_words
    and ..._handle_higher_dimensional_input_with_cache."""
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({w for s in sentences for w in s})]
    ids, words = batch_to_ids(sentences), _word_ids(sentences, vocab)
    plain = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 1, dropout=0.0).eval()
    cached = Elmo(BILM_OPTIONS, BILM_WEIGHTS, 1, dropout=0.0, vocab_to_cache=vocab).eval()
    with torch.no_grad():
        expected = plain(ids)
        out = cached(ids, words)
        np.testing.assert_array_equal(out["mask"].numpy(), expected["mask"].numpy())
        np.testing.assert_array_almost_equal(
            out["elmo_representations"][0].numpy(), expected["elmo_representations"][0].numpy(),
            decimal=6,
        )  # fmt: skip
        oov = batch_to_ids([["This", "is", "OOV"], ["so", "is", "this"]])
        cached(oov, _word_ids([["This", "is", "OOV"], ["so", "is", "this"]], vocab))
        cached.reset_states()
        wide = cached(torch.stack([ids] * 4, dim=1), torch.stack([words] * 4, dim=1))
    for k in range(4):
        np.testing.assert_array_almost_equal(
            wide["elmo_representations"][0][:, k].numpy(), out["elmo_representations"][0].numpy()
        )


def _cached_against_characters(vocab, sentences, words):
    plain = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0).eval()
    cached = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, vocab_to_cache=vocab).eval()
    ids = batch_to_ids(sentences)
    with torch.no_grad():
        expected = plain(ids)["elmo_representations"][0].numpy()
        got = cached(ids, words)["elmo_representations"][0].numpy()
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_a_word_index_one_past_the_cache_falls_back_to_the_characters():
    """An index equal to ``len(vocab_to_cache)`` is a word the cache does not hold: AllenNLP
    runs the characters then (an index table lookup would fail, or read another row)."""
    vocab = ["@@PADDING@@", "the", "cat"]
    sentences = [["the", "cat", "sat"], ["cat"]]
    _cached_against_characters(vocab, sentences, torch.tensor([[1, 2, len(vocab)], [2, 0, 0]]))


def test_a_vocabulary_past_one_chunk_of_the_cache_is_cached_whole():
    """The cache computes its token vectors 1,024 words at a time: the words of the last,
    partial chunk are there, each at its own index."""
    vocab = ["@@PADDING@@", *(f"w{i}" for i in range(1, 1030))]  # 1,030: a chunk and 6 more
    sentences = [["w1", "w1023", "w1024"], ["w1025", "w1029"]]
    words = torch.tensor([[vocab.index(w) for w in s] + [0] * (3 - len(s)) for s in sentences])
    _cached_against_characters(vocab, sentences, words)
