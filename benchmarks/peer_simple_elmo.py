#!/usr/bin/env python3
"""Peer benchmark: ELMo inference throughput of `simple-elmo` (the bilm-tf TF1 graph).

Run it with the peer venv's python (see setup_peer_venv.sh), e.g.

  $PEER_VENV/bin/python benchmarks/peer_simple_elmo.py \
      --options /tmp/elmo_weights/small/options.json \
      --weights /tmp/elmo_weights/small/weights.hdf5 \
      --sentences /tmp/sents200.txt --batch-size 32,64 \
      --warmup-sentences 64 --json /tmp/peer_small.json

What is measured (per batch size, each in a fresh child process so that peak
RSS and the stateful-LSTM variables belong to that batch size alone):

  * load: ElmoModel().load(dir, max_batch_size=B), where dir is a temporary
    directory holding symlinks options.json -> --options and model.hdf5 ->
    --weights, with no vocab.txt (simple-elmo then uses a 3-token dummy vocab
    and computes every token from its characters). simple-elmo's batch size is
    fixed at load time (it is both the chunk size of get_elmo_vectors and the
    size of bilm-tf's stateful LSTM state variables), hence one load per B.
  * session setup (--mode session, default): exactly what get_elmo_vectors
    does when it makes its own session - weight_layers("input", ...,
    use_layers="all") and global_variables_initializer - but in a session we
    keep, so that the timed call does not pay session creation / variable
    initialisation (which copies all weights again). RSS is read after this.
  * warm-up: get_elmo_vectors(first K sentences, warmup=False, layers="all",
    session=sess).
  * timed: get_elmo_vectors(all sentences, warmup=False, layers="all",
    session=sess), repeated --repeats times; the best and all times are kept.
    layers="all" returns the full per-token output, float64 array of shape
    (n_sentences, n_lstm_layers + 1, max_len, 2 * projection_dim), i.e. all
    three ELMo layers for every token. Sentences are processed in file order
    in chunks of B (simple-elmo does no length sorting; each chunk is padded
    to its longest sentence); the timing includes simple-elmo's per-chunk
    Python char-id conversion and the copy into the output array, because a
    user of get_elmo_vectors pays both.
  * --mode fresh instead times model.get_elmo_vectors(sentences,
    layers="all") exactly as simple-elmo's README calls it (new session,
    variable init and simple-elmo's own first-chunk warm-up inside the timing).

tokens/s counts real tokens (the whitespace-separated words of the input, not
<S>/</S> nor padding). Peak RSS is resource.getrusage(RUSAGE_SELF).ru_maxrss
of the child (KiB on Linux), reported in MiB, at three points.

Progress goes to stderr; the JSON summary goes to --json (and stdout).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from timing import peak_rss_mib, read_sentences, rss_now_mib, seconds, timed


def log(msg):
    print(f"[peer_simple_elmo {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_batch_sizes(values):
    out = []
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if part:
                b = int(part)
                if b <= 0:
                    sys.exit(f"bad batch size {b}")
                out.append(b)
    return out


# --------------------------------------------------------------------------- child
def run_child(args):
    """One batch size, in this process. Returns a result dict."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before tensorflow is imported
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    B = args.batch_size_child
    sents = read_sentences(args.sentences, args.max_sentences)
    n_tokens = sum(len(s) for s in sents)
    warm = sents[: max(0, args.warmup_sentences)]
    if args.sort_by_length:
        sents = sorted(sents, key=len)  # stable; same token multiset

    t_import = time.perf_counter()
    import logging

    import numpy as np
    import simple_elmo
    import tensorflow as tf
    from simple_elmo import ElmoModel
    from simple_elmo.elmo import weight_layers

    import_s = time.perf_counter() - t_import
    rss_after_import = rss_now_mib()

    with tempfile.TemporaryDirectory(prefix="peer_elmo_") as d:
        os.symlink(os.path.abspath(args.options), os.path.join(d, "options.json"))
        os.symlink(os.path.abspath(args.weights), os.path.join(d, "model.hdf5"))

        model = ElmoModel()  # disables eager execution, sets up logging at INFO
        quiet = logging.WARNING if not args.verbose else logging.INFO
        logging.getLogger().setLevel(quiet)
        logging.getLogger("simple_elmo").setLevel(quiet)
        model.logger.setLevel(quiet)

        log(f"B={B}: loading model (max_batch_size={B})")
        t0 = time.perf_counter()
        model.load(d, max_batch_size=B)
        sess = None
        if args.mode in ("session", "strict"):
            cfg = tf.compat.v1.ConfigProto()
            if args.intra_op_threads:
                cfg.intra_op_parallelism_threads = args.intra_op_threads
            if args.inter_op_threads:
                cfg.inter_op_parallelism_threads = args.inter_op_threads
            sess = tf.compat.v1.Session(config=cfg)
            # Same as get_elmo_vectors(..., session=None) does before its loop:
            model.elmo_sentence_input = weight_layers(
                "input", model.sentence_embeddings_op, use_layers="all"
            )
            sess.run(tf.compat.v1.global_variables_initializer())
        load_s = time.perf_counter() - t0
    # (the symlinks may go: h5py has already read the weights into the graph)

    rss_after_load = rss_now_mib()
    peak_after_load = peak_rss_mib()
    log(
        f"B={B}: loaded in {load_s:.2f}s, RSS {rss_after_load:.0f} MiB "
        f"(peak {peak_after_load:.0f} MiB)"
    )

    # Progress per chunk: wrap the batcher (negligible cost, one call per chunk).
    state = {"chunks": 0, "phase": "", "total": 0}
    orig_batch = model.batcher.batch_sentences

    def batch_with_progress(chunk):
        state["chunks"] += 1
        if args.progress_every and state["chunks"] % args.progress_every == 0:
            log(f"B={B}: {state['phase']} chunk {state['chunks']}/{state['total']}")
        return orig_batch(chunk)

    model.batcher.batch_sentences = batch_with_progress

    def strict(texts):
        """simple-elmo's fastest honest use: its own graph op run batch by batch in file
        order, each batch's [B, L + 1, T, 2P] float32 output consumed (summed) as it comes,
        without get_elmo_vectors' corpus-wide padded float64 array."""
        checksum = 0.0
        for start in range(0, len(texts), B):
            chunk = texts[start : start + B]
            ids = model.batcher.batch_sentences(chunk)
            out = sess.run(
                model.elmo_sentence_input["weighted_op"],
                feed_dict={model.sentence_character_ids: ids},
            )
            checksum += float(np.sum(out))
        return checksum

    def call(texts, phase):
        state.update(chunks=0, phase=phase, total=-(-len(texts) // B))
        if args.mode == "strict":
            return strict(texts)
        if args.mode == "session":
            return model.get_elmo_vectors(texts, warmup=False, layers="all", session=sess)
        return model.get_elmo_vectors(texts, layers="all")

    warmup_s = None
    if warm:
        log(f"B={B}: warm-up on {len(warm)} sentences")
        warmup_s = seconds(lambda: call(warm, "warm-up"))

    last = {"out": None, "run": 0}

    def timed_run():
        last["out"] = None  # free the previous output before the next call
        last["run"] += 1
        log(f"B={B}: timed run {last['run']}/{args.repeats} on {len(sents)} sentences")
        last["out"] = call(sents, f"timed#{last['run']}")

    def report(i, elapsed):
        log(f"B={B}: {elapsed:.3f}s -> {n_tokens / elapsed:.1f} tokens/s")

    times = timed(timed_run, args.repeats, warmups=0, report=report).seconds
    out = last["out"]

    if args.mode == "strict":  # out is the checksum of every batch's output
        ok = bool(np.isfinite(out)) and out != 0.0
        out = np.zeros([0])
    else:
        max_len = max(len(s) for s in sents)
        with open(args.options) as fh:
            opts = json.load(fh)
        n_layers = opts["lstm"]["n_layers"] + 1
        dim = 2 * opts["lstm"]["projection_dim"]
        expected = (len(sents), n_layers, max_len, dim)
        if tuple(out.shape) != expected:
            raise RuntimeError(f"unexpected output shape {out.shape}, expected {expected}")
        # sanity: finite, and non-zero at real tokens of the last sentence, all layers
        last = out[-1, :, : len(sents[-1]), :]
        ok = bool(np.isfinite(out).all()) and bool((np.abs(last).sum(axis=-1) > 0).all())

    # padded positions actually computed (each chunk padded to its longest + <S></S>)
    padded = 0
    for i in range(0, len(sents), B):
        chunk = sents[i : i + B]
        padded += len(chunk) * (max(len(s) for s in chunk) + 2)

    best = min(times)
    med = sorted(times)[len(times) // 2]
    res = {
        "batch_size": B,
        "mode": args.mode,
        "sorted_by_length": bool(args.sort_by_length),
        "n_sentences": len(sents),
        "n_tokens": n_tokens,
        "n_chunks": -(-len(sents) // B),
        "padded_positions": padded,
        "warmup_sentences": len(warm),
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "warmup_s": None if warmup_s is None else round(warmup_s, 3),
        "wall_s": round(best, 4),
        "wall_s_all": [round(t, 4) for t in times],
        "wall_s_median": round(med, 4),
        "tokens_per_s": round(n_tokens / best, 2),
        "sentences_per_s": round(len(sents) / best, 3),
        "tokens_per_s_median": round(n_tokens / med, 2),
        "rss_after_import_mib": None if rss_after_import is None else round(rss_after_import, 1),
        "rss_after_load_mib": None if rss_after_load is None else round(rss_after_load, 1),
        "peak_rss_after_load_mib": round(peak_after_load, 1),
        "rss_end_mib": None if rss_now_mib() is None else round(rss_now_mib(), 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "output_shape": list(out.shape),
        "output_dtype": str(out.dtype),
        "output_sane": ok,
        "versions": {
            "simple_elmo": getattr(simple_elmo, "__version__", None)
            or _dist_version("simple-elmo"),
            "tensorflow": tf.__version__,
            "tf_keras": _dist_version("tf-keras"),
            "numpy": np.__version__,
            "h5py": _dist_version("h5py"),
        },
    }
    if sess is not None:
        sess.close()
    return res


def _dist_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


# --------------------------------------------------------------------------- parent
def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--options", required=True, help="options.json (bilm-tf format)")
    ap.add_argument("--weights", required=True, help="weights .hdf5 (bilm-tf layout)")
    ap.add_argument("--sentences", required=True, help="one whitespace-tokenised sentence per line")
    ap.add_argument(
        "--batch-size",
        action="append",
        default=None,
        help="batch size; repeatable and/or comma list (default 64)",
    )
    ap.add_argument(
        "--warmup-sentences",
        type=int,
        default=64,
        help="sentences (from the top of the file) for the untimed warm-up",
    )
    ap.add_argument("--max-sentences", type=int, default=0, help="use only the first N")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per batch size")
    ap.add_argument(
        "--mode",
        choices=["session", "strict", "fresh"],
        default="session",
        help="session: get_elmo_vectors(layers='all', session=...), its public API; strict: "
        "its graph op run batch by batch (its fastest use); fresh: a new session per call",
    )
    ap.add_argument(
        "--sort-by-length",
        action="store_true",
        help="sort sentences by length before calling get_elmo_vectors "
        "(a user-side trick that cuts padding; default: file order)",
    )
    ap.add_argument("--intra-op-threads", type=int, default=0, help="0 = TF default")
    ap.add_argument("--inter-op-threads", type=int, default=0, help="0 = TF default")
    ap.add_argument("--progress-every", type=int, default=1, help="log every N chunks (0 = off)")
    ap.add_argument("--json", help="write the JSON summary here")
    ap.add_argument("--timeout", type=float, default=0, help="per batch size, seconds (0 = none)")
    ap.add_argument("--verbose", action="store_true", help="keep simple-elmo's INFO logging")
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--_batch-size-child", dest="batch_size_child", type=int, help=argparse.SUPPRESS
    )
    ap.add_argument("--_result", dest="result_file", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._child:
        res = run_child(args)
        with open(args.result_file, "w") as fh:
            json.dump(res, fh)
        return

    batch_sizes = parse_batch_sizes(args.batch_size or ["64"])
    sents = read_sentences(args.sentences, args.max_sentences)
    n_tokens = sum(len(s) for s in sents)
    log(f"{len(sents)} sentences, {n_tokens} tokens; batch sizes {batch_sizes}; mode {args.mode}")

    env = dict(os.environ)
    # simple-elmo's bilm-tf graph uses tf.compat.v1.nn.rnn_cell.LSTMCell, which
    # needs tf-keras (Keras 2) behind it: force legacy Keras in the child.
    env["TF_USE_LEGACY_KERAS"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    results = []
    base = [a for a in sys.argv[1:]]
    # strip parent-only args that the child must not see twice
    child_args = []
    skip = False
    for a in base:
        if skip:
            skip = False
            continue
        if a in ("--batch-size", "--json", "--timeout"):
            skip = True
            continue
        if a.startswith(("--batch-size=", "--json=", "--timeout=")):
            continue
        child_args.append(a)

    for B in batch_sizes:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf_:
            result_file = tf_.name
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            *child_args,
            "--_child",
            "--_batch-size-child",
            str(B),
            "--_result",
            result_file,
        ]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, timeout=args.timeout or None)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc == 0:
            with open(result_file) as fh:
                res = json.load(fh)
        else:
            res = {"batch_size": B, "error": f"child exited with {rc}"}
            log(f"B={B}: FAILED ({rc})")
        res["child_total_s"] = round(time.perf_counter() - t0, 2)
        os.unlink(result_file)
        results.append(res)

    summary = {
        "peer": "simple-elmo (bilm-tf TF1 graph)",
        "options": os.path.abspath(args.options),
        "weights": os.path.abspath(args.weights),
        "sentences_file": os.path.abspath(args.sentences),
        "n_sentences": len(sents),
        "n_tokens": n_tokens,
        "mode": args.mode,
        "sorted_by_length": bool(args.sort_by_length),
        "repeats": args.repeats,
        "warmup_sentences": args.warmup_sentences,
        "host": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "results": results,
    }
    text = json.dumps(summary, indent=2)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
        log(f"wrote {args.json}")
    print(text)
    for r in results:
        if "error" in r:
            print(f"B={r['batch_size']:>4}  ERROR {r['error']}", file=sys.stderr)
        else:
            print(
                f"B={r['batch_size']:>4}  {r['tokens_per_s']:>9.1f} tok/s  "
                f"{r['sentences_per_s']:>8.2f} sent/s  wall {r['wall_s']:.3f}s  "
                f"RSS after load {r['rss_after_load_mib']:.0f} MiB  "
                f"peak {r['peak_rss_mib']:.0f} MiB",
                file=sys.stderr,
            )
    if any("error" in r for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
