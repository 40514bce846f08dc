"""The kinds of model folder and archive, read as data without a model
(``elmo_tf.kinds.model_kinds``): which kind a folder or an archive is, the files a folder's kind
is read from, what an archive's kind reads, and the ``ModelContents`` of each kind (its config,
weights, token tables and cached tokens) and the model directory it writes. Loading the weights
into a model is tests/model/test_efml_model.py's and tests/model/test_nlpl_models.py's."""

import json
import os
import shutil
import zipfile

import h5py
import numpy as np
import pytest
from support.foreign_models import EFML_TINY, NLPL_BILM_ZIP, bilm_members, efml_members, zip_bytes

from elmo_tf.config import ElmoConfig
from elmo_tf.errors import ForeignModelError, OptionsError, PresetError, WeightFileError
from elmo_tf.foreign import efml_folder
from elmo_tf.kinds import efml_conversion, model_kinds
from elmo_tf.kinds.model_kinds import BILM, EFML, ModelContents, ModelFiles
from elmo_tf.tokens.codepoints import CodepointVocabulary

MARKERS = "(or ELMoForManyLangs' config.json and char.dic)"
NEITHER = (
    "holds neither a bilm-tf model (options.json, weights.hdf5 or model.hdf5) nor an "
    "ELMoForManyLangs one (config.json, char.dic, token_embedder.pkl, encoder.pkl)"
)
VOCAB_TOKENS = ["<S>", "</S>", "<UNK>", ".", "the", "The", "bank", "Москву", "está"]


@pytest.fixture(autouse=True)
def _default_limits_and_an_empty_working_directory(tmp_path, monkeypatch):
    """The default size limits, and a working directory with no model file in it: a path
    joined without its folder finds nothing there."""
    for variable in ("ELMO_TF_MAX_PARAMETERS", "ELMO_TF_MAX_DIMENSION", "ELMO_TF_MAX_LAYERS"):
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")


@pytest.fixture
def bilm(tmp_path):
    """The NLPL bilm-tf archive's folder: meta.json, model.hdf5, options.json, vocab.txt."""
    folder = tmp_path / "bilm"
    with zipfile.ZipFile(NLPL_BILM_ZIP) as archive:
        archive.extractall(folder)
    return folder


@pytest.fixture
def efml(tmp_path):
    """A copy of the tiny ELMoForManyLangs model folder."""
    return shutil.copytree(EFML_TINY, tmp_path / "efml")


def _refusal(error_class, call, *args):
    with pytest.raises(error_class) as error:
        call(*args)
    return str(error.value)


def _write(tmp_path, data, name="model.zip"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# the files a folder's kind is read from


def test_the_paths_are_the_folder_or_the_options_and_weights():
    assert ModelFiles(EFML, folder="m", source="s").paths() == ("m",)
    assert ModelFiles(BILM, "m/options.json", "m/model.hdf5", "m/vocab.txt").paths() == (
        "m/options.json",
        "m/model.hdf5",
    )


def test_an_efml_folder_is_told_by_its_markers_and_named_as_given(efml):
    folder = str(efml)
    assert model_kinds.folder_files(efml) == ModelFiles(EFML, folder=folder, source=folder)
    assert model_kinds.folder_files(folder, "efml-tiny") == ModelFiles(
        EFML, folder=folder, source="efml-tiny"
    )


def test_a_folder_with_bilm_tfs_options_is_bilm_tfs_even_with_efmls_markers(efml, bilm):
    shutil.copy(bilm / "options.json", efml)
    shutil.copy(bilm / "model.hdf5", efml)
    assert model_kinds.folder_files(efml, "both") == ModelFiles(
        BILM, f"{efml}/options.json", f"{efml}/model.hdf5", None, source="both"
    )


@pytest.mark.parametrize("missing", ["char.dic", "config.json"])
def test_a_folder_with_one_marker_of_efmls_is_asked_for_bilm_tfs_files(efml, missing):
    os.remove(efml / missing)
    assert _refusal(PresetError, model_kinds.folder_files, efml) == (
        f"{efml}: a model directory needs {efml}/options.json, {efml}/weights.hdf5 or "
        f"{efml}/model.hdf5 {MARKERS}"
    )


def test_a_marker_that_is_no_file_does_not_make_an_efml_folder(efml):
    os.remove(efml / "char.dic")
    (efml / "char.dic").mkdir()
    with pytest.raises(PresetError):
        model_kinds.folder_files(efml)


def test_a_bilm_tf_folder_gives_its_options_weights_and_vocabulary(bilm):
    folder = str(bilm)
    expected = ModelFiles(BILM, f"{folder}/options.json", f"{folder}/model.hdf5",
                          f"{folder}/vocab.txt", source=folder)  # fmt: skip
    assert model_kinds.folder_files(bilm) == expected
    (bilm / "vocab.txt.gz").write_bytes(b"")  # simple_elmo's first choice
    assert model_kinds.folder_files(bilm, "x").vocab == f"{folder}/vocab.txt.gz"
    os.remove(bilm / "vocab.txt.gz")
    os.remove(bilm / "vocab.txt")
    assert model_kinds.folder_files(bilm, "x") == ModelFiles(
        BILM, f"{folder}/options.json", f"{folder}/model.hdf5", None, source="x"
    )
    (bilm / "vocab.txt").mkdir()  # no file: no vocabulary
    assert model_kinds.folder_files(bilm, "x").vocab is None


def test_a_bilm_tf_folder_names_what_it_lacks(tmp_path, bilm):
    d = tmp_path / "empty"
    d.mkdir()
    assert _refusal(PresetError, model_kinds.bilm_files, str(d)) == (
        f"{d}: a model directory needs {d}/options.json, {d}/weights.hdf5 or {d}/model.hdf5 "
        f"{MARKERS}"
    )
    shutil.copy(bilm / "options.json", d)
    assert _refusal(PresetError, model_kinds.bilm_files, str(d)) == (
        f"{d}: a model directory needs {d}/weights.hdf5 or {d}/model.hdf5 {MARKERS}"
    )
    os.remove(d / "options.json")
    shutil.copy(bilm / "model.hdf5", d)
    assert _refusal(PresetError, model_kinds.bilm_files, str(d)) == (
        f"{d}: a model directory needs {d}/options.json {MARKERS}"
    )


def test_bilm_tfs_weights_are_preferred_to_simple_elmos_and_must_be_readable(bilm):
    d = str(bilm)
    assert model_kinds.bilm_files(d) == (f"{d}/options.json", f"{d}/model.hdf5")
    shutil.copy(bilm / "model.hdf5", bilm / "weights.hdf5")
    assert model_kinds.bilm_files(d) == (f"{d}/options.json", f"{d}/weights.hdf5")
    (bilm / "weights.hdf5").write_bytes(b"")
    assert _refusal(PresetError, model_kinds.bilm_files, d) == (
        f"{d}/weights.hdf5: weight file is empty"
    )


def test_an_options_file_or_weight_file_that_is_no_file_is_refused_by_name(bilm):
    d = str(bilm)
    os.remove(bilm / "model.hdf5")
    (bilm / "model.hdf5").mkdir()
    assert _refusal(PresetError, model_kinds.bilm_files, d) == (
        f"{d}/model.hdf5: is a directory, not a weight file"
    )
    os.remove(bilm / "options.json")
    (bilm / "options.json").mkdir()
    assert _refusal(PresetError, model_kinds.bilm_files, d) == (
        f"{d}/options.json: is a directory, not an options file"
    )
    os.rmdir(bilm / "options.json")
    (bilm / "options.json").symlink_to(bilm / "nowhere.json")  # there, dangling
    assert _refusal(PresetError, model_kinds.bilm_files, d) == (
        f"{d}/options.json: options file not found"
    )


# the contents of each kind


def test_a_bilm_tf_folder_reads_as_its_config_weight_file_and_vocabulary(bilm):
    files = model_kinds.folder_files(bilm, "tiny")
    config = ElmoConfig.from_file(files.options)
    assert model_kinds.read(files) == ModelContents(
        config, files.weights, None, files.vocab, "bilm-tf model tiny", files.weights
    )
    assert model_kinds.read(files, load_weights=False) == ModelContents(
        config, None, None, None, "bilm-tf model tiny", files.weights
    )


@pytest.mark.parametrize("kind, error", [("bilm", OptionsError), ("efml", ForeignModelError)])
def test_the_size_limits_reach_the_config_of_either_kind(request, kind, error):
    files = model_kinds.folder_files(request.getfixturevalue(kind))
    with pytest.raises(error, match="parameters, above the parameters limit of 10 "):
        model_kinds.read(files, size_limits={"parameters": 10})
    model_kinds.read(files, size_limits={"parameters": 10**9})


def _assert_same_vocabulary(found, expected):
    for field in ("char_codepoints", "words", "word_offsets"):
        np.testing.assert_array_equal(getattr(found, field), getattr(expected, field))


def test_an_efml_folder_reads_as_its_converted_config_arrays_and_token_tables(efml):
    folder = str(efml)
    config, arrays = efml_conversion.convert(efml_folder.read_folder(efml))
    contents = model_kinds.read(model_kinds.folder_files(efml, "efml-tiny"))
    assert contents.config == config
    assert sorted(contents.weights) == sorted(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(contents.weights[name], array)
    _assert_same_vocabulary(
        contents.vocabulary, CodepointVocabulary.from_arrays(config, arrays, folder)
    )
    assert contents.vocab_file is None
    assert contents.description == "ELMoForManyLangs model efml-tiny (model config: cnn_tiny.json)"
    assert contents.where == folder
    bare = model_kinds.read(model_kinds.folder_files(efml), load_weights=False)
    assert bare.weights is None and bare.config == config
    _assert_same_vocabulary(bare.vocabulary, contents.vocabulary)  # the ids map without weights
    assert bare.description == f"ELMoForManyLangs model {folder} (model config: cnn_tiny.json)"


def test_an_efml_model_config_is_named_where_the_folder_holds_it(efml):
    (efml / "configs").mkdir()
    shutil.move(efml / "cnn_tiny.json", efml / "configs" / "cnn_tiny.json")
    contents = model_kinds.read(model_kinds.folder_files(efml, "m"), load_weights=False)
    assert contents.description == "ELMoForManyLangs model m (model config: configs/cnn_tiny.json)"


def test_efmls_standard_model_config_is_named_as_such(efml, monkeypatch):
    """A folder whose config.json names EFML's standard config and holds none reads with the
    standard one (here made the tiny model's, to fit its tensors)."""
    tiny = json.loads((efml / "cnn_tiny.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(efml_folder, "STANDARD_CONFIG", tiny)
    os.remove(efml / "cnn_tiny.json")
    train = json.loads((efml / "config.json").read_text(encoding="utf-8"))
    train["config_path"] = "/home/x/cnn_50_100_512_4096_sample.json"
    (efml / "config.json").write_text(json.dumps(train), encoding="utf-8")
    contents = model_kinds.read(model_kinds.folder_files(efml, "m"), load_weights=False)
    assert contents.description == "ELMoForManyLangs model m (model config: EFML's standard one)"


def test_a_token_table_the_conversion_gets_wrong_is_named_by_the_folder(efml, monkeypatch):
    convert = efml_conversion.convert

    def with_a_code_for_id_0(folder, size_limits=None):
        config, arrays = convert(folder, size_limits)
        arrays["vocabulary/char_codepoints"][0] = ord("a")
        return config, arrays

    monkeypatch.setattr(efml_conversion, "convert", with_a_code_for_id_0)
    assert _refusal(WeightFileError, model_kinds.read, model_kinds.folder_files(efml)) == (
        f"{efml}: dataset 'vocabulary/char_codepoints' gives id 0 or a special character's id a "
        "code point"
    )


def test_the_cached_tokens_are_simple_elmos_vocabularys_first(bilm, efml):
    assert model_kinds.read(model_kinds.folder_files(bilm)).cache_tokens() == VOCAB_TOKENS
    assert model_kinds.read(model_kinds.folder_files(efml)).cache_tokens() == []


# the model directory each kind writes


def test_a_bilm_tf_folder_is_written_as_its_files_copied(tmp_path, bilm):
    contents = model_kinds.read(model_kinds.folder_files(bilm))
    out = tmp_path / "out"
    out.mkdir()
    contents.write(str(out))
    assert sorted(os.listdir(out)) == ["options.json", "vocab.txt", "weights.hdf5"]
    assert (out / "weights.hdf5").read_bytes() == (bilm / "model.hdf5").read_bytes()
    assert (out / "vocab.txt").read_bytes() == (bilm / "vocab.txt").read_bytes()
    assert ElmoConfig.from_file(out / "options.json") == contents.config


def test_a_gzipped_vocabulary_is_not_written(tmp_path, bilm):
    shutil.copy(bilm / "vocab.txt", bilm / "vocab.txt.gz")  # the name alone counts here
    contents = model_kinds.read(model_kinds.folder_files(bilm))
    out = tmp_path / "out"
    out.mkdir()
    contents.write(str(out))
    assert sorted(os.listdir(out)) == ["options.json", "weights.hdf5"]


def test_a_weight_file_that_fails_its_checks_is_not_written(tmp_path, bilm):
    contents = model_kinds.read(model_kinds.folder_files(bilm))
    (bilm / "model.hdf5").write_bytes(b"no HDF5")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(WeightFileError, match="not a readable HDF5 weight file"):
        contents.write(str(out))
    assert os.listdir(out) == []


def test_an_efml_folder_is_written_as_its_converted_arrays(tmp_path, efml):
    contents = model_kinds.read(model_kinds.folder_files(efml))
    out = tmp_path / "out"
    out.mkdir()
    contents.write(str(out))
    assert sorted(os.listdir(out)) == ["options.json", "weights.hdf5"]
    with h5py.File(out / "weights.hdf5", "r") as f:
        written = {}
        f.visititems(lambda name, item: written.update({name: item[()]}) if isinstance(
            item, h5py.Dataset) else None)  # fmt: skip
    assert sorted(written) == sorted(contents.weights)
    for name, array in contents.weights.items():
        np.testing.assert_array_equal(written[name], array)
    assert ElmoConfig.from_file(out / "options.json") == contents.config


# an archive's kind and what it reads


def test_an_archive_of_neither_kind_names_both_kinds_files():
    data = zip_bytes([("notes.txt", b"x")])
    assert _refusal(ForeignModelError, model_kinds.parse_archive, data) == f"archive: {NEITHER}"
    assert _refusal(ForeignModelError, model_kinds.parse_archive, data, "m.zip") == (
        f"m.zip: {NEITHER}"
    )


def test_each_kind_in_a_refusal_has_its_article_by_its_first_letter(monkeypatch):
    """``an`` before a capital vowel (ELMoForManyLangs), ``a`` before any other letter."""
    xenon = model_kinds.Kind("Xenon", ("x.cfg",), ("x.cfg",), (), ("x.cfg",))
    monkeypatch.setattr(model_kinds, "KINDS", (*model_kinds.KINDS, xenon))
    assert _refusal(ForeignModelError, model_kinds.archive_kind, {"notes.txt": None}, "m.zip") == (
        f"m.zip: {NEITHER} nor a Xenon one (x.cfg)"
    )


def test_the_source_names_an_archive_zipfile_cannot_read():
    assert _refusal(ForeignModelError, model_kinds.parse_archive, b"junk", "m.zip") == (
        "m.zip: not a readable zip archive (File is not a zip file)"
    )


@pytest.mark.parametrize(
    "names, lacks",
    [
        (["options.json"], "lacks weights.hdf5 or model.hdf5 (a bilm-tf model archive holds "
         "options.json, weights.hdf5 or model.hdf5)"),
        (["config.json", "char.dic", "encoder.pkl"], "lacks token_embedder.pkl (an "
         "ELMoForManyLangs model archive holds config.json, char.dic, token_embedder.pkl, "
         "encoder.pkl)"),
    ],
)  # fmt: skip
def test_an_archive_names_what_its_kind_lacks(names, lacks):
    members = dict.fromkeys(names)
    assert _refusal(ForeignModelError, model_kinds.archive_kind, members, "m.zip") == (
        f"m.zip: {lacks}"
    )


def test_an_archive_of_both_kinds_markers_is_refused():
    members = dict.fromkeys(["options.json", "config.json", "char.dic", "model.hdf5"])
    assert _refusal(ForeignModelError, model_kinds.archive_kind, members, "m.zip") == (
        "m.zip: holds both a bilm-tf and an ELMoForManyLangs model"
    )


@pytest.mark.parametrize(
    "names, kind, extra",
    [
        (["options.json", "model.hdf5", "other.json"], "a bilm-tf", "other.json"),
        (["config.json", "char.dic", "token_embedder.pkl", "encoder.pkl", "cnn.json", "run.sh"],
         "an ELMoForManyLangs", "run.sh"),
        (["options.json", "model.hdf5", "README.md", "vocab.txt", "x" * 81],
         "a bilm-tf", "x" * 80 + "... (81 characters)"),
    ],
)  # fmt: skip
def test_a_member_its_kind_has_no_place_for_is_refused(names, kind, extra):
    assert _refusal(ForeignModelError, model_kinds.archive_kind, dict.fromkeys(names), "m.zip") == (
        f"m.zip: holds '{extra}', which {kind} model archive has no place for"
    )


def test_an_efml_archive_may_hold_its_model_config_in_configs():
    tiny = (EFML_TINY / "cnn_tiny.json").read_bytes()
    efml = [m for m in efml_members() if m[0] != "cnn_tiny.json"]
    data = zip_bytes([*efml, ("configs/cnn_tiny.json", tiny)])
    members, kind = model_kinds.parse_archive(data, "m.zip")
    assert kind is EFML and "configs/cnn_tiny.json" in members


def test_what_an_archive_reads_is_its_kinds_files_and_the_model_config_named(tmp_path):
    bilm = _write(tmp_path, zip_bytes(bilm_members()), "bilm.zip")
    members, kind = model_kinds.check_archive(bilm)
    assert model_kinds.members_read(kind, members, str(bilm)) == [
        "model.hdf5",
        "options.json",
        "vocab.txt",
    ]
    tiny = (EFML_TINY / "cnn_tiny.json").read_bytes()
    efml = [m for m in efml_members() if m[0] != "cnn_tiny.json"]
    in_configs = _write(tmp_path, zip_bytes([*efml, ("configs/cnn_tiny.json", tiny),
                                             ("other.json", b"{}")]), "in_configs.zip")  # fmt: skip
    members, kind = model_kinds.check_archive(in_configs)
    assert model_kinds.members_read(kind, members, str(in_configs)) == [
        "config.json",
        "char.dic",
        "word.dic",
        "token_embedder.pkl",
        "encoder.pkl",
        "configs/cnn_tiny.json",
    ]
    none = _write(tmp_path, zip_bytes(efml), "none.zip")  # the standard config may serve
    members, kind = model_kinds.check_archive(none)
    assert model_kinds.members_read(kind, members, str(none)) == [
        "config.json",
        "char.dic",
        "word.dic",
        "token_embedder.pkl",
        "encoder.pkl",
    ]


def test_an_archives_config_json_is_named_in_its_error(tmp_path):
    members = [(n, b"[1]" if n == "config.json" else d) for n, d in efml_members()]
    path = _write(tmp_path, zip_bytes(members))
    found, kind = model_kinds.check_archive(path)
    assert _refusal(ForeignModelError, model_kinds.members_read, kind, found, str(path)) == (
        f"{path}: config.json: expected a JSON object, got list"
    )


def test_the_model_config_is_read_bounded(tmp_path, monkeypatch):
    path = _write(tmp_path, zip_bytes(efml_members()))
    members, kind = model_kinds.check_archive(path)
    monkeypatch.setattr(efml_folder, "MAX_CONFIG_BYTES", members["config.json"].file_size - 1)
    with pytest.raises(ForeignModelError, match="config.json' declares .* bytes, more than the"):
        model_kinds.members_read(kind, members, str(path))
