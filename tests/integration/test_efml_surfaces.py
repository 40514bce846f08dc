"""An ELMoForManyLangs model on the serving surfaces, end to end: its SavedModel maps tokens
with the model's own tables in the graph (core ops: TF Serving's TF1 loader runs every
signature, the warm-up records included), ``elmo-tf serve`` answers over gRPC with EFML's
numbers and checks ``char_ids`` against the model's own bounds; the exports that take bilm-tf's
ids only refuse it in one line."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from support.foreign_models import EFML_TINY, TOLERANCE, efml_golden
from tensorflow_serving.apis import prediction_service_pb2_grpc

from elmo_tf.export.saved_model import export_saved_model
from elmo_tf.export.saved_model_warmup import read_warmup_requests
from elmo_tf.models import ELMo
from elmo_tf.serving.client import embed, make_request
from elmo_tf.serving.server import ModelServer, ServerOptions


@pytest.fixture(scope="module")
def efml_export(tmp_path_factory):
    model = ELMo.from_preset(str(EFML_TINY))
    base = tmp_path_factory.mktemp("efml_export")
    return model, export_saved_model(model, str(base), version=1)


def _sentences():
    """The golden sentences whose tokens survive a whitespace split (the default signature)."""
    sentences, golden = efml_golden()
    kept = [i for i, s in enumerate(sentences) if all(t.split() == [t] for t in s)]
    return [sentences[i] for i in kept], [golden[f"average_{i}"] for i in kept]


def test_every_signature_gives_efmls_numbers_in_tf_servings_loader(efml_export):
    model, path = efml_export
    sentences, averages = _sentences()
    width = max(len(s) for s in sentences)
    feeds = {
        "default": {"sentences": [" ".join(s) for s in sentences]},
        "tokens": {
            "tokens": [s + [""] * (width - len(s)) for s in sentences],
            "sequence_len": [len(s) for s in sentences],
        },
        "char_ids": {"char_ids": model.batch_to_ids(sentences)},  # 51 wide: the word ids last
    }
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        for name, feed in feeds.items():
            signature = meta_graph.signature_def[name]
            fetch = signature.outputs["elmo"].name
            elmo = session.run(fetch, {signature.inputs[k].name: v for k, v in feed.items()})
            for i, (sentence, average) in enumerate(zip(sentences, averages)):
                got = elmo[i, : len(sentence)]
                np.testing.assert_allclose(got, average, rtol=0, atol=TOLERANCE, err_msg=name)
    (name, inputs), *_ = [r for r in read_warmup_requests(path) if r[0] == "char_ids"]
    assert inputs["char_ids"].tensor_shape.dim[2].size == model.config.id_width


def test_the_server_answers_with_efmls_numbers_and_the_models_id_bounds(request, efml_export):
    model, path = efml_export
    server = ModelServer(ServerOptions(str(path.rsplit("/", 1)[0]), port=0, rest_port=None,
                                       poll_seconds=0))  # fmt: skip
    request.addfinalizer(lambda: server.stop(grace=5))
    server.start()
    address = f"127.0.0.1:{server.port}"
    sentences, averages = _sentences()
    outputs = embed(address, [" ".join(s) for s in sentences], outputs=["elmo"])
    for i, (sentence, average) in enumerate(zip(sentences, averages)):
        np.testing.assert_allclose(outputs["elmo"][i, : len(sentence)], average, rtol=0,
                                   atol=TOLERANCE)  # fmt: skip
    ids = model.batch_to_ids(sentences[:1])
    ids[0, 0, 3] = model.config.n_characters  # one past the model's character table
    bad = make_request([["a"]], signature="char_ids")
    bad.inputs["char_ids"].CopyFrom(tf.make_tensor_proto(ids))
    channel = grpc.insecure_channel(address)
    request.addfinalizer(channel.close)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(bad, timeout=60)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"ids in [0, {model.config.n_characters - 1}]" in error.value.details()
    latin1 = make_request(["x"])
    latin1.inputs["sentences"].CopyFrom(tf.make_tensor_proto(np.array([b"caf\xe9 ."], object)))
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(latin1, timeout=60)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must be UTF-8 text for this model" in error.value.details()
