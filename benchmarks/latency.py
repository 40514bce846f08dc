#!/usr/bin/env python
"""One sentence at a time: the latency of ``model.embed([s])`` and of the SavedModel's
``default`` signature, against the peer at batch 1 and the machine's memory-bandwidth bound.

    python benchmarks/latency.py --shape full --sentences sotu_1000_s7.txt --n 40
    python benchmarks/latency.py --shape full --no-peer     # without the peer's virtualenv

Why a bandwidth bound: with one row, every LSTM step is a matrix-vector product, so each step
reads each layer's and direction's recurrent kernel (P x 4D) and projection (D x P) from
memory, whatever the arithmetic: 160 MB a step for the published shape. A sentence of n
tokens runs n + 2 steps, and reads the input halves' kernels (in x 4D), the highway layers and
the token projection once. ``bytes / bandwidth`` is the time no implementation can beat when
the weights do not fit in the caches; where they do (a large L3), the measured time can beat
it, and the table says so.

Bandwidth is measured the STREAM "copy" way: ``dst[:] = src`` on two arrays of
``--bandwidth-mib`` MiB each (larger than the last-level cache), counted as bytes read plus
bytes written, on one thread and on as many threads as the model runs (two halves copied side
by side; NumPy releases the GIL for the copy), best of 5, in a child process.

Method for the latencies: the model loads (random weights in the published shape, made by
``tests/fixtures/make_weights.py`` into ``--weights-dir``), ``configure_threads()`` sets the
pools as ``elmo-tf embed`` does, ``--warmup`` sentences run untimed, then ``--n`` further
sentences, each its own call, are timed one by one: median and quartiles. Each sentence is new
to the token cache except for the words it shares with earlier ones, as in interactive use.
The SavedModel (exported once into ``--weights-dir``) runs the same sentences through its
``default`` signature (strings in, the graph splits them; no token cache). The peer runs
``simple-elmo``'s own graph (the original bilm-tf) at batch 1 in its own virtualenv
(``benchmarks/setup_peer_venv.sh``), the same sentences, per-sentence time = its total / n.

Prints a markdown table; ``--json`` writes everything.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading

from timing import Timing, random_weights, read_sentences, seconds, timed

HERE = os.path.dirname(os.path.abspath(__file__))
FLOAT_BYTES = 4


def bandwidth_gbps(mib, threads, repeats=5):
    """STREAM-copy bandwidth in GB/s (bytes read + written) on ``threads`` threads."""
    import numpy as np

    n = mib * (1 << 20) // 8
    src = np.ones(n, np.float64)
    dst = np.empty_like(src)
    parts = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]

    def copy(lo, hi):
        dst[lo:hi] = src[lo:hi]

    def copy_in_parts():
        workers = [threading.Thread(target=copy, args=part) for part in parts]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    best = timed(copy_in_parts, repeats, warmups=0).best
    return 2 * src.nbytes / best / 1e9


def bytes_per_sentence(config, n_tokens):
    """Bytes of weights one sentence of ``n_tokens`` streams at batch 1 (float32)."""
    p, d, layers = config.projection_dim, config.lstm_dim, config.n_lstm_layers
    steps = n_tokens + 2
    per_step = 2 * layers * (p * 4 * d + d * p) * FLOAT_BYTES  # recurrent + projection
    input_halves = 2 * layers * p * 4 * d * FLOAT_BYTES
    f = config.n_filters
    token_layers = (config.n_highway * 2 * f * f + f * p) * FLOAT_BYTES
    return steps * per_step + input_halves + token_layers


def ours(args, sentences):
    import elmo_tf

    elmo_tf.configure_threads()
    import tensorflow as tf

    options, weights = random_weights(args.shape, args.weights_dir)
    model = elmo_tf.load_pretrained(options, weights)
    warm, measured = sentences[: args.warmup], sentences[args.warmup :]
    for s in warm:
        model.embed([s])
    embed = Timing(seconds(lambda s=s: model.embed([s])) for s in measured)
    exported = os.path.join(args.weights_dir, f"{args.shape}_saved_model")
    if not os.path.isdir(exported):
        from elmo_tf.export.saved_model import export_saved_model

        export_saved_model(model, exported, version=1)
    signature = tf.saved_model.load(os.path.join(exported, "1")).signatures["default"]
    for s in warm:
        signature(sentences=tf.constant([" ".join(s)]))
    saved = Timing(
        seconds(lambda s=s: signature(sentences=tf.constant([" ".join(s)]))["elmo"].numpy())
        for s in measured
    )
    return model.config, embed, saved


def peer(args, sentences):
    """The peer's per-sentence time at batch 1 (its strict loop over the timed sentences)."""
    options, weights = random_weights(args.shape, args.weights_dir)
    path = os.path.join(args.weights_dir, "latency_sentences.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(" ".join(s) + "\n" for s in sentences)
    out = os.path.join(args.weights_dir, "latency_peer.json")
    command = [
        os.path.join(args.peer_venv, "bin", "python"), os.path.join(HERE, "peer_simple_elmo.py"),
        "--options", options, "--weights", weights, "--sentences", path,
        "--batch-size", "1", "--mode", "strict", "--repeats", "3",
        "--warmup-sentences", str(args.warmup), "--json", out,
    ]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(out, encoding="utf-8") as f:
        result = json.load(f)
    run = result["results"][0] if "results" in result else result
    return 1e3 * run["wall_s_median"] / run["n_sentences"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("small", "full"), default="full")
    parser.add_argument("--sentences", required=True, help="one tokenised sentence per line")
    parser.add_argument("--n", type=int, default=40, help="timed sentences")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--weights-dir", default="/tmp/elmo_weights")
    parser.add_argument("--bandwidth-mib", type=int, default=1024)
    parser.add_argument("--peer-venv", default=os.environ.get("PEER_VENV", "/opt/peer-venv"))
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--_bandwidth", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._bandwidth:
        print(json.dumps([bandwidth_gbps(args.bandwidth_mib, t) for t in (1, 2)]))
        return 0
    os.makedirs(args.weights_dir, exist_ok=True)
    sentences = read_sentences(args.sentences, args.warmup + args.n)
    if len(sentences) < args.warmup + args.n:
        sys.exit(f"latency.py: {args.sentences} holds fewer than {args.warmup + args.n} sentences")
    done = subprocess.run(
        [sys.executable, __file__, "--_bandwidth", "--sentences", args.sentences,
         "--bandwidth-mib", str(args.bandwidth_mib)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    bw1, bw2 = json.loads(done.stdout)
    config, embed, saved = ours(args, sentences)
    peer_ms = None if args.no_peer else peer(args, sentences)
    measured = sentences[args.warmup :]
    tokens = statistics.median(len(s) for s in measured)
    bound_ms = 1e3 * bytes_per_sentence(config, tokens) / (bw2 * 1e9)
    rows = [("elmo-tf, model.embed([s])", [1e3 * t for t in embed.quartiles()]),
            ("elmo-tf, SavedModel default", [1e3 * t for t in saved.quartiles()])]  # fmt: skip
    print(f"\nMachine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"copy bandwidth {bw1:.1f} GB/s (1 thread), {bw2:.1f} GB/s (2 threads); "
          f"{args.shape} shape, median sentence {tokens:g} tokens; "
          f"weights streamed per sentence {bytes_per_sentence(config, tokens) / 1e9:.2f} GB "
          f"-> bound {bound_ms:.0f} ms at 2-thread bandwidth\n")  # fmt: skip
    print("| implementation | ms per sentence, median (quartiles) | / bound | / peer |")
    print("|---|---:|---:|---:|")
    for name, (q1, med, q3) in rows:
        vs_peer = f"{med / peer_ms:.2f}x" if peer_ms else "n/a"
        print(f"| {name} | {med:.0f} ({q1:.0f}-{q3:.0f}) | {med / bound_ms:.2f}x | {vs_peer} |")
    if peer_ms:
        print(f"| simple-elmo (bilm-tf graph), batch 1 | {peer_ms:.0f} | "
              f"{peer_ms / bound_ms:.2f}x | 1.00x |")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {"bandwidth_gbps": [bw1, bw2], "bound_ms": bound_ms, "tokens": tokens,
                 "embed_ms": [1e3 * t for t in embed.seconds],
                 "saved_model_ms": [1e3 * t for t in saved.seconds], "peer_ms": peer_ms},
                f, indent=2,
            )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
