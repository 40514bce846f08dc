"""Published names and URLs without a download: unknown names list the known ones, the
registry's addresses, URLs shown without credentials, other schemes named, the subcommands'
usage."""

import os
import re

import pytest
from support.paths import TINY

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.errors import ElmoError, OptionsError, WeightFileError
from elmo_tf.presets import cache, cache_entries, published
from elmo_tf.system import urls


def test_unknown_names_list_the_known_ones():
    with pytest.raises(ElmoError, match="a published model \\(full, medium, original"):
        elmo_tf.ELMo.from_preset("huge")


# Every published file where AllenNLP publishes it (its docs and models name these URLs).
ALLENNLP = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
PUBLISHED_URLS = {
    "small": (
        f"{ALLENNLP}/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json",
        f"{ALLENNLP}/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5",
    ),
    "medium": (
        f"{ALLENNLP}/2x2048_256_2048cnn_1xhighway/elmo_2x2048_256_2048cnn_1xhighway_options.json",
        f"{ALLENNLP}/2x2048_256_2048cnn_1xhighway/elmo_2x2048_256_2048cnn_1xhighway_weights.hdf5",
    ),
    "original": (
        f"{ALLENNLP}/2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_options.json",
        f"{ALLENNLP}/2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5",
    ),
    "original_5.5b": (
        f"{ALLENNLP}/2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json",
        f"{ALLENNLP}/2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5",
    ),
    "pubmed": (
        f"{ALLENNLP}/contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
        f"{ALLENNLP}/contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
    ),
}


def test_the_registry_holds_the_published_addresses():
    assert published.lookup("full") is published.MODELS["original"]
    assert {name: m.urls(ALLENNLP) for name, m in published.MODELS.items()} == PUBLISHED_URLS
    sizes = {name: round(m.download_bytes / 1e6) for name, m in published.MODELS.items()}
    assert sizes == {"small": 54, "medium": 112, "original": 374, "original_5.5b": 374,
                     "pubmed": 374}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PUBLISHED_URLS))
def test_each_published_url_goes_through_the_mirror(name, monkeypatch):
    """AllenNLP's URL of each published file, on any of S3's hosts, is read from the mirror
    where the model's name is; a URL of no published file is left as it is."""
    monkeypatch.setenv(published.BASE_URL_VARIABLE, "http://mirror.example/elmo")
    for url, mirrored in zip(PUBLISHED_URLS[name], published.MODELS[name].urls()):
        assert mirrored.startswith("http://mirror.example/elmo/")
        for host in published.ALLENNLP_BASE_URLS:
            assert published.mirrored(url.replace(ALLENNLP, host)) == mirrored
    other = f"{ALLENNLP}/2x1024_128_2048cnn_1xhighway/elmo_other_weights.hdf5"
    assert published.mirrored(other) == other


@pytest.mark.parametrize(
    "url, shown, usable",
    [
        ("http://alice:pw@127.0.0.1:99999/x", "http://127.0.0.1:99999/x", False),  # the port
        ("http://al:pw@[::1/x", "http://[::1/x", False),  # an IPv6 address never closed
        ("https://a@b@Host.example/p?q=@", "https://Host.example/p?q=@", True),  # the last @
        # a user or password with an unescaped / ? #: it cannot be told from the path, so all
        # of it is hidden, and the URL refused (it was shown and stored whole)
        ("https://user:se#cret@m.example/elmo", "https://<hidden>@m.example/elmo", False),
        ("https://AbC/dEf+g=@m.example/x.hdf5", "https://<hidden>@m.example/x.hdf5", False),
        ("http://host/path@x", "http://<hidden>@x", False),  # an @ in a path: refused too
    ],
)
def test_a_url_is_shown_without_credentials_whatever_it_holds(url, shown, usable):
    """Shown without parsing the URL first: an invalid port or address is no traceback."""
    assert urls.public_url(url) == shown
    assert urls.is_url(url) and (urls.problem(url) is None) == usable
    if not usable:
        with pytest.raises(cache.DownloadError) as e:
            cache_entries.entry_path(url)
        assert "cret" not in str(e.value) and "dEf" not in str(e.value)


def test_a_subcommand_says_its_own_usage(capsys):
    assert main(["cache", "list", "extra"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: elmo-tf cache list ")
    assert "elmo-tf cache list: error: unrecognized arguments: extra" in err


@pytest.mark.parametrize(
    ("options", "weights", "error", "message"),
    [
        ("ftp://127.0.0.1/x_options.json", None, OptionsError, "ftp://127.0.0.1/x_options.json"),
        (None, "file:///tmp/weights.hdf5", WeightFileError, "file:///tmp/weights.hdf5"),
    ],
    ids=["ftp options", "file weights"],
)
def test_a_url_of_another_scheme_is_named_as_one(options, weights, error, message):
    # It was read as a local path: "options file not found".
    options = options or str(TINY / "options.json")
    weights = weights or str(TINY / "weights.hdf5")
    expected = f"{message}: not an http:// or https:// URL; "
    with pytest.raises(error, match="^" + re.escape(expected)):
        elmo_tf.load_pretrained(options, weights)


NLPL_MIRROR, MODEL_MIRROR = "http://nlpl.mirror.example/repo", "http://models.mirror.example/elmo"


@pytest.mark.parametrize(
    "url, variable",
    [
        ("http://vectors.nlpl.eu/repository/11/144.zip", "ELMO_TF_NLPL_BASE_URL"),
        (f"{NLPL_MIRROR}/11/144.zip", "ELMO_TF_NLPL_BASE_URL"),
        (PUBLISHED_URLS["small"][1], "ELMO_TF_MODEL_BASE_URL"),
        (f"{MODEL_MIRROR}/2x1024_128_2048cnn_1xhighway/x_weights.hdf5", "ELMO_TF_MODEL_BASE_URL"),
        ("https://files.example/my/weights.hdf5", None),
    ],
    ids=["nlpl", "nlpl mirror", "published", "published mirror", "a user's URL"],
)
def test_a_failed_download_names_the_variable_of_its_own_family(
    url, variable, monkeypatch, tmp_path
):
    """Following the advice literally changes where the file is read from: an NLPL archive's
    names ELMO_TF_NLPL_BASE_URL, a published model's ELMO_TF_MODEL_BASE_URL, a user's own URL
    neither (no variable moves it)."""
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path))  # nothing cached elsewhere
    mirrored = "mirror" in url
    if mirrored:
        monkeypatch.setenv("ELMO_TF_NLPL_BASE_URL", NLPL_MIRROR)
        monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", MODEL_MIRROR)
    advice, not_found = cache._advice(url, None), cache._advice(url, 404)
    named = {v for v in ("ELMO_TF_NLPL_BASE_URL", "ELMO_TF_MODEL_BASE_URL") if v in advice}
    assert named == ({variable} if variable else set())
    if variable == "ELMO_TF_NLPL_BASE_URL":
        assert "<release>/<id>.zip" in not_found
    elif variable:
        assert "AllenNLP's folder and file names" in not_found
    else:
        assert not_found == "the file is not at this address"


def test_an_offline_nlpl_archive_cached_under_another_mirror_names_the_nlpl_variable(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    cached = f"{NLPL_MIRROR}/11/144.zip"
    path = cache_entries.entry_path(cached)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"PK")
    cache_entries.write_record(cache_entries.Entry(path, cached, 2, "0" * 64))
    with pytest.raises(cache.DownloadError) as error:
        cache.check_offline("http://vectors.nlpl.eu/repository/11/144.zip", "the NLPL archive")
    message = str(error.value)
    assert f"the cache holds the same file for {cached}" in message
    assert message.endswith("set ELMO_TF_NLPL_BASE_URL as it was set when it was downloaded")
    assert "ELMO_TF_MODEL_BASE_URL" not in message


def test_an_nlpl_name_means_its_entry_and_an_unknown_one_lists_the_known_ones():
    from elmo_tf.presets import nlpl

    assert nlpl.entry_named("efml-en") == nlpl.ENTRIES[144]
    assert nlpl.entry_named("nlpl:20/219") == nlpl.Entry(20, 219)
    with pytest.raises(ElmoError) as error:
        nlpl.entry_named("efml-ne")
    assert str(error.value) == (
        "'efml-ne' names no NLPL repository entry known here: write nlpl:<release>/<id> for any "
        "entry (nlpl:20/219), or one of efml-ar, efml-bg, efml-ca, efml-cs, efml-cu, efml-da, "
        "... (docs/models.md); did you mean 'efml-nn'?"
    )


@pytest.mark.parametrize(
    "base, url",
    [
        ("http://m.example/repo", "http://m.example/repo/11/144.zip"),
        ("http://m.example/repo//", "http://m.example/repo/11/144.zip"),
        ("http://m.example/XX/", "http://m.example/XX/11/144.zip"),  # only slashes go
    ],
)
def test_an_nlpl_url_joins_its_base_without_a_trailing_slash(base, url):
    from elmo_tf.presets import nlpl

    assert nlpl.ENTRIES[144].url(base) == url
