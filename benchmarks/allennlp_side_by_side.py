#!/usr/bin/env python3
"""AllenNLP's ``Elmo`` against elmo-tf on PyTorch (the drop-in, ``elmo_tf.allennlp.Elmo``),
side by side in one process, and elmo-tf on TensorFlow in a child process: tokens/s.

    python benchmarks/allennlp_side_by_side.py --peer ../shared/reference/allennlp_peer \\
        --sentences sotu_1000_s7.txt --n 256 --shapes small,full --repeats 3

Each shape's weights are random, in the published layout (``elmo_tf.testing.random_weights``).
A pass embeds the first ``--n`` sentences in file order, ``--batch`` sentences a call (as a
training loop feeds them), under ``torch.no_grad()`` with dropout off; the passes alternate
between the implementations, and each one's median of ``--repeats`` passes is reported after
one warm-up pass. ``--compile`` adds the drop-in under ``torch.compile``; ``--bfloat16`` the
drop-in in bfloat16 (``.to(torch.bfloat16)``), with its per-token cosine against the float32
drop-in over the same calls (``elmo_tf.probes.fidelity``). ``--device cuda``
runs the PyTorch rows on a GPU. AllenNLP's modules come from ``--peer`` (a copy that imports
without installing AllenNLP); they are only run here, never imported by elmo_tf.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from timing import Timing, seconds, timed

os.environ.setdefault("KERAS_BACKEND", "torch")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", required=True, help="folder holding AllenNLP's allennlp package")
    ap.add_argument("--sentences", required=True, help="one tokenised sentence per line")
    ap.add_argument("--n", type=int, default=256, help="sentences per pass")
    ap.add_argument("--batch", type=int, default=64, help="sentences per call")
    ap.add_argument("--shapes", default="small,full")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile's drop-in")
    ap.add_argument("--bfloat16", action="store_true", help="also time the drop-in in bfloat16")
    ap.add_argument("--no-tensorflow", action="store_true", help="leave out the TensorFlow row")
    ap.add_argument("--tensorflow-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.split()][: args.n]
    if args.tensorflow_child:
        print(json.dumps(_tensorflow_rate(args, sentences, args.tensorflow_child)))
        return
    import torch

    torch.set_num_threads(args.threads)
    tokens = sum(len(s) for s in sentences)
    print(f"# {len(sentences)} sentences, {tokens} tokens, {args.batch} a call, {args.threads} "
          f"threads, device {args.device}, median of {args.repeats}")  # fmt: skip
    print("| shape | AllenNLP's Elmo | elmo-tf drop-in (PyTorch) | speed-up | elmo-tf ELMo "
          "(PyTorch) | elmo-tf (TensorFlow) | max abs diff |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            files = _weights(shape, tmp)
            rates = _torch_rates(args, sentences, files, tokens)
            tf_rate = None
            if not args.no_tensorflow:
                tf_rate = _tensorflow_child(args, shape, files)
            peer, ours = rates["allennlp"], rates["drop-in"]
            row = [shape, f"{peer:,.0f}", f"{ours:,.0f}", f"{ours / peer:.2f}x",
                   f"{rates['ELMo']:,.0f}", "-" if tf_rate is None else f"{tf_rate:,.0f}",
                   f"{rates['max_diff']:.1e}"]  # fmt: skip
            if "compiled" in rates:
                row[2] += f" ({rates['compiled']:,.0f} compiled)"
            if "bfloat16" in rates:
                cos, half = rates["bfloat16_fidelity"], rates["bfloat16"]
                row[2] += (f" ({half:,.0f} in bfloat16: {half / peer:.2f}x, cosine mean "
                           f"{cos['cos_mean']:.5f}, 1st pct {cos['cos_p1']:.5f})")  # fmt: skip
            print("| " + " | ".join(row) + " |", flush=True)


def _weights(shape, directory):
    from elmo_tf.testing import random_weights

    options = random_weights.options_for(shape)
    folder = os.path.join(directory, shape)
    os.makedirs(folder)
    with open(os.path.join(folder, "options.json"), "w") as f:
        json.dump(options, f)
    weights = os.path.join(folder, "weights.hdf5")
    random_weights.write_weights(options, weights, random_weights.SEEDS[shape])
    return os.path.join(folder, "options.json"), weights


def _torch_rates(args, sentences, files, tokens):
    import torch

    sys.path.insert(0, args.peer)
    from allennlp.modules.elmo import Elmo as AllenNLPElmo
    from allennlp.modules.elmo import batch_to_ids as allennlp_ids

    import elmo_tf
    from elmo_tf.allennlp import Elmo, batch_to_ids
    from elmo_tf.probes import fidelity

    device = torch.device(args.device)
    batches = [sentences[i : i + args.batch] for i in range(0, len(sentences), args.batch)]
    peer = AllenNLPElmo(*files, 1, dropout=0.0).to(device).eval()
    drop_in = Elmo(*files, 1, dropout=0.0).to(device).eval()
    model = elmo_tf.load_pretrained(*files).to(device)
    runs = {
        "allennlp": lambda b: peer(allennlp_ids(b).to(device)),
        "drop-in": lambda b: drop_in(batch_to_ids(b).to(device)),
        "ELMo": lambda b: model(batch_to_ids(b).to(device)),
    }
    if args.compile:
        compiled = torch.compile(drop_in)
        runs["compiled"] = lambda b: compiled(batch_to_ids(b).to(device))
    if args.bfloat16:
        half = Elmo(*files, 1, dropout=0.0).to(device).to(torch.bfloat16).eval()
        runs["bfloat16"] = lambda b: half(batch_to_ids(b).to(device))

    def one_pass(run):
        with torch.no_grad():
            for batch in batches:
                run(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()

    # The warm-up pass (and torch.compile's compilation) also compares the numbers: both
    # stateful, fresh, over the same calls in order.
    worst, fidelity_rows = 0.0, []
    with torch.no_grad():
        for b in batches:
            ours = runs["drop-in"](b)["elmo_representations"][0]
            theirs = runs["allennlp"](b)["elmo_representations"][0]
            worst = max(worst, (theirs - ours).abs().max().item())
            if args.bfloat16:  # the bfloat16 drop-in over the same calls, from a fresh state
                approx = runs["bfloat16"](b)["elmo_representations"][0].float()
                lengths = [len(s) for s in b]
                fidelity_rows.append(
                    fidelity.token_fidelity(ours.cpu().numpy(), approx.cpu().numpy(), lengths)
                )
    for name, run in runs.items():
        if name not in ("allennlp", "drop-in", "bfloat16"):
            one_pass(run)
    times = {name: [] for name in runs}
    for _ in range(args.repeats):  # the implementations take turns
        for name, run in runs.items():
            times[name].append(seconds(lambda run=run: one_pass(run)))
    rates = {name: tokens / Timing(t).median for name, t in times.items()}
    if fidelity_rows:  # token-weighted over the calls
        counts = [row.tokens for row in fidelity_rows]
        rates["bfloat16_fidelity"] = {
            "cos_mean": sum(r.cos_mean * n for r, n in zip(fidelity_rows, counts)) / sum(counts),
            "cos_p1": min(r.cos_p1 for r in fidelity_rows),
        }
    return {**rates, "max_diff": worst}


def _tensorflow_child(args, shape, files):
    """elmo-tf on TensorFlow, in a process of its own (one Keras backend per process)."""
    argv = [sys.executable, __file__, "--peer", args.peer, "--sentences", args.sentences,
            "--n", str(args.n), "--batch", str(args.batch), "--repeats", str(args.repeats),
            "--tensorflow-child", json.dumps(files)]  # fmt: skip
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _tensorflow_rate(args, sentences, files):
    import elmo_tf

    elmo_tf.configure_threads()
    model = elmo_tf.load_pretrained(*json.loads(files))
    tokens = sum(len(s) for s in sentences)

    def one_pass():
        for i in range(0, len(sentences), args.batch):
            model.embed(sentences[i : i + args.batch], token_cache_size=0)

    return tokens / timed(one_pass, args.repeats).median


if __name__ == "__main__":
    main()
