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


def test_the_registry_holds_the_published_addresses():
    original = published.lookup("full")
    assert original is published.MODELS["original"]
    assert original.urls("https://s3-us-west-2.amazonaws.com/allennlp/models/elmo") == (
        "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_options.json",
        "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5",
    )
    assert published.MODELS["original_5.5b"].urls("B")[1] == (
        "B/2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5"
    )
    sizes = {name: round(m.download_bytes / 1e6) for name, m in published.MODELS.items()}
    assert sizes == {"small": 54, "medium": 112, "original": 374, "original_5.5b": 374,
                     "pubmed": 374}  # fmt: skip


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
