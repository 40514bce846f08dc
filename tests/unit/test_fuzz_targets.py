"""The fuzz targets (``fuzz/*.py``, run by ``fuzz/run.py`` under atheris) in the normal suite,
without atheris: every module there that defines ``TestOneInput`` is found, imports, and passes
its own seed corpus through ``TestOneInput``, so that a target that rots (an API it calls
renamed, a contract it asserts broken) fails here rather than in the next long run. The inputs
the fuzzer found crashing are regression tests beside the behaviour they broke."""

import importlib.util

import pytest
from support.paths import ROOT

from elmo_tf.system.extras import MissingExtraError


def _runner():
    spec = importlib.util.spec_from_file_location("fuzz_run", ROOT / "fuzz" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNNER = _runner()


def test_the_runner_finds_every_target():
    found = RUNNER.targets()
    assert {
        "warmup_records",
        "rest_body",
        "tensor_proto",
        "onnx_contract",
        "options_json",
        "text_lines",
        "training_run",
        "weight_file",
        "onnx_vocabulary",
        "state_dict",
        "nlpl_archive",
        "efml_dictionary",
        "efml_config",
    } == set(found)
    assert "run" not in found  # the runner defines no TestOneInput


@pytest.mark.parametrize("name", sorted(RUNNER.targets()))
def test_a_targets_seed_corpus_keeps_its_contract(name):
    try:
        target = RUNNER.load(name)
    except MissingExtraError as e:  # a target of an extra that is not installed
        pytest.skip(str(e))
    seeds = target.seed_corpus()
    assert seeds and all(isinstance(seed, bytes) for seed in seeds)
    for seed in seeds:
        target.TestOneInput(seed)
