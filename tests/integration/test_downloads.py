"""Published models one line away: downloaded once, cached, checked at every use, never half.

Every test talks to a loopback server holding the published layout (``model_mirror``), through
``ELMO_TF_MODEL_BASE_URL``, with a cache of its own. The published ``small`` shape (54 MB of
random weights) is downloaded by one test in this process and by those that download in a child
process; the rest download a published row of the tiny model (150 KB), registered for the test.
"""

import errno
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest
from support.fixtures import tiny_published_row

import elmo_tf
from elmo_tf.cli.main import main
from elmo_tf.errors import ElmoError, OptionsError, WeightFileError
from elmo_tf.presets import cache, cache_entries, published, transfer

SMALL = published.MODELS["small"]  # the published shape, for what a child process downloads
ROW = tiny_published_row()  # the rest downloads the tiny model, registered by ``mirror``
NAME = ROW.name
TINY_OPTIONS = f"/{ROW.folder}/{ROW.options_file}"
TINY_WEIGHTS = f"/{ROW.folder}/{ROW.weights_file}"


OPTIONS_PATH = f"/{SMALL.folder}/{SMALL.options_file}"


WEIGHTS_PATH = f"/{SMALL.folder}/{SMALL.weights_file}"


@pytest.fixture
def mirror(model_mirror, monkeypatch, tmp_path):
    """The mirror as ``ELMO_TF_MODEL_BASE_URL``, an empty cache, no faults, counts reset."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", model_mirror.base_url)
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(tmp_path / "cache"))
    model_mirror.faults.clear()
    model_mirror.redirects.clear()
    model_mirror.requests.clear()
    model_mirror.stall_seconds = 3.0
    monkeypatch.setitem(published.MODELS, NAME, ROW)
    yield model_mirror
    model_mirror.faults.clear()
    model_mirror.redirects.clear()


def _cached_files():
    root = cache_entries.files_dir()
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


def test_load_pretrained_takes_urls(mirror, tiny_files):
    options_url, weights_url = ROW.urls(mirror.base_url)
    model = elmo_tf.load_pretrained(options_url, weights_url)
    local = elmo_tf.load_pretrained(*tiny_files)
    np.testing.assert_array_equal(model.get_weights()[-1], local.get_weights()[-1])


@pytest.mark.parametrize("base", published.ALLENNLP_BASE_URLS)
def test_allennlps_urls_of_a_published_model_are_that_model(mirror, monkeypatch, base):
    """AllenNLP code passes the published files' URLs (on either of S3's hosts): they are read
    where the model's name is, through the mirror and the cache, and offline from the cache."""
    options_url, weights_url = ROW.urls(base)
    model = elmo_tf.load_pretrained(options_url, weights_url.replace("https://", "http://"))
    assert mirror.requests == {TINY_OPTIONS: 1, TINY_WEIGHTS: 1}
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    again = elmo_tf.load_pretrained(*ROW.urls(base))
    np.testing.assert_array_equal(again.get_weights()[-1], model.get_weights()[-1])
    assert mirror.requests == {TINY_OPTIONS: 1, TINY_WEIGHTS: 1}


def test_offline_names_the_missing_file_and_the_command(mirror, monkeypatch):
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    assert f"run elmo-tf download {NAME} without ELMO_TF_OFFLINE, where" in str(e.value)
    assert mirror.requests == {}
    # the architecture alone needs no network
    assert elmo_tf.ELMo.from_preset(NAME, load_weights=False).config.lstm_dim == ROW.config.lstm_dim


def test_offline_loads_a_cached_model_without_a_request(mirror, monkeypatch, tiny_files):
    elmo_tf.ELMo.from_preset(NAME)  # fills the cache
    mirror.requests.clear()
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    # the mirror broken too: whatever asks the network would fail or be counted
    mirror.faults.update({TINY_OPTIONS: "500", TINY_WEIGHTS: "500"})
    model = elmo_tf.ELMo.from_preset(NAME)
    assert mirror.requests == {}
    local = elmo_tf.load_pretrained(*tiny_files)
    for a, b in zip(model.get_weights(), local.get_weights()):
        np.testing.assert_array_equal(a, b)
    urls = ROW.urls(mirror.base_url)
    assert (
        elmo_tf.load_pretrained(*urls).config.lstm_dim == ROW.config.lstm_dim
    )  # the URLs, offline
    assert mirror.requests == {}


@pytest.mark.parametrize(
    "path, fault, error, fragment",
    [
        (TINY_OPTIONS, "404", cache.DownloadError, "HTTP 404"),
        (TINY_WEIGHTS, "500", cache.DownloadError, "HTTP 500"),
        (TINY_WEIGHTS, "halfway", cache.DownloadError, "the connection closed after"),
        (TINY_WEIGHTS, "declare_less", WeightFileError, "weights.hdf5"),
        (TINY_WEIGHTS, "declare_huge", cache.DownloadError, "declares 1,000,000,000,000 bytes"),
        (TINY_WEIGHTS, "garbage", WeightFileError, "not a readable HDF5 weight file"),
        (TINY_OPTIONS, "garbage", OptionsError, "; not kept)"),
    ],
)
def test_a_broken_download_is_one_line_and_leaves_nothing(mirror, path, fault, error, fragment):
    mirror.faults[path] = fault
    with pytest.raises(error) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    assert fragment in message and "\n" not in message and isinstance(e.value, ElmoError)
    leftovers = [p for p in _cached_files() if path.rsplit("/", 1)[1] in os.path.basename(p)]
    assert leftovers == []
    # the fault gone, the same call works
    mirror.faults.clear()
    assert elmo_tf.ELMo.from_preset(NAME).config.projection_dim == ROW.config.projection_dim


def test_transient_failures_are_retried(mirror):
    mirror.faults[TINY_WEIGHTS] = "halfway_once"  # the first transfer of the weights breaks
    elmo_tf.ELMo.from_preset(NAME)
    assert mirror.requests[TINY_WEIGHTS] == 2


def test_errors_that_cannot_heal_are_not_retried(mirror, monkeypatch, capfd):
    mirror.faults[TINY_WEIGHTS] = "404"
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    assert mirror.requests[TINY_WEIGHTS] == 1
    assert "HTTP 404" in str(e.value) and "docs/models.md" in str(e.value)
    # a host name that does not resolve: tried once, one line with the cause and what to do
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://nosuchhost.invalid/elmo")
    capfd.readouterr()
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    assert "trying again" not in capfd.readouterr().err and "\n" not in message
    assert message.startswith(f"http://nosuchhost.invalid/elmo/{ROW.folder}/")
    assert "the host name does not resolve" in message
    # the options file came before the 404: what to do is to use that address again
    assert f"the cache holds the same file for {mirror.base_url}" in message


def test_a_server_that_compresses_although_asked_not_to(mirror, tiny_files):
    """A gzipped body of its declared length is whole: it is decoded, and its decoded bytes
    count against the file's bound (test_a_compressed_body_is_bounded_as_it_is_written)."""
    mirror.faults[TINY_OPTIONS] = "gzip_anyway"
    model = elmo_tf.ELMo.from_preset(NAME)
    assert model.config == elmo_tf.load_pretrained(*tiny_files).config


def test_a_slow_server_times_out(mirror, monkeypatch):
    monkeypatch.setattr(transfer, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(transfer, "RETRIES", 0)
    mirror.stall_seconds = 2.0
    mirror.faults[TINY_OPTIONS] = "stall"
    with pytest.raises(cache.DownloadError, match=r"no data, or less than 64 KiB, for 0.5 s"):
        elmo_tf.ELMo.from_preset(NAME)


def test_a_server_that_drips_bytes_times_out(mirror, monkeypatch):
    """A byte every 0.1 s is never idle for the read timeout, but brings less than 64 KiB in
    it: cut off after about the timeout, nothing kept."""
    monkeypatch.setattr(transfer, "READ_TIMEOUT", 1.0)
    monkeypatch.setattr(transfer, "RETRIES", 0)
    mirror.stall_seconds = 20.0
    mirror.faults[TINY_OPTIONS] = "drip"
    start = time.monotonic()
    with pytest.raises(cache.DownloadError, match=r"less than 64 KiB, for 1.0 s"):
        elmo_tf.ELMo.from_preset(NAME)
    assert time.monotonic() - start < 10
    assert cache_entries.entries() == [] and cache_entries.stale_files() == []


def test_no_network(mirror, monkeypatch):
    """The cause whole, in one line (not cut where the reason is: "Failed to establish a new
    connection: [Errno 1")."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/nothing")
    monkeypatch.setattr(transfer, "RETRIES", 0)
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    assert "the connection was refused ([Errno 111] Connection refused)" in message, message
    assert "\n" not in message and "HTTPConnection" not in message
    assert "check the address and the network" in message
    assert "ELMO_TF_OFFLINE" not in message  # nothing is cached: offline cannot help


def test_a_retry_is_said(mirror, monkeypatch, capfd):
    """A failure that may heal is tried again, and each new try is said on stderr."""
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/nothing")
    monkeypatch.setattr(transfer, "RETRIES", 1)
    with pytest.raises(cache.DownloadError, match="the connection was refused"):
        elmo_tf.ELMo.from_preset(NAME)
    err = capfd.readouterr().err
    assert (
        "the connection was refused ([Errno 111] Connection refused); trying again (1 of 1)" in err
    )
    assert err.count("trying again") == 1


def test_a_failed_download_names_the_copy_cached_under_another_address(mirror, monkeypatch):
    """A new shell, another (here unreachable) base URL: the failure says where the model is
    cached and which variable to set, at the first try."""
    elmo_tf.ELMo.from_preset(NAME)  # cached under the mirror's URL
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", "http://127.0.0.1:9/elsewhere")
    monkeypatch.setattr(transfer, "RETRIES", 0)
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    assert "the connection was refused" in message
    assert f"the cache holds the same file for {mirror.base_url}" in message
    assert "set ELMO_TF_MODEL_BASE_URL as it was set" in message and "\n" not in message


def test_a_cache_directory_that_cannot_be_made(mirror, monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(cache.CacheError, match="cannot create the model cache directory"):
        elmo_tf.ELMo.from_preset(NAME)


def test_a_tampered_cache_file_is_refused(mirror):
    elmo_tf.ELMo.from_preset(NAME)
    (weights,) = [p for p in _cached_files() if p.endswith(".hdf5")]
    with open(weights, "r+b") as f:
        f.seek(os.path.getsize(weights) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(cache.CacheError, match="changed since it was downloaded"):
        elmo_tf.ELMo.from_preset(NAME)
    assert main(["cache", "remove", NAME]) == 0
    elmo_tf.ELMo.from_preset(NAME)  # downloaded again, good
    assert mirror.requests[TINY_WEIGHTS] == 2


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
    assert main(["download", NAME]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{NAME}\t") == 2 and f"{os.path.getsize(_cached_files()[0]):,}" in out
    assert main(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert "(4 files)" in listing or "(2 files)" in listing
    assert listing.count(f"{NAME}\t") == 2
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--model", NAME]) == 0
    assert mirror.requests[TINY_WEIGHTS] == 1  # from the cache
    assert main(["cache", "remove", NAME]) == 0
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []
    assert main(["download", "huge"]) == 1
    assert "unknown model 'huge'; published models: full, medium" in capsys.readouterr().err


def test_the_beam_handler_loads_published_names_and_urls_through_the_cache(mirror):
    pytest.importorskip("apache_beam")
    from elmo_tf.beam import ElmoModelHandler

    by_name = ElmoModelHandler(NAME).load_model()
    options_url, weights_url = ROW.urls(mirror.base_url)
    by_url = ElmoModelHandler(options_file=options_url, weight_file=weights_url).load_model()
    np.testing.assert_array_equal(by_name.get_weights()[0], by_url.get_weights()[0])
    assert mirror.requests == {TINY_OPTIONS: 1, TINY_WEIGHTS: 1}  # one download, then the cache


def test_a_server_that_compresses_on_the_fly_is_asked_for_the_bytes_as_stored(mirror, tiny_files):
    # A mirror behind a web server's gzip declares the encoded length; the files are asked for
    # as stored (Accept-Encoding: identity), so a correct download is never refused.
    mirror.faults[TINY_WEIGHTS] = mirror.faults[TINY_OPTIONS] = "gzip"
    model = elmo_tf.ELMo.from_preset(NAME)
    assert model.config.projection_dim == ROW.config.projection_dim


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
    elmo_tf.ELMo.from_preset(NAME)
    assert len(cache_entries.entries()) == 2
    # a user's files inside an entry's directory are not the cache's either
    entry = pathlib.Path(cache_entries.entries()[0].path).parent
    (entry / "precious.txt").write_text("mine", encoding="utf-8")
    (entry / "mydir").mkdir()
    (entry / "mydir" / "p2").write_text("mine", encoding="utf-8")
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 cache entry" in out, out
    assert f"kept {entry}: it holds files the cache did not make" in out
    assert cache_entries.entries() == [] and sorted(os.listdir(entry)) == ["mydir", "precious.txt"]
    assert (entry / "mydir" / "p2").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in home.iterdir()) == ["files", "notes", "report.hdf5"]
    assert (home / "notes" / "todo.txt").read_text(encoding="utf-8") == "mine"
    assert sorted(os.listdir(home / "files")) == [entry.name, "my-own-file"]
    # so does cache remove
    elmo_tf.ELMo.from_preset(NAME)
    assert main(["cache", "remove", NAME]) == 0
    assert f"kept {entry}: it holds files the cache did not make" in capsys.readouterr().out
    assert cache_entries.entries() == [] and sorted(os.listdir(entry)) == ["mydir", "precious.txt"]
    # and a cache directory that is a regular file: named, nothing removed
    monkeypatch.setenv("ELMO_TF_CACHE_DIR", str(home / "report.hdf5"))
    for action in ("clear", "list"):
        assert main(["cache", action]) == 1
        assert "report.hdf5 is not a directory" in capsys.readouterr().err
    assert (home / "report.hdf5").read_bytes() == b"mine too"


def test_a_download_killed_before_its_file_is_in_place_is_counted_and_removed(mirror, capsys):
    """Killed after the record was written, before the body was renamed onto the file's name:
    the partial body and the record without its file are stale (counted, removed by the next
    fetch); a file of the user's beside them stays."""
    elmo_tf.ELMo.from_preset(NAME)
    entry = pathlib.Path(cache_entries.entries()[0].path)
    directory = entry.parent
    (directory / cache_entries.PARTIAL_NAME).mkdir()
    os.replace(entry, directory / cache_entries.PARTIAL_NAME / entry.name)
    (directory / "notes.hdf5").write_bytes(b"the user's")
    stale = {os.path.relpath(p, directory) for p, _ in cache_entries.stale_files()}
    assert stale == {f"{cache_entries.PARTIAL_NAME}/{entry.name}", entry.name + ".json"}
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out.count("(stale)") == 2
    mirror.requests.clear()
    elmo_tf.ELMo.from_preset(NAME)  # the entry's next fetch: downloaded again
    assert sum(mirror.requests.values()) == 1 and cache_entries.stale_files() == []
    assert main(["cache", "clear"]) == 0
    assert f"kept {directory}" in capsys.readouterr().out
    assert os.listdir(directory) == ["notes.hdf5"]


def test_a_killed_download_leaves_nothing_for_good(mirror, monkeypatch, capsys):
    """A download killed with SIGKILL leaves its partial body: cache list counts it, and the
    next fetch of the entry removes it."""
    mirror.faults[WEIGHTS_PATH] = "drip"
    mirror.stall_seconds = 60.0
    script = "import elmo_tf; elmo_tf.ELMo.from_preset('small')"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.DEVNULL)
    directory = os.path.dirname(cache_entries.entry_path(SMALL.urls(mirror.base_url)[1]))
    partial = os.path.join(directory, cache_entries.PARTIAL_NAME, SMALL.weights_file)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(partial):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    assert cache_entries.stale_files() == [(partial, os.path.getsize(partial))]
    assert main(["cache", "list"]) == 0
    assert "(stale)" in capsys.readouterr().out
    mirror.faults.clear()
    elmo_tf.ELMo.from_preset("small")
    assert cache_entries.stale_files() == [] and not os.path.exists(partial)
    assert main(["cache", "list"]) == 0
    assert "(stale)" not in capsys.readouterr().out


def test_credentials_in_the_mirror_url_are_never_shown_or_stored(mirror, monkeypatch, capfd):
    user_url = mirror.base_url.replace("http://", "http://alice:s3cret@")
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", user_url)
    elmo_tf.ELMo.from_preset(NAME)
    assert main(["cache", "list"]) == 0
    printed = "".join(capfd.readouterr())
    assert "downloading" in printed and "alice" not in printed and "s3cret" not in printed
    # the files are named as the published model's, with or without the credentials
    assert sum(line.startswith(f"{NAME}\t") for line in printed.splitlines()) == 2, printed
    assert main(["cache", "remove", f"{user_url}/nothing.json"]) == 0
    assert capfd.readouterr().out == f"not cached: {mirror.base_url}/nothing.json\n"
    for entry in cache_entries.entries():
        record = entry.path + cache_entries.RECORD_SUFFIX
        assert "s3cret" not in open(record, encoding="utf-8").read()
        assert os.stat(record).st_mode & 0o077 == 0  # as private as the data file
        assert os.stat(record).st_mode & 0o777 == os.stat(entry.path).st_mode & 0o777
    # the same mirror without the credentials is the same cache entry
    monkeypatch.setenv("ELMO_TF_MODEL_BASE_URL", mirror.base_url)
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    elmo_tf.ELMo.from_preset(NAME)


def test_offline_without_the_mirror_variable_names_where_the_model_is(mirror, monkeypatch):
    elmo_tf.ELMo.from_preset(NAME)  # cached under the mirror's URL
    monkeypatch.delenv("ELMO_TF_MODEL_BASE_URL")  # a new shell
    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
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
    mirror.faults[TINY_WEIGHTS] = "truncated_hdf5"
    with pytest.raises(WeightFileError, match="; not kept\\)"):
        elmo_tf.ELMo.from_preset(NAME)
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []


def test_embed_never_writes_over_the_files_it_reads_from_the_cache(mirror, tmp_path, capsys):
    elmo_tf.ELMo.from_preset(NAME)  # cached
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    for cached in _cached_files():
        if cached.endswith(".json") and not cached.endswith("options.json"):
            continue  # the records
        before = os.path.getsize(cached)
        assert main(["embed", str(text), cached, "--model", NAME]) == 1
        assert "is an input file; choose another output name" in capsys.readouterr().err
        assert os.path.getsize(cached) == before
    elmo_tf.ELMo.from_preset(NAME)  # still checks out


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


def test_offline_and_not_cached_is_said_before_the_work(mirror, monkeypatch, tmp_path, capsys):
    """The command's own checks (before TensorFlow starts) raise the offline error, not the
    load after it (after the seconds of a TensorFlow start)."""
    from elmo_tf import presets

    monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
    with pytest.raises(cache.DownloadError, match="the options file of 'tiny' is not in the"):
        presets.local_paths(NAME)
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    assert main(["embed", str(source), str(tmp_path / "o.hdf5"), "--model", NAME]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert f"ELMO_TF_OFFLINE forbids downloading it: run elmo-tf download {NAME}" in line
    assert mirror.requests == {} and not (tmp_path / "o.hdf5").exists()


def _fetch(mirror, path, max_bytes):
    """``cache.fetch`` of one mirror path with a bound of its own."""
    return cache.fetch(f"{mirror.base_url}{path}", "the test file", max_bytes)


@pytest.mark.parametrize("fault", [None, "undeclared", "gzip_anyway"])
def test_each_bound_holds_at_its_edge(mirror, monkeypatch, fault):
    """A body of exactly its bound is kept, one byte more is refused, nothing of it kept:
    declared (refused before the body), undeclared (refused as it is written) and compressed
    against our Accept-Encoding: identity (counted decoded, as written)."""
    body = bytes(range(256)) * 40  # 10,240 bytes; gzip makes them fewer on the wire
    for path in ("/edge/exact.bin", "/edge/over.bin"):
        monkeypatch.setitem(mirror.files, path, body)
        mirror.faults[path] = fault
    with open(_fetch(mirror, "/edge/exact.bin", len(body)), "rb") as f:
        assert f.read() == body
    with pytest.raises(cache.DownloadError) as e:
        _fetch(mirror, "/edge/over.bin", len(body) - 1)
    expected = "declares 10,240 bytes, more than the 10,239" if fault is None else (
        "the test file is larger than the 10,239 bytes it can hold"
    )  # fmt: skip
    assert expected in str(e.value) and mirror.requests["/edge/over.bin"] == 1
    assert [p for p in _cached_files() if "over.bin" in p] == []


def test_a_compressed_body_is_bounded_as_it_is_written(mirror):
    """A gzip bomb (64 KiB on the wire, 64 MiB decoded) for the options file: cut at its bound
    (1 MiB) as it is decoded, not retried, nothing kept."""
    mirror.faults[TINY_OPTIONS] = "gzip_bomb"
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    assert "the options file of 'tiny' is larger than the 1,048,576 bytes" in str(e.value)
    assert mirror.requests[TINY_OPTIONS] == 1 and _cached_files() == []


def test_no_download_writes_past_its_bound(mirror, tmp_path):
    """The gzip bomb again, in a process that cannot write a file past the options' bound
    (RLIMIT_FSIZE): a write past it would end in "File too large", not in the bound's error."""
    script = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        "from elmo_tf.presets import preset_files\n"
        "preset_files('small')\n"
    )
    mirror.faults[OPTIONS_PATH] = "gzip_bomb"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert "is larger than the 1,048,576 bytes it can hold" in done.stderr, done.stderr[-2000:]
    assert "File too large" not in done.stderr and _cached_files() == []


@pytest.mark.parametrize("value", ["-1", "0x10", " 12 abc", "9" * 5000])
def test_a_size_that_is_no_size_is_refused_at_once(mirror, value):
    """A negative or unreadable Content-Length is refused on the headers, without waiting
    for the server to close (here it holds the connection for 30 s), and not retried."""
    mirror.stall_seconds = 30.0
    mirror.bad_length = value
    mirror.faults[TINY_OPTIONS] = "bad_length"
    start = time.monotonic()
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    expected = "a 5000-digit number of bytes" if len(value) > 20 else "an invalid size"
    assert expected in message and "nothing was written" in message and len(message) < 400
    assert time.monotonic() - start < 10 and mirror.requests[TINY_OPTIONS] == 1
    assert _cached_files() == []


@pytest.mark.parametrize("fault", ["204", "304", "302", "300", "206"])
def test_an_answer_that_is_not_the_file_is_refused(mirror, fault):
    """204, 304, a 3xx without a Location, a 206 nobody asked for: no file, one line, not
    retried, nothing cached."""
    mirror.faults[TINY_WEIGHTS] = fault
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    assert f"the server answers HTTP {fault} " in str(e.value) and "not the file" in str(e.value)
    assert mirror.requests[TINY_WEIGHTS] == 1
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []


@pytest.mark.parametrize(
    "location, fragment",
    [
        ("file:///elmo/weights.hdf5", "not a usable URL (not an http:// or https:// URL)"),
        ("ftp://127.0.0.1/weights.hdf5", "not a usable URL (not an http:// or https:// URL)"),
        ("http://[::1/weights.hdf5", "not a usable URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:99999/w.hdf5", "not a usable URL (Port out of range 0-65535)"),
        ("http://alice:se#cret@127.0.0.1/w", "not a usable URL (an '@' past the host"),
        (TINY_WEIGHTS, "redirects in a loop (back to http://127.0.0.1:"),
        ("/hop/1", "redirects in a loop"),  # /hop/1 -> /hop/2 -> the weights -> /hop/1
    ],
)
def test_a_redirect_is_checked_as_our_urls_are(mirror, location, fragment):
    """Every URL a server hands us is checked as ours are: a redirect elsewhere than
    http(s)://, to an invalid URL, in a loop or past 10 hops is one line, not retried."""
    mirror.redirects[TINY_WEIGHTS] = location
    mirror.redirects.update({"/hop/1": "/hop/2", "/hop/2": TINY_WEIGHTS})
    with pytest.raises(cache.DownloadError) as e:
        elmo_tf.ELMo.from_preset(NAME)
    message = str(e.value)
    assert fragment in message and "\n" not in message and "cret" not in message, message
    assert message.startswith(f"{mirror.base_url}{TINY_WEIGHTS}: cannot download the weight")
    assert mirror.requests[TINY_WEIGHTS] == 1  # a loop is seen before it is followed
    assert [p for p in _cached_files() if p.endswith(".hdf5")] == []


@pytest.mark.parametrize("hops", [10, 11])
def test_redirects_to_usable_urls_are_followed_ten_times(mirror, monkeypatch, hops):
    """At the bound's edge: 10 redirects are followed (the file cached under the address
    asked for), the 11th is refused."""
    monkeypatch.setitem(mirror.files, "/moved/weights.hdf5", mirror.files[TINY_WEIGHTS])
    chain = [TINY_WEIGHTS] + [f"/hop/{i}" for i in range(1, hops)] + ["/moved/weights.hdf5"]
    mirror.redirects.update(zip(chain[:-1], chain[1:]))
    if hops > 10:
        with pytest.raises(cache.DownloadError, match="more than 10 redirects; nothing was"):
            elmo_tf.ELMo.from_preset(NAME)
        assert mirror.requests["/moved/weights.hdf5"] == 0
        return
    assert elmo_tf.ELMo.from_preset(NAME).config.projection_dim == ROW.config.projection_dim
    assert mirror.requests["/moved/weights.hdf5"] == 1
    assert cache_entries.read_entry(cache_entries.entry_path(ROW.urls()[1])) is not None


@pytest.mark.parametrize("kind", ["directory", "fifo", "full directory"])
def test_a_cached_file_replaced_by_no_file(mirror, capsys, kind):
    """A directory or a named pipe where a cached file was: refused at once (never opened),
    listed without a size, and removed by cache remove (a directory only when empty: one
    holding files is the user's and is kept, said)."""
    from support.special_files import special_file

    elmo_tf.ELMo.from_preset(NAME)
    (weights,) = [p for p in _cached_files() if p.endswith(".hdf5")]
    os.remove(weights)
    if kind == "fifo":
        special_file(weights, "fifo")
    else:
        os.mkdir(weights)
        if kind == "full directory":
            pathlib.Path(weights, "mine.txt").write_text("mine", encoding="utf-8")
    shown = "is a named pipe" if kind == "fifo" else "is a directory"
    with pytest.raises(cache.CacheError, match=f"the cached copy of .* {shown}; it is not"):
        elmo_tf.ELMo.from_preset(NAME)
    assert main(["cache", "list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if weights in x]
    assert line.startswith(f"{NAME}\t-\t") and f"{shown}, not the cached file" in line
    assert main(["cache", "remove", NAME]) == 0
    out = capsys.readouterr().out
    assert os.path.lexists(weights) == (kind == "full directory")
    assert ("kept " in out) == (kind == "full directory")
    if kind != "full directory":
        assert elmo_tf.ELMo.from_preset(NAME).config.projection_dim == ROW.config.projection_dim


def test_cache_remove_answers_as_download_does(mirror, capsys):
    """A misspelt name gets "did you mean", the bundled model its own answer, an unusable URL
    its reason; every target is checked before anything is removed."""
    main(["download", NAME])
    capsys.readouterr()
    for targets, fragment in [
        (["smal"], "unknown model 'smal'; published models: full,"),
        (["smal"], "small, tiny, or an http(s):// URL; did you mean 'small'?"),
        (["sotu"], "'sotu' is bundled with the package: nothing to remove (use it as --model"),
        ([NAME, "http://[::1"], "http://[::1: not a usable URL (Invalid IPv6 URL)"),
    ]:
        assert main(["cache", "remove", *targets]) == 1
        out, err = capsys.readouterr()
        assert out == "" and fragment in err and len(err.splitlines()) == 1, err
    assert len(cache_entries.entries()) == 2  # nothing removed


def _read_only(monkeypatch):
    """The cache as a read-only mount answers: EROFS for the lock and every removal."""
    import filelock

    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(filelock.FileLock, "acquire", refused)
    for name in ("unlink", "rmdir"):
        monkeypatch.setattr(os, name, refused)


@pytest.mark.parametrize("offline", ["", "1"])
def test_a_read_only_cache_is_read_without_a_lock(mirror, monkeypatch, capsys, offline):
    """A complete cache that cannot be written (a read-only mount: EROFS at the lock) loads,
    downloads nothing, and says in one line what it cannot do."""
    elmo_tf.ELMo.from_preset(NAME)
    mirror.requests.clear()
    monkeypatch.setenv("ELMO_TF_OFFLINE", offline)
    _read_only(monkeypatch)
    assert elmo_tf.ELMo.from_preset(NAME).config.projection_dim == ROW.config.projection_dim
    assert main(["download", NAME]) == 0 and capsys.readouterr().out.count(f"{NAME}\t") == 2
    for action in (["remove", NAME], ["clear"]):
        assert main(["cache", *action]) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert f"the model cache {cache_entries.cache_dir()} is read-only (Read-only file" in line
    assert len(cache_entries.entries()) == 2 and mirror.requests == {}
    with pytest.raises(ElmoError) as e:  # a file not cached
        cache.fetch(f"{mirror.base_url}/nothing.json")
    expected = "forbids downloading it" if offline else "is read-only (Read-only file system)"
    assert expected in str(e.value) and mirror.requests == {}


def test_a_cache_on_a_read_only_mount(mirror, tmp_path):
    """The cache bind-mounted read-only (in a user and mount namespace of its own: no change
    to this machine's mounts): embed, download and cache remove, as a user runs them."""
    elmo_tf.ELMo.from_preset("small")
    root = cache_entries.cache_dir()
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.decode()[-200:]}")
    text = tmp_path / "in.txt"
    text.write_text("The bank closed .\n", encoding="utf-8")
    script = (
        "from elmo_tf.cli.main import main\n"
        f"print(main(['embed', {str(text)!r}, {str(tmp_path / 'o.hdf5')!r}, '--model', 'small']))\n"
        "print(main(['download', 'small']))\n"
        "print(main(['cache', 'remove', 'small']))\n"
    )
    mount = f"mount --bind {root} {root} && mount -o remount,ro,bind {root}"
    command = f'{mount} && touch {root}/x 2>/dev/null; exec {sys.executable} -c "$0"'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command, script],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    statuses = [line for line in done.stdout.splitlines() if line.isdigit()]
    assert statuses == ["0", "0", "1"], done.stdout + done.stderr[-3000:]
    assert done.stdout.count("small\t") == 2 and (tmp_path / "o.hdf5").exists()
    assert f"error: cannot remove {root}/files/" in done.stderr
    assert "is read-only (Read-only file system)" in done.stderr
    assert not os.path.exists(f"{root}/x") and len(cache_entries.entries()) == 2


def test_an_options_file_of_another_architecture_is_not_kept(mirror, monkeypatch):
    """Checked before it is recorded: refused, nothing cached, the weights never asked for."""
    monkeypatch.setitem(mirror.files, TINY_OPTIONS, mirror.files[OPTIONS_PATH])  # small's
    with pytest.raises(OptionsError, match=r"not the 'tiny' architecture .*; not kept\)$"):
        elmo_tf.ELMo.from_preset(NAME)
    assert _cached_files() == [] and mirror.requests[TINY_WEIGHTS] == 0


class _Watchdog:
    """Opens ``fifo`` for writing every ``seconds`` while a reader waits on it, so a
    regression that opens the pipe fails the test instead of hanging it; ``fired`` says so."""

    def __init__(self, fifo, seconds=5.0):
        import threading

        self.fifo, self.seconds, self.fired = fifo, seconds, False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.done.wait(self.seconds):
            try:
                descriptor = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader (or no pipe): nothing waits on it
                continue
            self.fired = True
            os.close(descriptor)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.fired


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_cache_record_replaced_by_no_file(mirror, capsys, monkeypatch, kind):
    """A named pipe or a directory where a cached file's record was: never opened (download,
    cache list and cache remove waited for a writer forever, offline too), listed as broken,
    replaced by the next download and removed by cache remove."""
    from support.special_files import special_file

    elmo_tf.ELMo.from_preset(NAME)
    (weights,) = [p for p in _cached_files() if p.endswith(".hdf5")]
    record = weights + cache_entries.RECORD_SUFFIX
    os.remove(record)
    special_file(record, "fifo") if kind == "fifo" else os.mkdir(record)
    watchdog = _Watchdog(record)
    try:
        monkeypatch.setenv("ELMO_TF_OFFLINE", "1")
        assert main(["cache", "list"]) == 0
        listing = capsys.readouterr().out
        shown = "is a named pipe" if kind == "fifo" else "is a directory"
        assert f"(broken)\t-\t{record}\t{shown}, not a record" in listing
        assert main(["download", NAME]) == 1  # offline: the record cannot vouch for the file
        assert "ELMO_TF_OFFLINE" in capsys.readouterr().err
        monkeypatch.delenv("ELMO_TF_OFFLINE")
        assert main(["download", NAME]) == 0  # downloaded again, the record written anew
        capsys.readouterr()
        assert cache_entries.read_entry(weights) is not None and os.path.isfile(record)
        special_file(record + ".x", "fifo")  # (the watchdog's pipe is gone with the record)
        os.replace(record + ".x", record)
        assert main(["cache", "remove", NAME]) == 0
        assert not os.path.lexists(record) and not os.path.lexists(weights)
    finally:
        assert not watchdog.stop(), "a command opened the record's pipe and waited on it"
