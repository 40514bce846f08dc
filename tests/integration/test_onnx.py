"""The ONNX export: built-in operators only, both axes dynamic, ONNX Runtime reproduces ``embed``
(tiny and small shapes, ragged batches), each weight stored once, the export's memory bounded,
the runner refuses bad input and runs without TensorFlow, the Triton model repository
describes the model it holds, and the int8 file (--precision int8) quantises the loops'
matmuls within its fidelity bounds."""

import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import keras
import numpy as np
import onnx
import onnxruntime
import pytest
from google.protobuf import text_format
from support.fixtures import made_once
from support.numerics import assert_reordered
from support.onnx_models import identity_model
from support.paths import ROOT
from support.special_files import special_file
from support.triton import triton_model_config_class

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.errors import ModelFileError
from elmo_tf.export.onnx import OnnxModel, checked_char_ids, run_onnx, session
from elmo_tf.export.onnx_export import OPSET, non_standard_operators, operators
from elmo_tf.export.onnx_graph import op_counts
from elmo_tf.export.onnx_triton import write_triton_repository
from elmo_tf.formats.embedding_file import read_sentences, write_embeddings
from elmo_tf.models import output_keys

REPO = str(ROOT)


OUTPUT_KEYS = output_keys(2)  # every test model has two LSTM layers


# Padding rows, a one-token sentence, words past 50 characters (cut to 48 bytes), multi-byte
# characters, an empty sentence, and lengths from 0 to 30.
RAGGED = [
    ["The", "bank", "closed", "."],
    ["Hi"],
    [],
    ["x" * 60, "Zürich", "é" * 30, "!"],
    ["a", "rose", "is", "a", "rose", "is", "a", "rose"] * 3 + ["."] * 6,
    ["one"],
]


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory, tiny_files):
    """``(model.onnx, Triton repository)`` of the tiny model, as ``elmo-tf export onnx
    OUTPUT --triton DIR`` writes them."""
    options, weights = tiny_files

    def make(directory):
        argv = ["export", "onnx", str(directory / "elmo.onnx"), "--triton", str(directory / "tr")]
        assert main(argv + ["--options", str(options), "--weights", str(weights)]) == 0

    directory = made_once(tmp_path_factory, "tiny_onnx", make)
    return directory / "elmo.onnx", directory / "tr"


@pytest.fixture(scope="module")
def tiny_session(tiny_onnx):
    return session(tiny_onnx[0])


def test_export_has_one_dynamic_input_named_outputs_and_builtin_operators_only(
    tiny_onnx, tiny_files
):
    proto = onnx.load(str(tiny_onnx[0]))
    graph = proto.graph

    def shape(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert [(i.name, i.type.tensor_type.elem_type, shape(i)) for i in graph.input] == [
        ("char_ids", onnx.TensorProto.INT32, ["batch", "time", 50])
    ]
    assert [(o.name, shape(o)) for o in graph.output] == [
        ("word_emb", ["batch", "time", 16]),
        ("lstm_outputs1", ["batch", "time", 32]),
        ("lstm_outputs2", ["batch", "time", 32]),
        ("elmo", ["batch", "time", 32]),
        ("default", ["batch", 32]),
        ("sequence_len", ["batch"]),
    ]
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", OPSET)]
    found = operators(proto)
    # Every node, those inside the LSTM loops' bodies too, is of the default ONNX domain: no
    # custom op, no com.microsoft contrib op.
    assert {domain for domain, _ in found} == {""}
    assert all(onnx.defs.has(op, OPSET) for _, op in found)
    assert ("", "Loop") in found and ("", "Unique") in found  # the time loop is not unrolled
    assert non_standard_operators(proto) == []
    metadata = {p.key: p.value for p in proto.metadata_props}
    options = json.loads(tiny_files[0].read_text(encoding="utf-8"))
    assert json.loads(metadata["elmo_tf.options"])["lstm"]["dim"] == options["lstm"]["dim"]
    assert metadata["elmo_tf.version"] == elmo_tf.__version__


@pytest.mark.numerics
def test_outputs_equal_the_model_on_golden_batches(tiny_session, tiny_model, golden):
    meta, _ = golden
    for name, keys in meta["batches"].items():
        char_ids = elmo_tf.batch_to_ids([meta["sentences"][k] for k in keys])
        outputs = run_onnx(tiny_session, char_ids)
        assert list(outputs) == list(OUTPUT_KEYS)
        expected = tiny_model(char_ids)
        for key in OUTPUT_KEYS:
            assert_reordered(outputs[key], expected[key], err_msg=f"{name} {key}")


@pytest.mark.numerics
def test_ragged_batches_of_every_shape_in_one_session_equal_embed(tiny_session, tiny_model):
    """One session, the batch and the length changing from call to call, all-zero rows
    (padding sentences) among real ones: each row equals ``embed``'s numbers for it, and the
    padding is zero."""
    expected = tiny_model.embed(RAGGED)
    for rows, pad_rows, extra_length in [(6, 0, 0), (3, 2, 5), (1, 0, 0), (2, 7, 1), (6, 1, 40)]:
        sentences = RAGGED[:rows]
        char_ids = elmo_tf.batch_to_ids(sentences)
        length = char_ids.shape[1] + extra_length
        padded = np.zeros([rows + pad_rows, length, 50], np.int32)
        padded[:rows, : char_ids.shape[1]] = char_ids
        outputs = run_onnx(tiny_session, padded)
        for key in OUTPUT_KEYS:
            value = outputs[key]
            assert value.shape[0] == rows + pad_rows
            if value.ndim == 3:
                assert value.shape[1] == length
                want = expected[key][:rows, : min(length, expected[key].shape[1])]
                assert_reordered(value[:rows, : want.shape[1]], want, err_msg=key)
                assert not value[:rows, want.shape[1] :].any()  # past every sentence: zeros
            else:
                assert_reordered(value[:rows], expected[key][:rows], err_msg=key)
            assert not value[rows:].any(), key  # padding rows: zeros
    empty = run_onnx(tiny_session, np.zeros([0, 0, 50], np.int32))
    assert {key: v.shape for key, v in empty.items()} == {
        "word_emb": (0, 0, 16),
        **{key: (0, 0, 32) for key in ("lstm_outputs1", "lstm_outputs2", "elmo")},
        "default": (0, 32),
        "sequence_len": (0,),
    }


def _weight_only_nodes(graph):
    """The op types of the nodes of ``graph`` (not its subgraphs) that read only initializers,
    directly or through other such nodes."""
    constant = {i.name for i in graph.initializer}
    found = []
    for node in graph.node:  # in topological order
        if node.op_type != "Loop" and all(name in constant for name in node.input if name):
            constant.update(node.output)
            found.append(node.op_type)
    return found


@pytest.mark.numerics
def test_weights_are_the_models_variables_stored_once(tiny_onnx, tiny_model, tmp_path):
    """Each weight is one initializer named by its variable's path, holding its value; the
    rest of the file's constants are a few shapes and axes: no converted copy of a weight
    (sliced, transposed), as tf2onnx writes when the weights are frozen into its graph. ONNX
    Runtime folds the nodes that read only weights when it loads the file (basic level)."""
    proto = onnx.load(str(tiny_onnx[0]))
    stored = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    for variable in tiny_model.variables:
        value = keras.ops.convert_to_numpy(variable.value)
        np.testing.assert_array_equal(stored.pop(variable.path), value, err_msg=variable.path)
    # The other constants: 980 bytes in the small and full shapes; a copy of the smallest LSTM
    # weight matrix (the projection, 32 x 16 float32) alone would be 2048.
    assert sum(value.nbytes for value in stored.values()) < 2048

    # The file holds such nodes (the control of the check below), ONNX Runtime's graph none.
    assert {"Slice", "Transpose"} <= set(_weight_only_nodes(proto.graph))
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    onnxruntime.InferenceSession(str(tiny_onnx[0]), options)
    optimised = onnx.load(options.optimized_model_filepath)
    assert _weight_only_nodes(optimised.graph) == []


@pytest.mark.stress
@pytest.mark.numerics
def test_small_shape_equals_embed_and_exports_in_bounded_memory(small_official_files, tmp_path):
    """The published small shape (random weights), through ``elmo_tf.export.export_onnx`` in
    a process of its own: the export adds little to the process's peak memory once the model
    is loaded (0.3 GB measured, docs/performance.md; 3 GB when tf2onnx converted the weights
    frozen into its graph), and the file gives ``embed``'s numbers."""
    path = tmp_path / "small.onnx"
    script = f"""
import resource, sys
import elmo_tf
from elmo_tf.export.onnx_export import export_onnx

def peak_bytes():  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (
        1 if sys.platform == "darwin" else 1024
    )

model = elmo_tf.load_pretrained(*{[str(f) for f in small_official_files]!r})
loaded = peak_bytes()
size = export_onnx(model, {str(path)!r})
print(size, peak_bytes() - loaded)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    size, added = (int(n) for n in done.stdout.split())
    assert size == path.stat().st_size
    assert added < 1e9, f"the export raised the peak RSS by {added / 1e9:.2f} GB"
    model = elmo_tf.load_pretrained(*small_official_files)
    outputs = OnnxModel(path).embed(RAGGED)
    expected = model.embed(RAGGED)
    for key in OUTPUT_KEYS:
        assert_reordered(outputs[key], expected[key], err_msg=key)


@pytest.mark.parametrize(
    ("char_ids", "message"),
    [
        (
            np.zeros([2, 50], np.int32),
            r"char_ids must have shape \[batch, time, 50\] .*, got \(2, 50\)",
        ),
        (np.zeros([1, 2, 49], np.int32), r"shape \[batch, time, 50\] .*, got \(1, 2, 49\)"),
        (np.zeros([1, 2, 50], np.float32), "char_ids must be integers .*, got dtype float32"),
        (np.zeros([1, 2, 50], bool), "char_ids must be integers .*, got dtype bool"),
        (np.full([1, 2, 50], 262), r"char_ids must be in \[0, 261\] .*, got 262"),
        (np.full([1, 2, 50], -1, np.int64), r"char_ids must be in \[0, 261\] .*, got -1"),
        (np.array([[["a"] * 50]]), "char_ids must be integers .*, got dtype <U1"),
    ],
)
def test_bad_char_ids_are_refused_in_one_line(char_ids, message):
    with pytest.raises(ValueError, match=message) as error:
        checked_char_ids(char_ids)
    assert "\n" not in str(error.value)


@pytest.mark.numerics
def test_the_runner_checks_before_running(tiny_session):
    with pytest.raises(ValueError, match=r"got 300"):
        run_onnx(tiny_session, np.full([1, 1, 50], 300, np.int32))
    # Any integer dtype in range runs, as int32.
    ids = elmo_tf.batch_to_ids([["Hello"]])
    expected = run_onnx(tiny_session, ids)
    actual = run_onnx(tiny_session, ids.astype(np.uint16))
    np.testing.assert_array_equal(actual["elmo"], expected["elmo"])


def test_a_file_onnx_runtime_cannot_load_is_one_line(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not an onnx model\xff" * 10)
    with pytest.raises(ModelFileError, match=f"{garbage}: ONNX Runtime cannot load it") as error:
        OnnxModel(garbage)
    assert "\n" not in str(error.value)
    with pytest.raises(ModelFileError, match="missing.onnx: ONNX file not found"):
        run_onnx(tmp_path / "missing.onnx", np.zeros([1, 1, 50], np.int32))


def test_onnx_runtime_warnings_stay_off_stderr(tmp_path, capfd):
    # An output declared [7, 7, 7] that the graph makes [b, t, 50]: ONNX Runtime warns in a
    # coloured C++ line ("Error merging shape info") while loading, before the contract check.
    helper = onnx.helper
    graph = helper.make_graph(
        [helper.make_node("Identity", ["char_ids"], ["y"])],
        "g",
        [helper.make_tensor_value_info("char_ids", onnx.TensorProto.INT32, ["b", "t", 50])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [7, 7, 7])],
    )
    path = tmp_path / "warns.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelFileError, match="not an ELMo export: outputs word_emb"):
        session(path)
    assert capfd.readouterr().err == ""


def _contract_model(
    path, input_type=onnx.TensorProto.INT32, input_shape=("b", "t", 50), outputs=None, metadata=None
):
    """An ONNX file with an export's input and outputs (each a Cast of the input), and the
    ``elmo_tf.options`` metadata ``metadata`` (none if ``None``)."""
    helper = onnx.helper
    if outputs is None:
        outputs = {
            name: onnx.TensorProto.FLOAT
            for name in ("word_emb", "lstm_outputs1", "elmo", "default")
        }
        outputs["sequence_len"] = onnx.TensorProto.INT32
    graph = helper.make_graph(
        [helper.make_node("Cast", ["char_ids"], [name], to=kind) for name, kind in outputs.items()],
        "g",
        [helper.make_tensor_value_info("char_ids", input_type, list(input_shape))],
        [helper.make_tensor_value_info(name, kind, None) for name, kind in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    if metadata is not None:
        helper.set_model_props(model, {"elmo_tf.options": metadata})
    path.write_bytes(model.SerializeToString())
    return path


def test_an_onnx_file_that_is_not_an_elmo_export_is_refused(tmp_path):
    path = _contract_model(tmp_path / "no-metadata.onnx")
    with pytest.raises(ModelFileError, match="no elmo_tf.options metadata; not an ELMo export"):
        OnnxModel(path)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "its input is 'x' tensor(int32)"),
        ({"input_type": onnx.TensorProto.FLOAT}, "its input is 'char_ids' tensor(float)"),
        ({"input_shape": (2**40, "t", 50)}, "its input is 'char_ids' tensor(int32) [1099511627776"),
        ({"input_shape": ("b", 7, 50)}, "its input is 'char_ids' tensor(int32) ['b', 7, 50]"),
        ({"input_shape": ("b", "t", 49)}, "its input is 'char_ids' tensor(int32) ['b', 't', 49]"),
        (
            {"outputs": {"elmo": onnx.TensorProto.FLOAT}},
            "outputs word_emb (missing), default (missing)",
        ),
        (
            {
                "outputs": {
                    n: onnx.TensorProto.FLOAT
                    for n in ("word_emb", "lstm_outputs1", "elmo", "default", "sequence_len")
                }
            },
            "outputs sequence_len (tensor(float))",
        ),
    ],
    ids=[
        "other input",
        "float input",
        "fixed batch",
        "fixed time",
        "width 49",
        "missing outputs",
        "float lengths",
    ],
)
def test_an_onnx_model_with_other_inputs_or_outputs_is_refused_in_one_line(
    tmp_path, arguments, message
):
    # Such a file ran and returned its own outputs, or failed inside ONNX Runtime (embed --onnx
    # printed a 26-37 line traceback).
    if arguments:
        path = _contract_model(tmp_path / "other.onnx", **arguments, metadata="{}")
    else:
        path = identity_model(tmp_path / "other.onnx")
    for call in (lambda: OnnxModel(path), lambda: run_onnx(path, np.zeros([1, 1, 50], np.int32))):
        with pytest.raises(
            ModelFileError, match=re.escape(f"{path}: not an ELMo export: {message}")
        ):
            call()
    runner = onnxruntime.InferenceSession(str(path))  # a session made by hand: checked too
    with pytest.raises(ModelFileError, match=re.escape(f"not an ELMo export: {message}")):
        run_onnx(runner, np.zeros([1, 1, 50], np.int32))


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("{{{{", "its elmo_tf.options metadata: not a valid JSON options.json (Expecting"),
        (" " * 2_000_000, "its elmo_tf.options metadata is larger than 1048576 bytes"),
        (
            '{"lstm": {"dim": 1}, "lstm": {}}',
            "its elmo_tf.options metadata: not a valid JSON options.json (the key 'lstm' "
            "appears twice",
        ),
    ],
    ids=["not JSON", "2 MB", "a key twice"],
)
def test_an_exports_options_metadata_is_read_as_an_options_file(tmp_path, metadata, message):
    path = _contract_model(tmp_path / "m.onnx", metadata=metadata)
    with pytest.raises(ModelFileError, match=re.escape(f"{path}: {message}")):
        OnnxModel(path)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("fifo", "is a named pipe, not an ONNX file"),
        ("directory", "is a directory, not an ONNX file"),
    ],
)
def test_an_onnx_path_that_is_no_file_says_what_it_is(tmp_path, kind, message):
    path = tmp_path / "m.onnx"
    if kind == "fifo":
        special_file(path, "fifo")
    else:
        path.mkdir()
    with pytest.raises(ModelFileError, match=re.escape(f"{path}: {message}")):
        OnnxModel(path)


def test_onnx_model_embed_refuses_a_string_for_sentences(tiny_onnx):
    # A string was embedded as one sentence per character.
    with pytest.raises(TypeError, match="sentences is one string"):
        OnnxModel(tiny_onnx[0]).embed("hello world")


@pytest.mark.parametrize("where", ["parent", "symlink", "absolute"])
def test_external_data_outside_the_model_directory_is_refused(tmp_path, where):
    """A hostile file naming a file outside its directory as a weight's data (a relative path
    out, a link in its directory pointing out, an absolute path): ONNX Runtime refuses to load
    it, so nothing is read."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "link").symlink_to(secret)
    location = {"parent": "../secret", "symlink": "link", "absolute": str(secret)}[where]
    weight = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[4])
    weight.data_location = onnx.TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": "16"}.items():
        weight.external_data.add(key=key, value=value)
    path = identity_model(tmp_path / "model" / "m.onnx", initializer=weight)
    with pytest.raises(ModelFileError, match="ONNX Runtime cannot load it .*[Ee]xternal data"):
        session(path)


@pytest.mark.numerics
def test_runs_without_tensorflow(tiny_onnx, tiny_model, tmp_path):
    """``run_onnx`` and ``elmo-tf embed --onnx`` in processes where TensorFlow is never
    imported (Keras on JAX for ``import elmo_tf``), with the numbers of the TensorFlow model."""
    path, _ = tiny_onnx
    ids = elmo_tf.batch_to_ids(RAGGED)
    np.save(tmp_path / "ids.npy", ids)
    script = f"""
import sys
import numpy as np
from elmo_tf.export.onnx import run_onnx
outputs = run_onnx({str(path)!r}, np.load({str(tmp_path / "ids.npy")!r}))
np.savez({str(tmp_path / "out.npz")!r}, **outputs)
assert "tensorflow" not in sys.modules, "tensorflow was imported"
print("ok")
"""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr[-3000:]
    with np.load(tmp_path / "out.npz") as outputs:
        assert list(outputs) == list(OUTPUT_KEYS)
        np.testing.assert_array_equal(outputs["elmo"], run_onnx(path, ids)["elmo"])

    # The command line: -X importtime lists every module the process imported.
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(" ".join(s) for s in RAGGED) + "\n", encoding="utf-8")
    out = tmp_path / "onnx.hdf5"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "elmo_tf", "embed", str(sentences),
         str(out), "--onnx", str(path)],
        env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "onnxruntime" in imported
    assert not [m for m in imported if m.split(".")[0] in ("tensorflow", "keras")]

    # Same file as elmo-tf embed with the TensorFlow model writes.
    write_embeddings(tiny_model, read_sentences(sentences), tmp_path / "tf.hdf5")
    with h5py.File(out) as actual, h5py.File(tmp_path / "tf.hdf5") as expected:
        assert sorted(actual) == sorted(expected)
        assert actual["sentence_to_index"][0] == expected["sentence_to_index"][0]
        for name in expected:
            if name != "sentence_to_index":
                assert_reordered(actual[name][()], expected[name][()], err_msg=name)


@pytest.mark.numerics
def test_triton_repository_describes_the_model_it_holds(tiny_onnx, tiny_session):
    path, repository = tiny_onnx
    assert sorted(p.name for p in (repository / "elmo").iterdir()) == ["1", "config.pbtxt"]
    model_file = repository / "elmo" / "1" / "model.onnx"
    assert model_file.read_bytes() == path.read_bytes()

    config_class = triton_model_config_class()
    config = text_format.Parse((repository / "elmo" / "config.pbtxt").read_text(), config_class())
    assert (config.name, config.backend, config.max_batch_size) == ("elmo", "onnxruntime", 64)
    assert config.dynamic_batching.max_queue_delay_microseconds > 0

    # Names, types and dims against the ONNX model's own: Triton's dims leave out the batch
    # axis and write a dynamic one as -1; a tensor of the batch axis alone is [1] -> [].
    proto = onnx.load(str(model_file))
    types = {onnx.TensorProto.INT32: "TYPE_INT32", onnx.TensorProto.FLOAT: "TYPE_FP32"}

    def described(value):
        dims = [d.dim_value or -1 for d in value.type.tensor_type.shape.dim]
        return (value.name, types[value.type.tensor_type.elem_type], dims[1:] or [1])

    def declared(entry):
        type_name = config_class.DESCRIPTOR.file.enum_types_by_name["DataType"]
        return (entry.name, type_name.values_by_number[entry.data_type].name, list(entry.dims))

    assert [declared(i) for i in config.input] == [described(i) for i in proto.graph.input]
    assert [declared(o) for o in config.output] == [described(o) for o in proto.graph.output]
    assert [(o.name, list(o.reshape.shape), o.HasField("reshape")) for o in config.output][-1] == (
        "sequence_len",
        [],
        True,
    )
    assert not any(o.HasField("reshape") for o in config.output[:-1])

    # ONNX Runtime runs the repository's model, batch and time dynamic as the dims say.
    repository_session = onnxruntime.InferenceSession(str(model_file))
    for sentences in (RAGGED, RAGGED[:1]):
        ids = elmo_tf.batch_to_ids(sentences)
        actual = run_onnx(repository_session, ids)
        expected = run_onnx(tiny_session, ids)
        for key in OUTPUT_KEYS:
            np.testing.assert_array_equal(actual[key], expected[key])


def test_a_second_triton_export_adds_a_version(tiny_onnx, tmp_path):
    repository = tmp_path / "tr"
    shutil.copytree(tiny_onnx[1], repository)
    model = onnx.load(str(tiny_onnx[0]))
    written = write_triton_repository(model, repository, max_batch_size=8)
    assert written == str(repository / "elmo" / "2" / "model.onnx")
    assert sorted(p.name for p in (repository / "elmo").iterdir()) == ["1", "2", "config.pbtxt"]
    assert "max_batch_size: 8\n" in (repository / "elmo" / "config.pbtxt").read_text()


# ------------------------------------------------------------------ int8 (--precision int8)


def _loop_bodies(counts):
    return {path: ops for path, ops in counts.items() if path != "main"}


def test_float_export_reads_the_loop_weights_from_the_enclosing_graph(tiny_onnx):
    """Each LSTM loop's MatMuls read their weights from the main graph (its initializers or
    the slices of them), not as values the Loop carries from step to step (tf2onnx's form):
    ONNX Runtime can then fold, prepack and quantise them."""
    proto = onnx.load(str(tiny_onnx[0]))
    main_values = {i.name for i in proto.graph.initializer}
    main_values |= {name for node in proto.graph.node for name in node.output}
    loops = [node for node in proto.graph.node if node.op_type == "Loop"]
    assert len(loops) == 2  # one per LSTM layer, both directions in each
    for loop in loops:
        body = loop.attribute[0].g
        carried = {i.name for i in body.input}
        weights = [node.input[1] for node in body.node if node.op_type == "MatMul"]
        assert len(weights) == 4  # recurrent and projection kernels, two directions
        assert all(w in main_values and w not in carried for w in weights), weights
        assert len(loop.input) - 2 < 8  # the step counter, states and offsets stay carried


def test_int8_export_quantises_the_loop_matmuls_and_keeps_the_contract(
    tiny_int8_onnx, tiny_onnx, tmp_path
):
    proto = onnx.load(str(tiny_int8_onnx))
    counts = op_counts(proto)
    bodies = _loop_bodies(counts)
    assert len(bodies) == 2
    for path, ops in bodies.items():
        # Per direction, the recurrent (P, 4D) and projection (D, P) products, in int8.
        assert ops.get("MatMulInteger") == 4 and ops.get("DynamicQuantizeLinear") == 4, path
        assert "MatMul" not in ops and "Gemm" not in ops, path
    main_ops = counts["main"]
    # The input halves, highway and token projection in int8; the CNN's Conv left in float.
    assert main_ops.get("MatMulInteger", 0) >= 5 and "MatMul" not in main_ops
    assert main_ops["Conv"] == 4 and "ConvInteger" not in main_ops  # the tiny model's 4 widths
    assert non_standard_operators(proto) == []
    float_proto = onnx.load(str(tiny_onnx[0]))
    metadata = {p.key: p.value for p in proto.metadata_props}
    assert metadata == {
        **{p.key: p.value for p in float_proto.metadata_props},
        "elmo_tf.precision": "int8",
    }
    model = OnnxModel(tiny_int8_onnx)  # session(): check_contract passes
    assert model.precision == "int8" and OnnxModel(tiny_onnx[0]).precision == "float32"
    assert model.config.to_options() == OnnxModel(tiny_onnx[0]).config.to_options()

    # Same outputs, shapes and padding as the float file; numbers near its.
    exact = run_onnx(tiny_onnx[0], elmo_tf.batch_to_ids(RAGGED))
    approx = model(elmo_tf.batch_to_ids(RAGGED))
    assert list(approx) == list(exact)
    np.testing.assert_array_equal(approx["sequence_len"], exact["sequence_len"])
    lengths = exact["sequence_len"]
    pad = np.arange(exact["elmo"].shape[1])[None, :] >= lengths[:, None]
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert approx[key].shape == exact[key].shape and not approx[key][pad].any(), key
    assert np.abs(approx["elmo"] - exact["elmo"]).max() > 0  # really another computation

    # elmo-tf embed --onnx runs it.
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(" ".join(s) for s in RAGGED) + "\n", encoding="utf-8")
    assert main(["embed", str(sentences), str(tmp_path / "out.hdf5"), "--onnx",
                 str(tiny_int8_onnx)]) == 0  # fmt: skip
    with h5py.File(tmp_path / "out.hdf5") as f:
        assert f["0"].shape == (3, 4, 32)


# The bundled model's int8 fidelity against its float32 ONNX file (elmo_tf.probes.fidelity):
# per-token cosine over the probe set's sentences and examples/sentences.txt. Measured on an
# AMD EPYC Zen 4 (VNNI): elmo mean 0.9998, 1st percentile 0.9994 (docs/performance.md,
# "Reduced precision", has every key on State of the Union text). The bounds leave 10x in
# 1 - cosine; the control below, one scale wrong, falls far below them.
INT8_COS_MEAN, INT8_COS_P1 = 0.998, 0.994


@pytest.mark.numerics
def test_int8_fidelity_of_the_bundled_model(tmp_path_factory, tmp_path):
    from elmo_tf.probes import fidelity, word_senses

    def make(directory):
        for name, flags in (("float32", []), ("int8", ["--precision", "int8"])):
            assert main(["export", "onnx", str(directory / f"{name}.onnx"), *flags]) == 0

    directory = made_once(tmp_path_factory, "sotu_onnx", make)
    with open(ROOT / "examples" / "sentences.txt", encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.split()]
    sentences += [list(e.tokens) for e in word_senses.load_examples()]
    reference = OnnxModel(directory / "float32.onnx").embed(sentences)
    table = fidelity.compare(reference, OnnxModel(directory / "int8.onnx").embed(sentences))
    for key, row in table.items():
        assert row.cos_mean >= INT8_COS_MEAN and row.cos_p1 >= INT8_COS_P1, (key, row)
        assert row.max_abs < 0.1 * row.scale, (key, row)

    # The control: the scales of one loop's recurrent weights doubled (a wrong scale, the
    # file otherwise intact) fail the bounds.
    proto = onnx.load(str(directory / "int8.onnx"))
    loop = next(node for node in proto.graph.node if node.op_type == "Loop")
    body = loop.attribute[0].g
    scales = {i.name: i for i in proto.graph.initializer}
    doubled = 0
    for node in body.node:
        if node.op_type == "Mul" and any(name in scales for name in node.input):
            name = next(name for name in node.input if name in scales)
            value = onnx.numpy_helper.to_array(scales[name])
            scales[name].CopyFrom(onnx.numpy_helper.from_array(value * 2, name))
            doubled += 1
    assert doubled == 4
    onnx.save(proto, str(tmp_path / "broken.onnx"))
    broken = fidelity.compare(reference, OnnxModel(tmp_path / "broken.onnx").embed(sentences))
    assert broken["elmo"].cos_p1 < INT8_COS_P1 and broken["elmo"].cos_mean < INT8_COS_MEAN


@pytest.mark.numerics
def test_an_elmoformanylangs_model_runs_from_its_file_with_efmls_numbers(tmp_path, capsys):
    """The file carries the model's tables (``elmo_tf.vocabulary`` metadata): ``OnnxModel``
    and ``embed --onnx`` map tokens with them on the host, 51 ids a token (the word id
    last), and give EFML's numbers; damaged tables are refused in one line."""
    import base64

    from support.foreign_models import EFML_TINY, TOLERANCE, efml_golden

    model = elmo_tf.ELMo.from_preset(str(EFML_TINY))
    path = tmp_path / "efml.onnx"
    assert main(["export", "onnx", str(path), "--model", str(EFML_TINY)]) == 0
    assert "char_ids [batch, time, 51])" in capsys.readouterr().err  # the model's own width
    onnx_file = OnnxModel(path)
    sentences, golden = efml_golden()
    outputs = onnx_file.embed(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(outputs["elmo"][i, : len(sentence)], golden[f"average_{i}"],
                                   rtol=0, atol=TOLERANCE, err_msg=str(sentence))  # fmt: skip
    ids = model.batch_to_ids(sentences[:2])
    assert ids.shape[-1] == 51
    np.testing.assert_array_equal(run_onnx(str(path), ids)["elmo"], onnx_file(ids)["elmo"])
    ids[0, 0, -1] = model.config.n_words
    with pytest.raises(ValueError, match="last column must hold word ids in"):
        onnx_file(ids)
    with pytest.raises(ValueError, match=r"char_ids must have shape \[batch, time, 51\]"):
        run_onnx(str(path), elmo_tf.batch_to_ids([["a"]]))  # bilm-tf's 50 ids: not its input

    proto = onnx.load(str(path))
    (entry,) = [p for p in proto.metadata_props if p.key == "elmo_tf.vocabulary"]
    data = bytearray(base64.b64decode(entry.value))
    data[4:8] = (0x110000).to_bytes(4, "little")  # id 1 given a value past Unicode
    entry.value = base64.b64encode(bytes(data)).decode()
    broken = tmp_path / "broken.onnx"
    onnx.save(proto, str(broken))
    with pytest.raises(ModelFileError, match="holds a value that is no code point") as error:
        OnnxModel(broken)
    assert "\n" not in str(error.value) and str(broken) in str(error.value)
    entry.value = "not base64!"
    onnx.save(proto, str(broken))
    with pytest.raises(ModelFileError, match="elmo_tf.vocabulary metadata is not base64"):
        OnnxModel(broken)
