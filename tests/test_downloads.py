"""Published models one line away: downloaded once, cached, checked at every use, never half.

Every test talks to a loopback server holding the published layout (``model_mirror``, random
weights in the ``small`` shape), through ``ELMO_TF_MODEL_BASE_URL``, with a cache of its own.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.errors import ElmoError, OptionsError, WeightFileError
from elmo_tf.presets import cache, published

SMALL = published.MODELS["small"]
OPTIONS_PATH = f"/{SMALL.folder}/{SMALL.options_file}"
WEIGHTS_PATH = f"/{SMALL.folder}/{SMALL.weights_file}"
SENTENCES = [["The", "bank", "closed", "."], ["Hello", "!"]]


@pytest.fixture
def mirror(model_mirror, monkeypatch, tmp_path):
    """The mirror as ``ELMO_TF_MODEL_BASE_URL``, an empty cache, no faults, counts reset."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", model_mirror.base_url)
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "RETRY_WAIT_SECONDS", 0.0)
    model_mirror.faults.clear()
    model_mirror.requests.clear()
    yield model_mirror
    model_mirror.faults.clear()


def _cached_files():
    root = os.path.join(cache.cache_dir(), "files")
    found = []
    for directory, _, names in os.walk(root):
        found += [os.path.join(directory, n) for n in names if n != ".lock"]
    return sorted(found)


def test_first_load_downloads_and_equals_the_local_files(mirror, small_official_files, capfd):
    model = elmo_tf.ELMo.from_preset("small")
    err = capfd.readouterr().err
    assert "downloading the weight file of 'small'" in err and "MB/s" in err
    local = elmo_tf.load_pretrained(*small_official_files)
    for a, b in zip(model.get_weights(), local.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert mirror.requests == {OPTIONS_PATH: 1, WEIGHTS_PATH: 1}
    # the second load reads the cache only: it works with the server broken
    mirror.faults.update({OPTIONS_PATH: "500", WEIGHTS_PATH: "500"})
    again = elmo_tf.ELMo.from_preset("small")
    assert mirror.requests == {OPTIONS_PATH: 1, WEIGHTS_PATH: 1}
    np.testing.assert_array_equal(again.get_weights()[0], local.get_weights()[0])
    assert capfd.readouterr().err == ""  # nothing downloaded, nothing said


def test_load_pretrained_takes_urls(mirror, small_official_files):
    options_url, weights_url = SMALL.urls(mirror.base_url)
    model = elmo_tf.load_pretrained(options_url, weights_url)
    local = elmo_tf.load_pretrained(*small_official_files)
    np.testing.assert_array_equal(model.get_weights()[-1], local.get_weights()[-1])


def test_offline_names_the_missing_file_and_the_command(mirror, monkeypatch):
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    assert "run elmo-tf download small without ELMO_TF_OFFLINE, where" in str(e.value)
    assert mirror.requests == {}
    # the architecture alone needs no network
    assert elmo_tf.ELMo.from_preset("small", load_weights=False).config.lstm_dim == 1024


def test_offline_loads_a_cached_model_without_a_request(mirror, monkeypatch, small_official_files):
    elmo_tf.ELMo.from_preset("small")  # fills the cache
    mirror.requests.clear()
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    # the mirror broken too: whatever asks the network would fail or be counted
    mirror.faults.update({OPTIONS_PATH: "500", WEIGHTS_PATH: "500"})
    model = elmo_tf.ELMo.from_preset("small")
    assert mirror.requests == {}
    local = elmo_tf.load_pretrained(*small_official_files)
    for a, b in zip(model.get_weights(), local.get_weights()):
        np.testing.assert_array_equal(a, b)
    urls = SMALL.urls(mirror.base_url)
    assert elmo_tf.load_pretrained(*urls).config.lstm_dim == 1024  # the URLs, offline
    assert mirror.requests == {}


@pytest.mark.parametrize(
    "path, fault, error, fragment",
    [
        (OPTIONS_PATH, "404", cache.DownloadError, "HTTP 404"),
        (WEIGHTS_PATH, "500", cache.DownloadError, "HTTP 500"),
        (WEIGHTS_PATH, "halfway", cache.DownloadError, "the connection closed after"),
        (WEIGHTS_PATH, "declare_less", WeightFileError, "weights.hdf5"),
        (WEIGHTS_PATH, "declare_huge", cache.DownloadError, "declares 1,000,000,000,000 bytes"),
        (WEIGHTS_PATH, "garbage", WeightFileError, "not a readable HDF5 weight file"),
        (OPTIONS_PATH, "garbage", OptionsError, "removed from the cache"),
    ],
)
def test_a_broken_download_is_one_line_and_leaves_nothing(mirror, path, fault, error, fragment):
    mirror.faults[path] = fault
    with pytest.raises(error) as e:
        elmo_tf.ELMo.from_preset("small")
    message = str(e.value)
    assert fragment in message and "\n" not in message and isinstance(e.value, ElmoError)
    leftovers = [p for p in _cached_files() if path.rsplit("/", 1)[1] in os.path.basename(p)]
    assert leftovers == []
    # the fault gone, the same call works
    mirror.faults.clear()
    assert elmo_tf.ELMo.from_preset("small").config.projection_dim == 128


def test_transient_failures_are_retried(mirror, monkeypatch):
    calls = []
    real = cache._download_once

    def flaky(url, path, what, max_bytes):  # the first transfer of the weights breaks
        if url.endswith(WEIGHTS_PATH):
            calls.append(url)
            if len(calls) == 1:
                mirror.faults[WEIGHTS_PATH] = "halfway"
            else:
                mirror.faults.clear()
        return real(url, path, what, max_bytes)

    monkeypatch.setattr(cache, "_download_once", flaky)
    elmo_tf.ELMo.from_preset("small")
    assert mirror.requests[WEIGHTS_PATH] == 2


def test_a_slow_server_times_out(mirror, monkeypatch):
    monkeypatch.setattr(cache, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(cache, "RETRIES", 0)
    mirror.stall_seconds = 2.0
    mirror.faults[OPTIONS_PATH] = "stall"
    with pytest.raises(cache.DownloadError, match=r"no data, or less than 64 KiB, for 0.5 s"):
        elmo_tf.ELMo.from_preset("small")


def test_a_server_that_drips_bytes_times_out(mirror, monkeypatch):
    """A byte every 0.1 s is never idle for the read timeout, but brings less than 64 KiB in
    it: cut off after about the timeout (it used to go on for ever), nothing kept."""
    monkeypatch.setattr(cache, "READ_TIMEOUT", 1.0)
    monkeypatch.setattr(cache, "RETRIES", 0)
    mirror.stall_seconds = 20.0
    mirror.faults[OPTIONS_PATH] = "drip"
    start = time.monotonic()
    with pytest.raises(cache.DownloadError, match=r"less than 64 KiB, for 1.0 s"):
        elmo_tf.ELMo.from_preset("small")
    assert time.monotonic() - start < 10
    assert cache.entries() == []


def test_no_network(mirror, monkeypatch):
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/nothing")
    monkeypatch.setattr(cache, "RETRIES", 0)
    with pytest.raises(cache.DownloadError, match="cannot connect"):
        elmo_tf.ELMo.from_preset("small")


def test_a_cache_directory_that_cannot_be_made(mirror, monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(cache.CacheError, match="cannot create the model cache directory"):
        elmo_tf.ELMo.from_preset("small")


def test_a_tampered_cache_file_is_refused(mirror):
    elmo_tf.ELMo.from_preset("small")
    (weights,) = [p for p in _cached_files() if p.endswith(".hdf5")]
    with open(weights, "r+b") as f:
        f.seek(os.path.getsize(weights) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(cache.CacheError, match="changed since it was downloaded"):
        elmo_tf.ELMo.from_preset("small")
    assert main(["cache", "remove", "small"]) == 0
    elmo_tf.ELMo.from_preset("small")  # downloaded again, good
    assert mirror.requests[WEIGHTS_PATH] == 2


@pytest.mark.slow
def test_a_full_disk_leaves_nothing(mirror, tmp_path):
    """A file size limit stands in for a full disk: the write fails in the middle."""
    script = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (10 << 20, 10 << 20))\n"
        "import elmo_tf\n"
        "elmo_tf.ELMo.from_preset('small')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1
    assert "cannot write the weight file of 'small'" in done.stderr
    assert "File too large" in done.stderr
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []


@pytest.mark.slow
def test_two_processes_at_once_download_once(mirror):
    script = "import elmo_tf; elmo_tf.ELMo.from_preset('small'); print('ok')"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert mirror.requests[WEIGHTS_PATH] == 1
    assert len([p for p in _cached_files() if p.endswith(".hdf5")]) == 1


def test_cli_download_list_remove_and_model_flag(mirror, tmp_path, capsys):
    assert main(["download", "small"]) == 0
    out = capsys.readouterr().out
    assert out.count("small\t") == 2 and f"{os.path.getsize(_cached_files()[0]):,}" in out
    assert main(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert "(4 files)" in listing or "(2 files)" in listing
    assert listing.count("small\t") == 2
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--model", "small"]) == 0
    assert mirror.requests[WEIGHTS_PATH] == 1  # from the cache
    assert main(["cache", "remove", "small"]) == 0
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []
    assert main(["download", "huge"]) == 1
    assert "unknown model 'huge'; published models: full, medium" in capsys.readouterr().err


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


def test_the_beam_handler_loads_published_names_and_urls_through_the_cache(mirror):
    pytest.importorskip("apache_beam")
    from elmo_tf.beam import ElmoModelHandler

    by_name = ElmoModelHandler("small").load_model()
    options_url, weights_url = SMALL.urls(mirror.base_url)
    by_url = ElmoModelHandler(options_file=options_url, weight_file=weights_url).load_model()
    np.testing.assert_array_equal(by_name.get_weights()[0], by_url.get_weights()[0])
    assert mirror.requests == {OPTIONS_PATH: 1, WEIGHTS_PATH: 1}  # one download, then the cache


def test_a_server_that_compresses_on_the_fly_is_asked_for_the_bytes_as_stored(
    mirror, small_official_files
):
    # A mirror behind a web server's gzip declares the encoded length; the files are asked for
    # as stored (Accept-Encoding: identity), so a correct download is never refused.
    mirror.faults[WEIGHTS_PATH] = mirror.faults[OPTIONS_PATH] = "gzip"
    model = elmo_tf.ELMo.from_preset("small")
    assert model.config.projection_dim == 128
