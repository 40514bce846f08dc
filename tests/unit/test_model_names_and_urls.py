"""Published names and URLs without a download: unknown names list the known ones, the
registry's addresses, URLs shown without credentials, other schemes named, the subcommands'
usage."""

import re

import pytest
from support.paths import TINY

import elmo_tf
from elmo_tf import urls
from elmo_tf.cli.main import main
from elmo_tf.errors import ElmoError, OptionsError, WeightFileError
from elmo_tf.presets import cache, cache_entries, published


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
