"""The ONNX export's and runner's checks that need no conversion: operators outside ONNX
reported, the Triton config's fields, user errors before the model loads, an export's metadata
against its graph (on stand-ins made without TensorFlow, ``elmo_tf.testing.onnx_stand_in``)."""

import json
import os
import re

import numpy as np
import onnx
import onnxruntime
import pytest
from google.protobuf import text_format
from support.onnx_models import identity_model
from support.special_files import special_file
from support.triton import triton_model_config_class

from elmo_tf.cli.main import main
from elmo_tf.errors import ExportError, ModelFileError
from elmo_tf.export import onnx_metadata, onnx_triton
from elmo_tf.export.onnx import OnnxModel, run_onnx
from elmo_tf.export.onnx_export import OPSET, non_standard_operators
from elmo_tf.models import output_keys
from elmo_tf.testing.onnx_stand_in import stand_in_model, stand_in_options


def test_operators_outside_onnx_are_reported():
    # The negative control of the check above: a contrib op, a custom domain, and a TensorFlow
    # op left as it was (default domain, a name ONNX does not define).
    nodes = [
        onnx.helper.make_node("FusedMatMul", ["x", "x"], ["a"], domain="com.microsoft"),
        onnx.helper.make_node("Mine", ["a"], ["b"], domain="my.ops"),
        onnx.helper.make_node("UniqueV2", ["b"], ["c"]),
        onnx.helper.make_node("Relu", ["c"], ["y"]),
    ]
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "g", [value("x", 1, [2, 2])], [value("y", 1, [2, 2])])
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    assert non_standard_operators(proto) == [
        ("", "UniqueV2"),
        ("com.microsoft", "FusedMatMul"),
        ("my.ops", "Mine"),
    ]


def test_triton_config_is_refused_with_a_misspelt_field():
    # The negative control of the parser above: it refuses what Triton would refuse.
    with pytest.raises(text_format.ParseError, match="max_batch_sizes"):
        text_format.Parse("max_batch_sizes: 4", triton_model_config_class()())
    with pytest.raises(text_format.ParseError):
        text_format.Parse('input [ { dims: [ "x" ] } ]', triton_model_config_class()())


def test_export_user_errors_exit_1_before_the_model_loads(
    tmp_path, tiny_files, capsys, monkeypatch
):
    options, weights = tiny_files
    monkeypatch.setattr(
        "elmo_tf.cli.export.load_model", lambda *a, **k: pytest.fail("the model was loaded")
    )
    model = ["--options", str(options), "--weights", str(weights)]
    (tmp_path / "a-file").write_text("kept\n", encoding="utf-8")
    copy = tmp_path / "weights.hdf5"
    copy.write_bytes(weights.read_bytes())
    # A repository whose config.pbtxt is (a link to) the weight file the model is read from.
    config = tmp_path / "tr" / "elmo" / "config.pbtxt"
    config.parent.mkdir(parents=True)
    config.symlink_to(copy)
    repos = tmp_path / "repos"
    (repos / "elmo-file").mkdir(parents=True)
    (repos / "elmo-file" / "elmo").write_text("kept\n", encoding="utf-8")
    (repos / "config-dir" / "elmo" / "config.pbtxt").mkdir(parents=True)
    (repos / "last-version" / "elmo" / str(2**63 - 1)).mkdir(parents=True)
    for argv, message in [
        ([*model], "give OUTPUT (an .onnx file), --triton DIR, or both"),
        ([str(tmp_path), *model], f"{tmp_path}: names a directory, expected an .onnx file name"),
        (
            [str(copy), "--options", str(options), "--weights", str(copy)],
            f"{copy}: is an input file; choose another output name",
        ),
        (
            ["--triton", str(tmp_path / "a-file"), *model],
            f"--triton {tmp_path / 'a-file'}: is a file, expected a model repository",
        ),
        (
            ["--triton", str(tmp_path / "tr"), "--triton-max-batch-size", "0", *model],
            "--triton-max-batch-size must be an integer from 1 to 2147483647, got 0",
        ),
        # Triton's max_batch_size is an int32: 2**31 was written, and Triton refused the config.
        (
            ["--triton", str(tmp_path / "tr"), "--triton-max-batch-size", str(2**31), *model],
            "--triton-max-batch-size must be an integer from 1 to 2147483647, got 2147483648",
        ),
        (["--triton", "", *model], "--triton is empty; name the model repository directory"),
        # Each refused after the model had loaded and converted; now before it loads.
        (
            ["--triton", str(repos / "elmo-file"), *model],
            f"{repos / 'elmo-file' / 'elmo'}: is a file; a Triton repository holds the model's",
        ),
        (
            ["--triton", str(repos / "config-dir"), *model],
            f"{repos / 'config-dir' / 'elmo' / 'config.pbtxt'}: is a directory; config.pbtxt is",
        ),
        (
            ["--triton", str(repos / "last-version"), *model],
            f"{repos / 'last-version' / 'elmo'}: holds version 9,223,372,036,854,775,807, the "
            "highest Triton reads",
        ),
        (
            ["--triton", str(tmp_path / "tr"), "--options", str(options), "--weights", str(copy)],
            f"--triton {tmp_path / 'tr'}: {config} is an input file",
        ),
    ]:
        assert main(["export", "onnx", *argv]) == 1
        err = capsys.readouterr().err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"elmo-tf export: error: {message}"), err
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "kept\n"
    assert copy.read_bytes() == weights.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "repos", "tr", "weights.hdf5"]
    assert [p.name for p in config.parent.iterdir()] == ["config.pbtxt"]


def test_embed_onnx_user_errors_exit_1(tmp_path, capsys):
    sentences = tmp_path / "in.txt"
    sentences.write_text("Hello world\n", encoding="utf-8")
    model = identity_model(tmp_path / "m.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    out = str(tmp_path / "out.hdf5")
    for argv, message in [
        (["--onnx", str(model), "--model", "sotu"], "pass one of --model, --onnx, not several"),
        (
            ["--onnx", str(tmp_path / "none.onnx")],
            f"{tmp_path / 'none.onnx'}: ONNX file not found",
        ),
        (["--onnx", str(model)], f"{model}: not an ELMo export: its input is 'x'"),
        (["--onnx", ""], "--onnx is empty; name the file to read"),
        (["--onnx", str(garbage)], f"{garbage}: ONNX Runtime cannot load it"),
    ]:
        assert main(["embed", str(sentences), out, *argv]) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err, err
    # OUTPUT naming the model file: refused, the file kept.
    before = model.read_bytes()
    assert main(["embed", str(sentences), str(model), "--onnx", str(model)]) == 1
    assert f"{model}: is an input file" in capsys.readouterr().err
    assert model.read_bytes() == before
    assert not os.path.exists(out)


@pytest.mark.parametrize("kind", ["fifo", "directory", "past its end"])
def test_onnx_runtime_logs_nothing_of_a_file_it_cannot_load(tmp_path, kind, capfd):
    """A weight whose external data is a named pipe, a directory, or at an offset past its
    file's end: only our line on stderr (ONNX Runtime printed a coloured ``[E:onnxruntime:...]``
    line of its own before it)."""
    data = tmp_path / "data.bin"
    if kind == "fifo":
        special_file(data, "fifo")
    elif kind == "directory":
        data.mkdir()
    else:
        data.write_bytes(bytes(16))
    weight = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[4])
    weight.data_location = onnx.TensorProto.EXTERNAL
    offset = str(10**12) if kind == "past its end" else "0"
    for key, value in {"location": "data.bin", "offset": offset, "length": "16"}.items():
        weight.external_data.add(key=key, value=value)
    model = identity_model(tmp_path / "m.onnx", initializer=weight)
    sentences = tmp_path / "in.txt"
    sentences.write_text("Hello world\n", encoding="utf-8")
    capfd.readouterr()
    assert main(["embed", str(sentences), str(tmp_path / "out.hdf5"), "--onnx", str(model)]) == 1
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith(f"elmo-tf embed: error: {model}: ONNX Runtime cannot load it ("), line


def _graph(inputs):
    """A model proto whose graph's inputs are ``{name: (element type, dims)}`` (a dim of
    ``None`` dynamic) and whose one output is the first input."""
    value = onnx.helper.make_tensor_value_info
    values = [value(name, kind, dims) for name, (kind, dims) in inputs.items()]
    first = next(iter(inputs))
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", [first], ["out"])],
        "g",
        values,
        [value("out", inputs[first][0], inputs[first][1])],
    )
    return onnx.helper.make_model(graph)


def test_the_triton_config_drops_the_dynamic_batch_axis_of_each_tensor():
    config = onnx_triton.config_text(
        _graph({"char_ids": (onnx.TensorProto.INT32, [None, None, 50])}), max_batch_size=8
    )
    message = text_format.Parse(config, triton_model_config_class()())
    assert message.max_batch_size == 8
    assert [list(t.dims) for t in message.input] == [[-1, 50]]


@pytest.mark.parametrize(
    "dims, shown",
    [([4, None, 50], "[4, -1, 50]"), ([1, None, 50], "[1, -1, 50]"), ([], "[]")],
    ids=["a fixed batch of 4", "a fixed batch of 1", "a scalar"],
)
def test_the_triton_writer_refuses_a_tensor_whose_first_axis_is_not_the_dynamic_batch(dims, shown):
    """Triton's max_batch_size > 0 puts the batch axis before every tensor's dims: a tensor
    whose first axis is fixed (or that has none) cannot be written as Triton reads it."""
    with pytest.raises(
        ExportError, match=re.escape(f"first axis must be the dynamic batch, got {shown}")
    ):
        onnx_triton.config_text(_graph({"char_ids": (onnx.TensorProto.INT32, dims)}))


def _stand_in(path, **arguments):
    path.write_bytes(stand_in_model(**arguments).SerializeToString())
    return path


def test_embed_onnx_refuses_metadata_naming_fewer_layers_than_the_graph(tmp_path, capsys):
    # lstm.n_layers edited to 1: embed --onnx --all wrote (2, T, 256), the second layer dropped,
    # with status 0.
    options = json.dumps(stand_in_options(n_layers=1))
    model = _stand_in(tmp_path / "m.onnx", metadata=[("elmo_tf.options", options)])
    sentences = tmp_path / "in.txt"
    sentences.write_text("Hello world\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(sentences), str(out), "--onnx", str(model), "--all"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"elmo-tf embed: error: {model}: its elmo_tf.options metadata says lstm.n_layers is 1, "
        "but the graph has 2 LSTM layer outputs (lstm_outputs1, lstm_outputs2); expected "
        "lstm_outputs1"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"metadata": [("elmo_tf.options", json.dumps(stand_in_options(n_layers=3)))]},
            "its elmo_tf.options metadata says lstm.n_layers is 3, but the graph has 2 LSTM "
            "layer outputs (lstm_outputs1, lstm_outputs2); expected lstm_outputs1, "
            "lstm_outputs2, lstm_outputs3",
        ),
        (
            {"metadata": [("elmo_tf.options", json.dumps(stand_in_options(projection_dim=8)))]},
            "its elmo_tf.options metadata says lstm.projection_dim is 8, so word_emb is "
            "[batch, time, 8], but the graph declares it [batch, time, 16]",
        ),
        (
            {"layer_width": 24},
            "its elmo_tf.options metadata says lstm.projection_dim is 16, so lstm_outputs1 is "
            "[batch, time, 32], but the graph declares it [batch, time, 24]",
        ),
        (
            {
                "metadata": [
                    ("elmo_tf.options", json.dumps(stand_in_options())),
                    ("elmo_tf.version", "0.2.0"),
                    ("elmo_tf.options", json.dumps(stand_in_options(n_layers=1))),
                ]
            },
            "2 elmo_tf.options metadata entries; an export has one",
        ),
    ],
    ids=["more layers", "another projection_dim", "a layer's width", "a second entry"],
)
def test_an_exports_metadata_must_agree_with_its_graph(tmp_path, arguments, message):
    path = _stand_in(tmp_path / "m.onnx", **arguments)
    ids = np.zeros([1, 2, 50], np.int32)
    for call in (lambda: OnnxModel(path), lambda: run_onnx(path, ids)):
        with pytest.raises(ModelFileError, match="^" + re.escape(f"{path}: {message}")):
            call()


def test_a_graph_of_symbolic_widths_is_checked_on_its_first_run(tmp_path):
    """Its outputs declare no width: the first run's outputs are checked before any is
    returned (the layers say 24 where the metadata's projection_dim of 16 makes 32)."""
    path = _stand_in(tmp_path / "m.onnx", declare_widths=False, layer_width=24)
    model = OnnxModel(path)  # nothing to check before it runs
    message = (
        f"{path}: its output lstm_outputs1 is [2, 3, 24] for char_ids [2, 3, 50]; its "
        "elmo_tf.options metadata (lstm.projection_dim 16) makes it [2, 3, 32]"
    )
    with pytest.raises(ModelFileError, match="^" + re.escape(message)):
        model.embed([["a", "b", "c"], ["d"]])
    ids = np.ones([2, 3, 50], np.int32)
    with pytest.raises(ModelFileError, match="^" + re.escape(message)):
        run_onnx(path, ids)
    session = onnxruntime.InferenceSession(str(path))  # a session made by hand: checked too
    with pytest.raises(ModelFileError, match=re.escape("the ONNX model: its output lstm_outputs1")):
        run_onnx(session, ids)


@pytest.mark.parametrize(
    "arguments",
    [{}, {"declare_widths": False}, {"n_layers": 1}, {"projection_dim": 128, "n_layers": 3}],
    ids=["an export's", "symbolic widths", "one layer", "P=128, three layers"],
)
def test_a_graph_that_agrees_with_its_metadata_runs(tmp_path, arguments):
    # The negative control of the checks above.
    path = _stand_in(tmp_path / "m.onnx", **arguments)
    model = OnnxModel(path)
    layers = arguments.get("n_layers", 2)
    width = 2 * arguments.get("projection_dim", 16)
    assert model.config.n_lstm_layers == layers
    outputs = model.embed([["a", "b", "c"], ["d"]])
    assert list(outputs) == list(output_keys(layers))
    assert outputs[f"lstm_outputs{layers}"].shape == (2, 3, width)
    assert run_onnx(path, np.ones([1, 4, 50], np.int32))["default"].shape == (1, width)
    session = onnxruntime.InferenceSession(str(path))
    assert run_onnx(session, np.ones([1, 4, 50], np.int32))["elmo"].shape == (1, 4, width)


def test_the_metadata_reader_reads_entries_as_protobuf_does(tmp_path):
    """``onnx_metadata`` walks the file's top-level fields: entries before and after the
    graph, a key given twice in one entry (the last counts, as protobuf reads), unknown fields
    of every wire type; onnx's own parser reads the same entries."""
    model = stand_in_model(metadata=[("a", "1"), ("elmo_tf.options", "{}")])
    entry = onnx.StringStringEntryProto(key="elmo_tf.options", value="late").SerializeToString()
    # field 14 (metadata_props), an entry whose first key is another: b"\x0a\x01x" + entry
    twice = b"\x0a\x01x" + entry
    unknown = (
        b"\xf8\x07\x05"  # field 127, varint 5
        + b"\xf9\x07" + bytes(8)  # field 127, fixed64
        + b"\xfd\x07" + bytes(4)  # field 127, fixed32
        + b"\xfb\x07\xf8\x07\x01\xfc\x07"  # field 127, a group holding a varint
    )  # fmt: skip
    data = model.SerializeToString() + unknown + b"\x72" + bytes([len(twice)]) + twice
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    parsed = onnx.load_from_string(data)
    expected = [p.value.encode() for p in parsed.metadata_props if p.key == "elmo_tf.options"]
    assert _options_entries(path) == expected == [b"{}", b"late"]


def _options_entries(path):
    with onnx_metadata.read_metadata(path, ["elmo_tf.options", "a"]) as metadata:
        return metadata.values("elmo_tf.options", 1 << 20)


def test_the_metadata_reader_finds_every_key_in_one_walk(tmp_path):
    """The runner's three keys, wherever they lie and however many times, from one walk; a
    value is read no further than its bound plus one byte."""
    model = stand_in_model(metadata=[("elmo_tf.precision", "int8"), ("b", "x"),
                                     ("elmo_tf.vocabulary", "QUJD"), ("elmo_tf.options", "{}"),
                                     ("elmo_tf.precision", "float32")])  # fmt: skip
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    keys = ["elmo_tf.options", "elmo_tf.precision", "elmo_tf.vocabulary"]
    with onnx_metadata.read_metadata(path, keys) as metadata:
        assert metadata.values("elmo_tf.precision", 16) == [b"int8", b"float32"]
        assert metadata.values("elmo_tf.vocabulary", 2) == [b"QUJ"]  # cut at its bound + 1
        assert metadata.values("elmo_tf.options", 16) == [b"{}"]
        assert metadata.values("b", 16) == []  # not asked for


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x72\x05\x0a\x01", "a field runs past the end of the file"),
        (b"\x72\x80", "the file ends inside a number"),
        (b"\x0f", "wire type 7"),
        (b"\x72\x03\x0a\x05x", "a field runs past the end of the file"),
    ],
    ids=["an entry past the end", "a cut length", "wire type 7", "a key past its entry"],
)
def test_metadata_that_cannot_be_walked_is_one_line(tmp_path, data, message):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(
        ModelFileError,
        match="^" + re.escape(f"{path}: its metadata cannot be read ({message}); not an ELMo"),
    ):
        _options_entries(path)


def test_an_options_fault_of_the_metadata_is_a_model_file_error(tmp_path):
    # Found by fuzz/onnx_contract.py: a misspelt key in the metadata raised OptionsError, where
    # every other fault of the file (its JSON included) is a ModelFileError.
    options = stand_in_options()
    options["char_cnn"]["max_characters_peok_rten"] = options["char_cnn"].pop(
        "max_characters_per_token"
    )
    path = _stand_in(tmp_path / "m.onnx", metadata=[("elmo_tf.options", json.dumps(options))])
    message = (
        f"{path}: its elmo_tf.options metadata: 'char_cnn.max_characters_peok_rten' is not a key "
        "of the options format; did you mean 'char_cnn.max_characters_per_token'?"
    )
    with pytest.raises(ModelFileError, match="^" + re.escape(message)):
        OnnxModel(path)


def test_names_and_metadata_that_are_not_utf8_are_one_line(tmp_path):
    """ONNX Runtime turns each name, metadata key and value into text as it is read: an output
    name (or the input's) or a metadata value that is not UTF-8 is one line from
    ``OnnxModel``, ``embed --onnx`` and ``run_onnx`` on a session, never a
    ``UnicodeDecodeError``."""
    data = stand_in_model(
        metadata=[("elmo_tf.options", json.dumps(stand_in_options())), ("note", "XX")]
    ).SerializeToString()
    named = tmp_path / "named.onnx"  # "sequence_len" of the same length, two bytes not UTF-8
    named.write_bytes(data.replace(b"sequence_len", b"sequence\xff\xfeen"))
    message = f"{named}: not an ELMo export: a name of its inputs or outputs is not UTF-8 text"
    with pytest.raises(ModelFileError, match="^" + re.escape(message)):
        OnnxModel(named)
    noted = tmp_path / "noted.onnx"
    noted.write_bytes(data.replace(b"XX", b"\xff\xfe"))
    assert OnnxModel(noted).config.n_lstm_layers == 2  # the file's own entries: read as bytes
    ids = np.ones([1, 2, 50], np.int32)
    with pytest.raises(
        ModelFileError,
        match="^" + re.escape("the ONNX model: ONNX Runtime cannot show its metadata, a key or"),
    ):
        run_onnx(onnxruntime.InferenceSession(str(noted)), ids)
    assert run_onnx(noted, ids)["elmo"].shape == (1, 2, 32)


def test_a_long_chain_is_sorted_without_recursion():
    """5,000 nodes, each reading the next one's output, given last first: sorted into the
    order ONNX requires, the independent node kept in its place; a cycle is named."""
    from onnx import helper

    from elmo_tf.export.onnx_graph import sort_topologically

    n = 5000
    nodes = [helper.make_node("Identity", [f"v{i + 1}"], [f"v{i}"], name=f"n{i}") for i in range(n)]
    nodes.insert(0, helper.make_node("Identity", ["x"], ["y"], name="alone"))
    graph = helper.make_graph(nodes, "chain", [], [])
    sort_topologically(graph)
    assert [node.name for node in graph.node] == ["alone", *(f"n{i}" for i in reversed(range(n)))]
    cycle = helper.make_graph(
        [helper.make_node("Identity", ["b"], ["a"], name="first"),
         helper.make_node("Identity", ["a"], ["b"], name="second")], "cycle", [], []
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="the graph has a cycle through"):
        sort_topologically(cycle)
