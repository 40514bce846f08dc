#!/usr/bin/env python
"""Where ``model.embed``'s time goes, per stage, for one model shape and batch size.

Runs the embed path's stages one by one over a corpus (length-sorted batches, the model's
token cache emptied first, as a cold ``embed`` call) and times each:

- host: batching, the framed (B, T + 2, P) table, ids of the tokens to encode;
- encoder: the character CNN + highway + projection on the tokens the cache misses;
- biLSTM: the compiled contextualize call (both directions, every layer, the ScalarMix);
- copies: the outputs' device-to-numpy conversion.

It also prints the biLSTM's FLOP rate: the multiply-adds it executes per second (both
directions, every layer: the input half of the gates, one matmul for all steps, the recurrent
half and the projection, all on the real positions only, since the biLSTM skips padding), as a
fraction of the machine's float32 matmul rate (tf.matmul 2048², the best of 3 medians of 7,
measured in a child process with TensorFlow's default pools: every core on one matmul, the
machine's ceiling). A shared machine's rate drifts by several percent over minutes, so the rate
is read before and after every timed pass (the model process idle meanwhile) and the fraction
divides by the median of the readings around that batch size's passes; their range is printed.
With several ``--batch-size`` values, every size gets its warm-up pass first and then their
timed passes take turns: timed one after the other in one process, the second size mostly
read faster (B = 256 after 128: biLSTM -0.3 to +10%; 128 after 256: +0 to +4%).
The model runs with ``elmo_tf.configure_threads()``'s pools unless ``--threads tf-default``.

    python benchmarks/profile_embed.py --options O --weights W --sentences FILE [--batch-size 64]
"""

import argparse
import statistics
import sys
import time

import tensorflow as tf
from timing import read_matmul_gflops, read_sentences

import elmo_tf
from elmo_tf.models import length_batches


def lstm_flops(config):
    """(input-half FLOPs, recurrent FLOPs (recurrent half and projection)) per real position."""
    p, d = config.projection_dim, config.lstm_dim
    directions = config.n_lstm_layers * 2
    return directions * 2 * p * 4 * d, directions * (2 * p * 4 * d + 2 * d * p)


def profile(model, sentences, batch_size, max_batch_tokens):
    embedder = model.embedder
    model.token_cache.clear()
    cache = embedder.shared_cache()
    totals = dict(host=0.0, encoder=0.0, bilstm=0.0, copies=0.0)
    real = 0
    calls = embedder.calls  # elmo_tf.models.compiled_calls.TensorFlowCalls
    real_encode = calls.encode

    def timed_encode(ids):
        t = time.perf_counter()
        out = real_encode(ids)  # NumPy: the encoder's own device->host copy included
        totals["encoder"] += time.perf_counter() - t
        return out

    calls.encode = timed_encode
    try:
        lengths = [len(s) for s in sentences]
        for indices in length_batches.length_batches(lengths, batch_size, max_batch_tokens):
            batch = [sentences[i] for i in indices]
            t = time.perf_counter()
            encoder_before = totals["encoder"]
            embeddings, lengths = embedder._framed_embeddings(batch, cache)
            totals["host"] += time.perf_counter() - t - (totals["encoder"] - encoder_before)
            real += int(lengths.sum()) + 2 * len(batch)  # with <S> and </S>
            t = time.perf_counter()
            outputs = calls._contextualize(embeddings, lengths)
            # Eager ops run synchronously on CPU: the call returns once computed.
            totals["bilstm"] += time.perf_counter() - t
            t = time.perf_counter()
            tf.nest.map_structure(lambda v: v.numpy(), outputs)
            totals["copies"] += time.perf_counter() - t
    finally:
        calls.encode = real_encode
    return totals, real


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--options", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--sentences", required=True, help="one whitespace-tokenised sentence per line")
    ap.add_argument("--batch-size", type=int, action="append", help="repeatable (default 64)")
    ap.add_argument("--repeats", type=int, default=3, help="passes; the median is reported")
    ap.add_argument(
        "--max-batch-tokens",
        type=int,
        default=length_batches.DEFAULT_MAX_BATCH_TOKENS,
        help="padded tokens per batch, as embed's budget (default %(default)s; 0: none)",
    )
    ap.add_argument(
        "--threads",
        choices=("elmo-tf", "tf-default"),
        default="elmo-tf",
        help="the model's thread pools: elmo_tf.configure_threads()'s (default) or TF's defaults",
    )
    args = ap.parse_args()
    if args.max_batch_tokens < 0:
        ap.error("--max-batch-tokens: expected a non-negative integer (0: no budget)")
    sentences = read_sentences(args.sentences)
    n_tokens = sum(map(len, sentences))
    if args.threads == "elmo-tf":
        elmo_tf.configure_threads()
    model = elmo_tf.load_pretrained(args.options, args.weights)
    input_flops, recurrent_flops = lstm_flops(model.config)
    print(
        f"{len(sentences)} sentences, {n_tokens} tokens; biLSTM "
        f"{input_flops / 1e6:.1f} + {recurrent_flops / 1e6:.1f} MFLOP per real position "
        "(input half + recurrence)",
        file=sys.stderr,
    )
    print(
        "| batch | tokens/s | host | encoder | biLSTM | copies | biLSTM GFLOP/s "
        "| matmul GFLOP/s (min-max) | % of matmul |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    batch_sizes = args.batch_size or [64]
    budget = args.max_batch_tokens
    for batch_size in batch_sizes:
        profile(model, sentences, batch_size, budget)  # warm-up: traces, allocator
    # The batch sizes' passes take turns, so that none gets the machine's quieter minutes.
    runs = {b: [] for b in batch_sizes}
    around = {b: [] for b in batch_sizes}  # the matmul readings just before and after each pass
    reading = read_matmul_gflops()
    for _ in range(args.repeats):
        for batch_size in batch_sizes:
            runs[batch_size].append(profile(model, sentences, batch_size, budget))
            around[batch_size].append(reading)
            reading = read_matmul_gflops()
            around[batch_size].append(reading)
    for batch_size in batch_sizes:
        readings, batch_runs = around[batch_size], runs[batch_size]
        rate = statistics.median(readings)
        totals = {k: statistics.median(r[0][k] for r in batch_runs) for k in batch_runs[0][0]}
        real = batch_runs[0][1]
        total = sum(totals.values())
        executed = real * (input_flops + recurrent_flops)
        gflops = executed / totals["bilstm"] / 1e9
        shares = " | ".join(f"{100 * totals[k] / total:.0f}%" for k in totals)
        print(
            f"| {batch_size} | {n_tokens / total:,.0f} | {shares} | {gflops:.1f} | "
            f"{rate:.1f} ({min(readings):.0f}-{max(readings):.0f}) | {100 * gflops / rate:.0f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
