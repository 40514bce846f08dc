"""Published models one line away: downloaded once, cached, checked at every use, never half.

Every test talks to a loopback server holding the published layout (``model_mirror``, random
weights in the ``small`` shape), through ``ELMO_TF_MODEL_BASE_URL``, with a cache of its own.
"""

import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import elmo_tf
from elmo_tf import urls
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


def test_transient_failures_are_retried(mirror):
    mirror.faults[WEIGHTS_PATH] = "halfway_once"  # the first transfer of the weights breaks
    elmo_tf.ELMo.from_preset("small")
    assert mirror.requests[WEIGHTS_PATH] == 2


def test_errors_that_cannot_heal_are_not_retried(mirror, monkeypatch):
    mirror.faults[WEIGHTS_PATH] = "404"
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    assert mirror.requests[WEIGHTS_PATH] == 1
    assert "HTTP 404" in str(e.value) and "docs/models.md" in str(e.value)
    # a host name that does not resolve: tried once, one line with the cause and what to do
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://nosuchhost.invalid/elmo")
    attempts = []
    real = cache._transient
    monkeypatch.setattr(cache, "_transient", lambda e, p: attempts.append(e) or real(e, p))
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    message = str(e.value)
    assert len(attempts) == 1 and "\n" not in message
    assert message.startswith("http://nosuchhost.invalid/elmo/2x1024_128_2048cnn_1xhighway/")
    assert "the host name does not resolve" in message
    # the options file came before the 404: what to do is to use that address again
    assert f"the cache holds the same file for {mirror.base_url}" in message


def test_a_server_that_compresses_although_asked_not_to(mirror, small_official_files):
    """The bytes are counted on the wire: a gzipped body of its declared length is whole (it
    used to be refused as 'declared 221 bytes but sent 335')."""
    mirror.faults[OPTIONS_PATH] = "gzip_anyway"
    model = elmo_tf.ELMo.from_preset("small")
    assert model.config == elmo_tf.load_pretrained(*small_official_files).config


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
    """The cause whole, in one line: it used to be cut at 300 characters, right where the
    reason was ("Failed to establish a new connection: [Errno 1")."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/nothing")
    monkeypatch.setattr(cache, "RETRIES", 0)
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    message = str(e.value)
    assert "the connection was refused ([Errno 111] Connection refused)" in message, message
    assert "\n" not in message and "HTTPConnection" not in message
    assert "check the address and the network" in message
    assert "ELMO_TF_OFFLINE" not in message  # nothing is cached: offline cannot help


def test_a_retry_is_said(mirror, monkeypatch, capfd):
    """A failure that may heal is tried again, and each new try is said on stderr (a refused
    connection used to take seconds without a word)."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/nothing")
    monkeypatch.setattr(cache, "RETRIES", 1)
    with pytest.raises(cache.DownloadError, match="the connection was refused"):
        elmo_tf.ELMo.from_preset("small")
    err = capfd.readouterr().err
    assert (
        "the connection was refused ([Errno 111] Connection refused); trying again (1 of 1)" in err
    )
    assert err.count("trying again") == 1


def test_a_failed_download_names_the_copy_cached_under_another_address(mirror, monkeypatch):
    """A new shell, another (here unreachable) base URL: the failure says where the model is
    cached and which variable to set, at the first try (it used to say so only offline)."""
    elmo_tf.ELMo.from_preset("small")  # cached under the mirror's URL
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/elsewhere")
    monkeypatch.setattr(cache, "RETRIES", 0)
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    message = str(e.value)
    assert "the connection was refused" in message
    assert f"the cache holds the same file for {mirror.base_url}" in message
    assert "set ELMO_TF_MODEL_BASE_URL as it was set" in message and "\n" not in message


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


def test_cache_clear_removes_only_what_the_cache_made(mirror, tmp_path, monkeypatch, capsys):
    """ELMO_TF_CACHE_DIR may name a directory holding the user's own files (the working
    directory, a home directory): clear removes the cache's entries and nothing else."""
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "todo.txt").write_text("mine", encoding="utf-8")
    (home / "report.hdf5").write_bytes(b"mine too")
    (home / "files").mkdir()
    (home / "files" / "my-own-file").write_text("not the cache's", encoding="utf-8")
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(home))
    elmo_tf.ELMo.from_preset("small")
    assert len(cache.entries()) == 2
    # a user's files inside an entry's directory are not the cache's either
    entry = pathlib.Path(cache.entries()[0].path).parent
    (entry / "precious.txt").write_text("mine", encoding="utf-8")
    (entry / "mydir").mkdir()
    (entry / "mydir" / "p2").write_text("mine", encoding="utf-8")
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 cache entry" in out, out
    assert f"kept {entry}: it holds files the cache did not make" in out
    assert cache.entries() == [] and sorted(os.listdir(entry)) == ["mydir", "precious.txt"]
    assert (entry / "mydir" / "p2").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in home.iterdir()) == ["files", "notes", "report.hdf5"]
    assert (home / "notes" / "todo.txt").read_text(encoding="utf-8") == "mine"
    assert sorted(os.listdir(home / "files")) == [entry.name, "my-own-file"]
    # so does cache remove
    elmo_tf.ELMo.from_preset("small")
    assert main(["cache", "remove", "small"]) == 0
    assert f"kept {entry}: it holds files the cache did not make" in capsys.readouterr().out
    assert cache.entries() == [] and sorted(os.listdir(entry)) == ["mydir", "precious.txt"]
    # and a cache directory that is a regular file: named, nothing removed
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(home / "report.hdf5"))
    for action in ("clear", "list"):
        assert main(["cache", action]) == 1
        assert "report.hdf5 is not a directory" in capsys.readouterr().err
    assert (home / "report.hdf5").read_bytes() == b"mine too"


def test_a_download_killed_before_its_record_is_counted_and_removed(mirror, capsys):
    """Killed after its file is in place but before the record: the entry's marker names the
    file, whatever its name; a file the marker does not name stays (it is not the cache's)."""
    elmo_tf.ELMo.from_preset("small")
    entry = pathlib.Path(cache.entries()[0].path).parent
    (entry / "weights?x=1").write_bytes(b"the whole body, no record yet")
    (entry / cache.PENDING_NAME).write_text("weights?x=1\n", encoding="utf-8")
    (entry / "notes.hdf5").write_bytes(b"the user's")
    stale = {pathlib.Path(p).name for p, _ in cache.stale_files()}
    assert stale == {"weights?x=1", cache.PENDING_NAME}
    assert main(["cache", "clear"]) == 0
    assert f"kept {entry}" in capsys.readouterr().out
    assert os.listdir(entry) == ["notes.hdf5"]


def test_a_killed_download_leaves_nothing_for_good(mirror, monkeypatch, capsys):
    """A download killed with SIGKILL leaves its temporary file: cache list counts it, and the
    next fetch of the entry removes it."""
    mirror.faults[WEIGHTS_PATH] = "drip"
    mirror.stall_seconds = 60.0
    script = "import elmo_tf; elmo_tf.ELMo.from_preset('small')"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.DEVNULL)
    directory = os.path.dirname(cache.entry_path(SMALL.urls(mirror.base_url)[1]))
    try:
        deadline = time.monotonic() + 120
        while not (os.path.isdir(directory) and [n for n in os.listdir(directory) if "tmp" in n]):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    (stale_path, _), *_ = cache.stale_files()
    assert os.path.dirname(stale_path) == directory
    assert main(["cache", "list"]) == 0
    assert "(stale)" in capsys.readouterr().out
    mirror.faults.clear()
    elmo_tf.ELMo.from_preset("small")
    assert cache.stale_files() == [] and not os.path.exists(stale_path)
    assert main(["cache", "list"]) == 0
    assert "(stale)" not in capsys.readouterr().out


def test_credentials_in_the_mirror_url_are_never_shown_or_stored(mirror, monkeypatch, capfd):
    user_url = mirror.base_url.replace("http://", "http://alice:s3cret@")
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", user_url)
    elmo_tf.ELMo.from_preset("small")
    assert main(["cache", "list"]) == 0
    printed = "".join(capfd.readouterr())
    assert "downloading" in printed and "alice" not in printed and "s3cret" not in printed
    # the files are named as the published model's, with or without the credentials
    assert sum(line.startswith("small\t") for line in printed.splitlines()) == 2, printed
    assert main(["cache", "remove", f"{user_url}/nothing.json"]) == 0
    assert capfd.readouterr().out == f"not cached: {mirror.base_url}/nothing.json\n"
    for entry in cache.entries():
        record = entry.record_path
        assert "s3cret" not in open(record, encoding="utf-8").read()
        assert os.stat(record).st_mode & 0o077 == 0  # as private as the data file
        assert os.stat(record).st_mode & 0o777 == os.stat(entry.path).st_mode & 0o777
    # the same mirror without the credentials is the same cache entry
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", mirror.base_url)
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    elmo_tf.ELMo.from_preset("small")


def test_offline_without_the_mirror_variable_names_where_the_model_is(mirror, monkeypatch):
    elmo_tf.ELMo.from_preset("small")  # cached under the mirror's URL
    monkeypatch.delenv("ELMO_TF_MODEL_BASE_URL")  # a new shell
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset("small")
    message = str(e.value)
    assert f"the cache holds the same file for {mirror.base_url}" in message
    assert "set ELMO_TF_MODEL_BASE_URL" in message and "\n" not in message


def test_download_and_cache_need_no_tensorflow(mirror, tmp_path):
    """The files are checked as the loader checks them, without a model: elmo-tf download
    (and cache) run where TensorFlow and Keras cannot even be imported."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nfor name in ('tensorflow', 'keras'):\n    sys.modules[name] = None\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), *sys.path]))
    script = os.path.join(os.path.dirname(sys.executable), "elmo-tf")
    for argv in (["download", "small"], ["cache", "list"]):
        done = subprocess.run([script, *argv], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("small\t") >= 2, done.stdout
    assert mirror.requests[WEIGHTS_PATH] == 1


def test_a_downloaded_weight_file_that_does_not_load_is_not_kept(mirror):
    mirror.faults[WEIGHTS_PATH] = "truncated_hdf5"
    with pytest.raises(WeightFileError, match="removed from the cache"):
        elmo_tf.ELMo.from_preset("small")
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []


def test_embed_never_writes_over_the_files_it_reads_from_the_cache(mirror, tmp_path, capsys):
    elmo_tf.ELMo.from_preset("small")  # cached
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    for cached in _cached_files():
        if cached.endswith(".json") and not cached.endswith("options.json"):
            continue  # the records
        before = os.path.getsize(cached)
        assert main(["embed", str(text), cached, "--model", "small"]) == 1
        assert "is an input file; choose another output name" in capsys.readouterr().err
        assert os.path.getsize(cached) == before
    elmo_tf.ELMo.from_preset("small")  # still checks out


def test_a_model_name_that_is_also_a_directory_means_the_model(
    mirror, tmp_path, monkeypatch, capsys, tiny_files
):
    """One rule: a published or bundled name means that model, also where a directory of the
    same name is here; the command says so, and ./NAME is the directory."""
    import shutil
    import warnings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").mkdir()
    shutil.copy(tiny_files[0], tmp_path / "small" / "options.json")
    shutil.copy(tiny_files[1], tmp_path / "small" / "weights.hdf5")
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    assert main(["embed", str(text), "a.hdf5", "--model", "small"]) == 0
    err = capsys.readouterr().err
    assert "--model small is the small model; the directory of the same name here is" in err
    assert "--model ./small" in err and mirror.requests[WEIGHTS_PATH] == 1  # the published
    assert main(["embed", str(text), "b.hdf5", "--model", "./small"]) == 0
    assert "the directory of the same name" not in capsys.readouterr().err
    assert mirror.requests[WEIGHTS_PATH] == 1  # the directory: nothing downloaded
    with pytest.warns(elmo_tf.presets.PresetNameWarning, match="'./small'"):
        assert elmo_tf.ELMo.from_preset("small").config.projection_dim == 128
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert elmo_tf.ELMo.from_preset("./small").config.projection_dim == 16


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
    """It used to parse the URL first: an invalid port or address was a traceback."""
    assert urls.public_url(url) == shown
    assert cache.is_url(url) and (urls.problem(url) is None) == usable
    if not usable:
        with pytest.raises(cache.DownloadError) as e:
            cache.entry_path(url)
        assert "cret" not in str(e.value) and "dEf" not in str(e.value)


def test_offline_and_not_cached_is_said_before_the_work(mirror, monkeypatch, tmp_path, capsys):
    """The command's own checks (before TensorFlow starts) raise the offline error, not the
    load after it (which used to take the seconds of a TensorFlow start)."""
    from elmo_tf import presets

    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError, match="the options file of 'small' is not in the"):
        presets.local_paths("small")
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    assert main(["embed", str(source), str(tmp_path / "o.hdf5"), "--model", "small"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "ELMO_TF_OFFLINE forbids downloading it: run elmo-tf download small" in line
    assert mirror.requests == {} and not (tmp_path / "o.hdf5").exists()
