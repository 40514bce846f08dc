#!/usr/bin/env python
"""The model's speed on a GPU (or, as a check that the script runs, on the CPU): the Keras model
on JAX and on PyTorch in float32, TF32 and bfloat16, against a hand-written JAX ``lax.scan`` of
the same arithmetic, and the AllenNLP drop-in against AllenNLP's ``Elmo``; one table.

    python benchmarks/gpu.py                                  # full shape, B = 1, 64, 512
    python benchmarks/gpu.py --device cpu --shape tiny --batch-sizes 1,4 --repeats 2   # a check

Needs only jax, torch, keras, numpy and h5py (with elmo-tf's own package); TensorFlow is neither
needed nor imported (the table's last line says so). Each backend runs in a child process of
its own (one Keras backend per process); a backend whose package is missing is left out with
one line.

What is timed, per precision (``fp32``: exact float32 matmuls; ``tf32``: TensorFloat-32 matmuls
where the device has them, else the same as fp32; ``bf16``: Keras's ``mixed_bfloat16`` policy,
float32 weights cast once per call, bfloat16 maths) and batch size B, on B sentences of
``--tokens`` tokens drawn from a fixed vocabulary (seed 0), random weights in ``--shape``:

- ``keras``: ``ELMo``'s forward pass (``call``: the character CNN on every position, the biLSTM,
  the mix), compiled: ``jax.jit`` of the stateless call on JAX, eager under ``torch.no_grad`` on
  PyTorch (its packed loop has a new shape at every step);
- ``lax.scan`` (JAX): the same forward pass written by hand in ``jax.numpy`` (one ``lax.scan``
  per LSTM layer over both directions, every position, masked), reading the Keras model's
  weights; its largest difference from the Keras model is printed, so both compute the same;
- ``AllenNLP`` and ``drop-in`` (PyTorch, at the batch size nearest 64): AllenNLP's ``Elmo``
  (its modules from ``--peer``, run only here) and ``elmo_tf.allennlp.Elmo`` on the same weight
  file, float32, and the drop-in in bfloat16 (``.to(torch.bfloat16)``).

Tokens/s counts real tokens; ms is one call; each figure the median of ``--repeats`` timed calls
after one untimed (compiling) call. B = 1 is one sentence's latency.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from timing import Timing, seconds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = {"tiny": "tiny", "small": "small", "full": "full"}
PRECISIONS = ("fp32", "tf32", "bf16")
BACKENDS = ("jax", "torch")
PEER_PLACES = (
    os.path.join(ROOT, "shared", "reference", "allennlp_peer"),
    os.path.join(os.path.dirname(ROOT), "shared", "reference", "allennlp_peer"),
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="full")
    ap.add_argument("--batch-sizes", default="1,64,512")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    ap.add_argument("--tokens", type=int, default=27, help="tokens per sentence")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer", help="folder holding AllenNLP's allennlp package (default: "
                    "shared/reference/allennlp_peer beside or above the repository)")  # fmt: skip
    ap.add_argument("--torch-python", default=sys.executable, help="the Python of the PyTorch "
                    "child (default: this one)")  # fmt: skip
    ap.add_argument("--minutes", type=float, default=7.5, help="time for the whole run: "
                    "each backend stops measuring at its share (JAX 60%%, then PyTorch the "
                    "rest) and says what it left out")  # fmt: skip
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        rows, notes = child(args.child, args)
        print(json.dumps({"rows": rows, "notes": notes, "tensorflow": "tensorflow" in sys.modules}))
        return 0

    peer = args.peer or next((p for p in PEER_PLACES if os.path.isdir(p)), None)
    rows, notes, tensorflow = [], [], False
    start, backends = time.time(), args.backends.split(",")
    for index, backend in enumerate(backends):
        share = 0.6 if index == 0 and len(backends) > 1 else 1.0
        deadline = start + 60 * args.minutes * (share if index == 0 else 1.0)
        result, note = run_child(backend, args, peer, deadline)
        if note:
            notes.append(note)
            print(note, file=sys.stderr, flush=True)
        if result is not None:
            rows += result["rows"]
            notes += result["notes"]
            tensorflow = tensorflow or result["tensorflow"]
    print_table(rows, args)
    for note in notes:
        print(f"- {note}")
    print(f"- TensorFlow imported: {'yes' if tensorflow else 'no'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "notes": notes}, f, indent=1)
    return 0 if rows and not tensorflow else 1


def run_child(backend, args, peer, deadline):
    """Runs this script for ``backend`` in a child process: ``(its JSON, None)``, or ``(None,
    a one-line note)`` when it could not run."""
    env = {**os.environ, "KERAS_BACKEND": backend,
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    if args.device == "cpu":
        env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    python = args.torch_python if backend == "torch" else sys.executable
    argv = [python, os.path.abspath(__file__), "--child", backend, "--shape", args.shape,
            "--batch-sizes", args.batch_sizes, "--precisions", args.precisions, "--device",
            args.device, "--tokens", str(args.tokens), "--repeats", str(args.repeats),
            "--deadline", str(deadline)]  # fmt: skip
    if peer and backend == "torch":
        argv += ["--peer", peer]
    print(f"{backend} ...", file=sys.stderr, flush=True)
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    sys.stderr.write(done.stderr[-4000:] if done.returncode else "")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"{backend}: not run ({last[-200:]})"
    return json.loads(done.stdout.strip().splitlines()[-1]), None


def print_table(rows, args):
    devices = sorted({row["device"] for row in rows})
    print(f"\nshape {args.shape}, {args.tokens} tokens a sentence, median of {args.repeats}; "
          f"{'; '.join(devices)}\n")  # fmt: skip
    print("| backend | what | precision | B | tokens/s | ms a call | against | largest diff |")
    print("|---|---|---|---:|---:|---:|---|---:|")
    by_key = {(r["backend"], r["what"], r["precision"], r["batch"]): r for r in rows}
    for row in rows:
        against = ""
        base_key = {"keras": "lax.scan", "drop-in": "AllenNLP"}.get(row["what"])
        base = by_key.get((row["backend"], base_key, row["baseline_precision"], row["batch"]))
        if base is not None:
            against = f"{row['tokens_per_s'] / base['tokens_per_s']:.2f}x {base_key}"
        diff = "" if row.get("max_diff") is None else f"{row['max_diff']:.1e}"
        print(f"| {row['backend']} | {row['what']} | {row['precision']} | {row['batch']} | "
              f"{row['tokens_per_s']:,.0f} | {row['ms']:.2f} | {against} | {diff} |")  # fmt: skip


# ------------------------------------------------------------------ the children


def sentences(count, tokens, seed):
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, rng.integers(2, 13))) for _ in range(5000)]
    return [[vocabulary[i] for i in rng.integers(0, len(vocabulary), tokens)] for _ in range(count)]


def child(backend, args):
    import elmo_tf
    from elmo_tf.testing import random_weights

    options = random_weights.options_for(SHAPES[args.shape])
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    precisions = args.precisions.split(",")
    device = device_name(backend, args.device)
    rows, notes = [], []
    models = {}
    for precision in precisions:
        if time.time() > args.deadline:
            notes.append(f"{backend}: out of time before {precision} (--minutes)")
            continue
        policy = "mixed_bfloat16" if precision == "bf16" else "float32"
        if policy not in models:  # random weights (keras.utils.set_random_seed would import
            models[policy] = elmo_tf.ELMo(options, dtype=policy)  # TensorFlow where it is)
        model = models[policy]
        run = keras_call(model, backend, args.device)
        reference = jax_reference(model, precision) if backend == "jax" else None
        for batch in batch_sizes:
            if time.time() > args.deadline:
                notes.append(f"{backend}: out of time before {precision} B={batch} (--minutes)")
                break
            ids = elmo_tf.batch_to_ids(sentences(batch, args.tokens, seed=batch))
            tokens = batch * args.tokens
            with matmul_precision(backend, precision):
                ours = time_calls(lambda ids=ids, run=run: run(ids), args.repeats)
                row = dict(backend=backend, what="keras", precision=precision, batch=batch,
                           device=device, baseline_precision=precision,
                           tokens_per_s=tokens / ours, ms=1000 * ours)  # fmt: skip
                rows.append(row)
                if reference is not None:
                    theirs = time_calls(lambda ids=ids, f=reference: f(ids), args.repeats)
                    ours_out = np.asarray(run(ids), np.float32)
                    difference = float(np.abs(ours_out - np.asarray(reference(ids))).max())
                    rows.append(dict(backend=backend, what="lax.scan", precision=precision,
                                     batch=batch, device=device, baseline_precision=precision,
                                     tokens_per_s=tokens / theirs, ms=1000 * theirs,
                                     max_diff=difference))  # fmt: skip
            print(f"{backend} {precision} B={batch}: {rows[-1]}", file=sys.stderr, flush=True)
    if backend == "torch" and args.peer:
        if time.time() > args.deadline:
            notes.append("torch: out of time before AllenNLP and the drop-in (--minutes)")
        else:
            rows += allennlp_rows(options, batch_sizes, args, device)
    elif backend == "torch":
        notes.append(
            "torch: no AllenNLP rows (no --peer, none at " + " or ".join(PEER_PLACES) + ")"
        )
    return rows, notes


def device_name(backend, wanted):
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"JAX {jax.__version__} on {device.platform.upper()}: {device.device_kind}"
    import torch

    if torch.cuda.is_available() and wanted != "cpu":
        return f"PyTorch {torch.__version__} on GPU: {torch.cuda.get_device_name(0)}"
    name = platform.processor() or platform.machine()
    return f"PyTorch {torch.__version__} on CPU: {name}, {os.cpu_count()} cores"


def torch_device(wanted):
    import torch

    return "cuda" if torch.cuda.is_available() and wanted != "cpu" else "cpu"


def time_calls(function, repeats):
    """The median seconds of ``repeats`` calls after one untimed (compiling) call."""
    function()
    return Timing(seconds(function) for _ in range(repeats)).median


class matmul_precision:
    """Float32 matmuls exact (``fp32``) or TensorFloat-32 (``tf32``) within the block; ``bf16``
    leaves them exact (its matmuls are bfloat16)."""

    def __init__(self, backend, precision):
        self.backend, self.tf32 = backend, precision == "tf32"

    def __enter__(self):
        if self.backend == "jax":
            import jax

            self.context = jax.default_matmul_precision("tensorfloat32" if self.tf32 else "float32")
            self.context.__enter__()
        else:
            import torch

            self.before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
            torch.set_float32_matmul_precision("high" if self.tf32 else "highest")
            torch.backends.cudnn.allow_tf32 = self.tf32

    def __exit__(self, *exc):
        if self.backend == "jax":
            self.context.__exit__(*exc)
        else:
            import torch

            torch.set_float32_matmul_precision(self.before[0])
            torch.backends.cudnn.allow_tf32 = self.before[1]


def keras_call(model, backend, wanted):
    """``run(ids)``: the model's forward pass compiled for ``backend``, returning ``elmo`` once
    the device has finished."""
    import keras

    if backend == "jax":
        import jax

        def stateless(values, ids):
            with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
                return model(ids)["elmo"]

        jitted = jax.jit(stateless)
        values = [v.value for v in model.variables]
        return lambda ids: jitted(values, ids).block_until_ready()
    import torch

    device = torch_device(wanted)
    model.to(device)

    def run(ids):
        with torch.no_grad():
            out = model(torch.as_tensor(ids, device=device))["elmo"]
        if device == "cuda":
            torch.cuda.synchronize()
        return out.float().cpu().numpy()

    return run


# ------------------------------------------------------------------ the hand-written lax.scan


def jax_reference(model, precision):
    """``run(ids)``: ELMo's forward pass written in ``jax.numpy`` (``lax.scan`` for the biLSTM),
    on ``model``'s weights, jitted; returns ``elmo`` (float32)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from elmo_tf.tokens import characters

    dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
    config = model.config
    encoder = model.character_encoder

    def value(variable):
        return jnp.asarray(variable.value, jnp.float32)

    params = {
        "embeddings": value(encoder.char_embedding.embeddings),
        "cnn": [(value(k), value(b)) for k, b in zip(encoder.cnn.kernels, encoder.cnn.biases)],
        "highway": [
            (
                value(h.carry_kernel),
                value(h.carry_bias),
                value(h.transform_kernel),
                value(h.transform_bias),
            )
            for h in encoder.highways
        ],  # fmt: skip
        "projection": (value(encoder.projection.kernel), value(encoder.projection.bias))
        if encoder.projection is not None
        else None,
        "lstm": [
            [(value(c.kernel), value(c.bias), value(c.projection_kernel)) for c in pair]
            for pair in zip(model.bilstm.forward_cells, model.bilstm.backward_cells)
        ],
        "mix": (value(model.scalar_mixes[0].scalar_weights), value(model.scalar_mixes[0].gamma)),
    }
    bos = jnp.asarray(characters.BOS_CHAR_IDS, jnp.int32)
    eos = jnp.asarray(characters.EOS_CHAR_IDS, jnp.int32)
    activation = jax.nn.relu if config.activation == "relu" else jnp.tanh
    cell_clip, proj_clip = config.cell_clip, config.proj_clip
    d = config.lstm_dim

    def cast(tree):  # the weights cast once per call, as Keras's mixed policy does
        return jax.tree_util.tree_map(lambda x: x.astype(dtype), tree)

    def reverse_within(x, lengths):  # (B, T, C), each row's first lengths[b] reversed
        t = jnp.arange(x.shape[1])[None, :]
        index = jnp.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)
        return jnp.take_along_axis(x, index[:, :, None], axis=1)

    def forward(params, ids):
        p = cast(params)
        lengths = jnp.sum(jnp.any(ids > 0, axis=-1), axis=1).astype(jnp.int32)  # (B,)
        batch, steps = ids.shape[0], ids.shape[1] + 2
        framed = jnp.concatenate(
            [jnp.broadcast_to(bos, (batch, 1, bos.shape[0])), ids,
             jnp.zeros((batch, 1, ids.shape[2]), jnp.int32)], axis=1)  # fmt: skip
        positions = jnp.arange(steps)[None, :]
        framed = jnp.where((positions == lengths[:, None] + 1)[:, :, None], eos, framed)
        mask = positions <= lengths[:, None] + 1  # (B, T + 2)
        # The character CNN on every position, then the highways and the projection.
        chars = p["embeddings"][framed.reshape(-1, framed.shape[-1])]  # (N, 50, E)
        pooled = []
        for kernel, bias in p["cnn"]:
            conv = lax.conv_general_dilated(
                chars, kernel, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC")
            )
            pooled.append(jnp.max(conv, axis=1) + bias)
        x = activation(jnp.concatenate(pooled, axis=-1))
        for carry_k, carry_b, transform_k, transform_b in p["highway"]:
            carry = jax.nn.sigmoid(x @ carry_k + carry_b)
            x = carry * jax.nn.relu(x @ transform_k + transform_b) + (1.0 - carry) * x
        if p["projection"] is not None:
            x = x @ p["projection"][0] + p["projection"][1]
        tokens = x.reshape(batch, steps, -1) * mask[:, :, None].astype(dtype)
        # The biLSTM: each layer one scan over every position, both directions in each step.
        keep = mask.T[:, :, None]  # (T + 2, B, 1)
        streams = [tokens, reverse_within(tokens, lengths + 2)]
        layers = []
        for index, cells in enumerate(p["lstm"]):
            inputs = streams
            projected = []
            for (kernel, bias, _), stream in zip(cells, streams):
                width = stream.shape[-1]
                projected.append(jnp.swapaxes(stream @ kernel[:width] + bias, 0, 1))

            def step(carry, inputs_t, cells=cells):
                projected_t, keep_t = inputs_t
                new, outputs = [], []
                for (kernel, _, projection), (c, h), z_x in zip(cells, carry, projected_t):
                    width = kernel.shape[0] - h.shape[-1]
                    z = z_x + h @ kernel[width:]
                    i, j, f, o = (z[:, g * d : (g + 1) * d] for g in range(4))
                    c_new = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(j)
                    c_new = jnp.clip(c_new, -cell_clip, cell_clip) if cell_clip else c_new
                    h_new = (jax.nn.sigmoid(o) * jnp.tanh(c_new)) @ projection
                    h_new = jnp.clip(h_new, -proj_clip, proj_clip) if proj_clip else h_new
                    new.append((jnp.where(keep_t, c_new, c), jnp.where(keep_t, h_new, h)))
                    outputs.append(jnp.where(keep_t, h_new, 0))
                return new, outputs

            zeros = [(jnp.zeros((batch, d), dtype), jnp.zeros((batch, c[2].shape[1]), dtype))
                     for c in cells]  # fmt: skip
            _, outputs = lax.scan(step, zeros, (projected, keep))
            outputs = [jnp.swapaxes(y, 0, 1) for y in outputs]  # (B, T + 2, P) each
            if index > 0:  # skip connections from the second layer on
                outputs = [y + x for y, x in zip(outputs, inputs)]
            streams = outputs
            layers.append(jnp.concatenate(
                [outputs[0], reverse_within(outputs[1], lengths + 2)], axis=-1))  # fmt: skip
        activations = [jnp.concatenate([tokens, tokens], axis=-1), *layers]
        weights, gamma = jax.nn.softmax(p["mix"][0].astype(jnp.float32)), p["mix"][1]
        mixed = sum(w.astype(dtype) * a for w, a in zip(weights, activations)) * gamma
        token_mask = jnp.arange(ids.shape[1])[None, :] < lengths[:, None]
        return (mixed[:, 1:-1] * token_mask[:, :, None].astype(dtype)).astype(jnp.float32)

    jitted = jax.jit(forward)
    return lambda ids: jitted(params, jnp.asarray(ids, jnp.int32)).block_until_ready()


# ------------------------------------------------------------------ AllenNLP and the drop-in


def allennlp_rows(options, batch_sizes, args, device_label):
    """AllenNLP's ``Elmo`` and the drop-in on one weight file, at the batch size nearest 64."""
    import torch

    from elmo_tf.testing import random_weights

    sys.path.insert(0, args.peer)
    from allennlp.modules.elmo import Elmo as AllenNLPElmo  # the reference, run only here
    from allennlp.modules.elmo import batch_to_ids as allennlp_ids

    from elmo_tf.allennlp import Elmo, batch_to_ids

    batch = min(batch_sizes, key=lambda b: abs(b - 64))
    device = torch_device(args.device)
    rows = []
    with tempfile.TemporaryDirectory(prefix="elmo-gpu-") as directory:
        files = os.path.join(directory, "options.json"), os.path.join(directory, "weights.hdf5")
        with open(files[0], "w", encoding="utf-8") as f:
            json.dump(options, f)
        random_weights.write_weights(options, files[1], random_weights.SEEDS[args.shape])
        batch_sentences = sentences(batch, args.tokens, seed=batch)
        peer = AllenNLPElmo(*files, 1, dropout=0.0).to(device).eval()
        drop_in = Elmo(*files, 1, dropout=0.0).to(device).eval()
        half = Elmo(*files, 1, dropout=0.0).to(device).to(torch.bfloat16).eval()
        peer_ids = allennlp_ids(batch_sentences).to(device)
        ids = batch_to_ids(batch_sentences).to(device)

        def call(module, inputs):
            def run():
                with torch.no_grad():
                    out = module(inputs)["elmo_representations"][0]
                if device == "cuda":
                    torch.cuda.synchronize()
                return out

            return run

        with torch.no_grad():  # the same weights, the same numbers (fresh states)
            difference = float((peer(peer_ids)["elmo_representations"][0]
                                - drop_in(ids)["elmo_representations"][0]).abs().max())  # fmt: skip
        tokens = batch * args.tokens
        for what, module, inputs, precision in (
            ("AllenNLP", peer, peer_ids, "fp32"),
            ("drop-in", drop_in, ids, "fp32"),
            ("drop-in", half, ids, "bf16"),
        ):
            with matmul_precision("torch", "fp32"):
                seconds_per_call = time_calls(call(module, inputs), args.repeats)
            rows.append(dict(backend="torch", what=what, precision=precision, batch=batch,
                             device=device_label, baseline_precision="fp32",
                             tokens_per_s=tokens / seconds_per_call, ms=1000 * seconds_per_call,
                             max_diff=difference if what == "drop-in" and precision == "fp32"
                             else None))  # fmt: skip
            print(f"torch {what} {precision} B={batch}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
