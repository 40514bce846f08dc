"""What each test level may touch, checked on the tests' source (``ast``).

``tests/unit`` builds no model, starts no process, opens no socket and runs no TensorFlow
graph: it imports no Keras, PyTorch or JAX, nor a module that starts processes or serves
sockets, and uses TensorFlow for its protos and dtypes only (``tf.make_tensor_proto``,
``tf.int32``...). A call that builds a model (``ELMo(...)``, ``from_preset``,
``load_pretrained``) is a unit test's only inside ``pytest.raises``: a refusal builds nothing.
Model tests (``tests/model``) do all that in the test's process; integration tests
(``tests/integration``) run processes, servers, exports and jobs.

Test docstrings state the behaviour, not the history of a bug (what the code did before its
fix belongs in the commit that fixed it).
"""

import ast
import re

import pytest
from support.paths import ROOT

TESTS = ROOT / "tests"
# What a unit test may not import: a framework that builds models and runs graphs, or what
# starts processes and serves sockets.
FORBIDDEN_IMPORTS = {"keras", "torch", "jax", "subprocess", "multiprocessing", "socket",
                     "socketserver", "http.server", "aiohttp",
                     "concurrent.futures.process"}  # fmt: skip
# TensorFlow's names a unit test may use: protos and dtypes, no graph.
TENSORFLOW_ALLOWED = {"make_tensor_proto", "make_ndarray", "as_dtype", "dtypes", "DType",
                      "int32", "int64", "float32", "float64", "float16", "bfloat16", "string",
                      "bool", "uint8", "int8", "int16", "uint16", "core", "io"}  # fmt: skip
# The tf.io names that are files, not graphs (TFRecord writing for the warm-up records).
TENSORFLOW_IO_ALLOWED = {"TFRecordWriter", "TFRecordOptions"}
MODEL_BUILDS = {"ELMo", "from_preset", "load_pretrained", "BidirectionalLanguageModel"}
HISTORY = re.compile(r"\b(used to|no longer|before the fix|after the fix)\b", re.I)


def _unit_tests():
    return sorted((TESTS / "unit").glob("test_*.py"))


def _tensorflow_names(tree):
    """The names a module binds to TensorFlow (``import tensorflow as tf``)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "tensorflow"
    }


def _inside_raises(tree):
    """The ids of the nodes inside a ``with pytest.raises(...)`` block."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call)
            and getattr(item.context_expr.func, "attr", None) == "raises"
            for item in node.items
        ):
            for statement in node.body:
                inside |= {id(n) for n in ast.walk(statement)}
    return inside


def level_faults(source):
    """``[(line, what)]``: what ``source`` (a unit test module) touches that its level may not."""
    tree = ast.parse(source)
    faults = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            )
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IMPORTS):
                    faults.append((node.lineno, f"imports {name}"))
    tf_names = _tensorflow_names(tree)
    refusals = _inside_raises(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in tf_names and node.attr not in TENSORFLOW_ALLOWED:
                faults.append((node.lineno, f"uses tf.{node.attr}"))
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in tf_names
            and node.value.attr == "io"
            and node.attr not in TENSORFLOW_IO_ALLOWED
        ):
            faults.append((node.lineno, f"uses tf.io.{node.attr}"))
        if isinstance(node, ast.Call) and id(node) not in refusals:
            called = getattr(node.func, "attr", getattr(node.func, "id", None))
            if called in MODEL_BUILDS:
                faults.append((node.lineno, f"builds a model ({called})"))
    return sorted(set(faults))


@pytest.mark.parametrize("path", _unit_tests(), ids=lambda p: p.name)
def test_a_unit_test_touches_no_model_process_socket_or_graph(path):
    assert level_faults(path.read_text(encoding="utf-8")) == []


def test_the_level_rule_sees_what_it_forbids():
    planted = "\n".join(
        [
            "import subprocess",  # 1
            "import tensorflow as tf",  # 2
            "from elmo_tf.models import ELMo",  # 3: a name, not a build
            "def test_x():",  # 4
            "    model = ELMo.from_preset('sotu')",  # 5
            "    tf.constant([1])",  # 6
            "    tf.make_tensor_proto([1], dtype=tf.int32)",  # 7: protos and dtypes
            "    with pytest.raises(ValueError):",  # 8
            "        ELMo.from_preset('huge')",  # 9: a refusal builds nothing
            "    tf.io.TFRecordWriter('x')",  # 10: a file
            "    tf.io.decode_raw(b'', tf.uint8)",  # 11: a graph op
            "from keras import layers",  # 12
        ]
    )
    assert level_faults(planted) == [
        (1, "imports subprocess"),
        (5, "builds a model (from_preset)"),
        (6, "uses tf.constant"),
        (11, "uses tf.io.decode_raw"),
        (12, "imports keras"),
        (12, "imports keras.layers"),
    ]


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            docstring = ast.get_docstring(node)
            if docstring:
                yield getattr(node, "lineno", 1), docstring


@pytest.mark.parametrize(
    "path", sorted(TESTS.glob("*/test_*.py")), ids=lambda p: str(p.relative_to(TESTS))
)
def test_test_docstrings_state_behaviour_not_history(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [(line, m.group()) for line, text in _docstrings(tree) if (m := HISTORY.search(text))]
    assert found == []
