"""NLPL repository entries from a loopback mirror, through the cache: a name downloads once, is
verified and unpacked, loads with its own code's numbers, works offline, and `cache list` /
`cache remove` know it; a hostile archive is not kept."""

import os

import numpy as np
import pytest
from support.foreign_models import (
    NLPL_BILM_ZIP,
    TOLERANCE,
    efml_golden,
    efml_members,
    simple_elmo_golden,
    zip_bytes,
)

from elmo_tf.errors import DownloadError, ForeignModelError


@pytest.fixture
def nlpl_mirror(monkeypatch, tmp_path):
    from support.mirror import ModelMirror

    files = {"/11/144.zip": zip_bytes(efml_members()), "/20/9999.zip": NLPL_BILM_ZIP.read_bytes(),
             "/11/145.zip": zip_bytes([*efml_members(), ("../../evil.txt", b"x")])}  # fmt: skip
    with ModelMirror(files) as mirror:
        monkeypatch.setenv("ELMO_TF_NLPL_BASE_URL", mirror.base_url)
        monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
        yield mirror


def test_an_nlpl_name_downloads_once_unpacks_and_gives_efmls_numbers(
    nlpl_mirror, monkeypatch, tmp_path, capsys
):
    import elmo_tf
    from elmo_tf.cli.main import main

    sentences, golden = efml_golden()
    model = elmo_tf.ELMo.from_preset("efml-en")
    outputs = model.embed(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_allclose(outputs["elmo"][i, : len(sentence)], golden[f"average_{i}"],
                                   rtol=0, atol=TOLERANCE)  # fmt: skip
    assert nlpl_mirror.requests["/11/144.zip"] == 1
    elmo_tf.ELMo.from_preset("nlpl:144")  # the same entry: from the cache
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    elmo_tf.ELMo.from_preset("efml-en")
    assert nlpl_mirror.requests["/11/144.zip"] == 1

    assert main(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert listing.count("efml-en\t") == 2 and "unpacked from the archive above" in listing
    assert main(["cache", "remove", "efml-en"]) == 0
    assert "removed: " in capsys.readouterr().out
    assert not [p for p in (tmp_path / "cache").rglob("*") if "144" in p.name]
    with pytest.raises(DownloadError, match="ELMO_TF_OFFLINE forbids downloading it: run "
                       "elmo-tf download efml-en"):  # fmt: skip
        elmo_tf.ELMo.from_preset("efml-en")


def test_a_bilm_tf_entry_by_release_and_id(nlpl_mirror, capsys):
    import elmo_tf
    from elmo_tf.cli.main import main

    assert main(["download", "nlpl:20/9999"]) == 0
    assert "nlpl:20/9999\t394,877\t" in capsys.readouterr().out
    model = elmo_tf.ELMo.from_preset("nlpl:20/9999")
    sentences, golden = simple_elmo_golden()
    outputs = model.embed(sentences[:1])
    np.testing.assert_allclose(outputs["elmo"][0, :4], golden["average_0"], rtol=0,
                               atol=TOLERANCE)  # fmt: skip
    assert nlpl_mirror.requests["/20/9999.zip"] == 1


def test_a_hostile_archive_from_the_mirror_is_not_kept(nlpl_mirror, tmp_path):
    import elmo_tf

    with pytest.raises(ForeignModelError) as error:
        elmo_tf.ELMo.from_preset("efml-es")
    message = str(error.value)
    assert "'../../evil.txt' has a name that is absolute or leaves the folder" in message
    assert "(downloaded from http://127.0.0.1:" in message and "not kept)" in message
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [".lock"]
    assert not list(tmp_path.rglob("evil.txt"))
    assert not os.path.exists(tmp_path.parent / "evil.txt")


def test_an_archive_at_hand_goes_into_the_cache_under_its_name_offline(
    monkeypatch, tmp_path, capsys
):
    """An offline machine: `cache add` checks the archive as a download is checked, then the
    name loads from the cache; a hostile archive is refused and nothing of it kept."""
    import elmo_tf
    from elmo_tf.cli.main import main

    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    hostile = tmp_path / "145.zip"
    hostile.write_bytes(zip_bytes([*efml_members(), ("../../evil.txt", b"x")]))
    assert main(["cache", "add", "efml-es", str(hostile)]) == 1
    err = capsys.readouterr().err
    assert "'../../evil.txt' has a name that is absolute or leaves the folder" in err
    assert f"(from {hostile}; not kept)" in err
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.name != ".lock"]

    archive = tmp_path / "144.zip"
    archive.write_bytes(zip_bytes(efml_members()))
    assert main(["cache", "add", "efml-en", str(archive)]) == 0
    assert capsys.readouterr().out.startswith(f"added {archive} as efml-en: {tmp_path / 'cache'}")
    sentences, golden = efml_golden()
    outputs = elmo_tf.ELMo.from_preset("efml-en").embed(sentences[:1])
    np.testing.assert_allclose(outputs["elmo"][0, : len(sentences[0])], golden["average_0"],
                               rtol=0, atol=TOLERANCE)  # fmt: skip
    assert main(["cache", "add", "efml-en", str(archive)]) == 1
    assert "is in the cache already" in capsys.readouterr().err
    assert main(["cache", "add", "efml-en", str(archive), str(archive)]) == 1
    assert "'efml-en' takes its archive (.zip): 2 file(s) given" in capsys.readouterr().err
