"""``ELMo`` on Keras's PyTorch backend behaves as a ``torch.nn.Module``: stable ``state_dict``
keys, ``trainable`` and ``requires_grad`` in agreement, ``train()``/``eval()`` driving dropout,
a one-line error for weights converted under Keras. CI runs this file with
``KERAS_BACKEND=torch``.
"""

import keras
import numpy as np
import pytest
from support.paths import TINY

import elmo_tf

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="PyTorch code (CI runs it with KERAS_BACKEND=torch)"
)
if keras.config.backend() == "torch":
    import torch

IDS = elmo_tf.batch_to_ids([["The", "bank", "closed", "."], ["Hello", "!"]])


def _model(**kwargs):
    return elmo_tf.load_pretrained(TINY / "options.json", TINY / "weights.hdf5", **kwargs)


def test_state_dict_keys_do_not_depend_on_earlier_models():
    first = _model()
    keys = list(first.state_dict())
    for _ in range(2):
        assert list(_model().state_dict()) == keys
    assert all(key.split(".")[-1].startswith("elmo/") for key in keys)


def test_a_checkpoint_loads_into_another_instance():
    source = _model()
    with torch.no_grad():
        source.scalar_mixes[0].gamma.value.fill_(3.0)
    target = _model()
    target.load_state_dict(source.state_dict(), strict=True)
    np.testing.assert_array_equal(
        target(IDS)["elmo"].detach().numpy(), source(IDS)["elmo"].detach().numpy()
    )


def test_trainable_and_requires_grad_agree():
    model = _model(trainable=False)
    assert model.trainable_weights == []
    assert not any(p.requires_grad for p in model.parameters())
    model.trainable = True
    assert all(p.requires_grad for p in model.parameters() if p.is_floating_point())
    frozen = _model()
    from elmo_tf.models.elmo import set_fine_tuning

    set_fine_tuning(frozen, "mix")
    trained = {id(v.value) for v in frozen.trainable_weights}
    for parameter in frozen.parameters():
        if parameter.is_floating_point():
            assert parameter.requires_grad == (id(parameter) in trained)


def test_train_and_eval_drive_dropout():
    model = _model(dropout=0.5)
    assert not model.training  # a new model infers, as a Keras model does by default
    inferred = model(IDS)["elmo"].detach()
    model.train()
    trained = model(IDS)["elmo"].detach()
    assert 0.3 < ((trained == 0) & (inferred != 0)).sum() / (inferred != 0).sum() < 0.7
    model.eval()
    torch.testing.assert_close(model(IDS)["elmo"].detach(), inferred, rtol=0, atol=0)
    torch.testing.assert_close(
        model(IDS, training=False)["elmo"].detach(), inferred, rtol=0, atol=0
    )


def test_weights_converted_under_keras_are_one_line():
    model = _model().double()
    with pytest.raises(TypeError, match="weights are float64 .* build the model with dtype="):
        model(IDS)


def test_float64_model():
    single = _model()(IDS)["elmo"].detach().numpy()
    double = _model(dtype="float64")(IDS)["elmo"].detach()
    assert double.dtype == torch.float64
    np.testing.assert_allclose(double.numpy(), single, atol=1e-5, rtol=0)
