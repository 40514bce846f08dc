#!/usr/bin/env python
"""The model's speed on whatever Keras backend and device this process finds: a table of
tokens/s by precision and batch size, and the latency of one sentence.

    KERAS_BACKEND=jax python benchmarks/gpu.py                      # the full shape on a GPU
    KERAS_BACKEND=jax python benchmarks/gpu.py --shape small --batch-sizes 16,64 --repeats 3

What is timed, per precision (``fp32``: exact float32 matmuls; ``tf32``: TensorFloat-32
matmuls where the device has them; ``bf16``: the ``mixed_bfloat16`` policy, weights in
float32) and batch size B:

- ``call``: the model's compiled forward pass (``ELMo.call``, the character CNN on every
  token) on B sentences of ``--tokens`` tokens: ``jax.jit`` of the stateless call on JAX,
  ``tf.function`` on TensorFlow, eager without autograd on PyTorch. Tokens/s counts real
  tokens; the median of ``--repeats`` timed calls after one untimed (compiling) call.
- ``embed``: ``model.embed`` of the same sentences with ``batch_size=B`` (the host side:
  batching, the token-vector cache, framing; the cache emptied before each pass).

Then one sentence: the median latency of the compiled call at B = 1 and of ``model.embed``
of one sentence (each sentence new), ``--latency-calls`` calls.

The model is ``--shape`` (``full``: the published 2x4096_512_2048cnn_2xhighway) with random
weights: speed does not depend on the values. Sentences are drawn from a fixed vocabulary of
words of 2 to 12 characters (seed 0), so every run times the same work.
"""

import argparse
import contextlib
import os
import platform
import sys

import numpy as np
from timing import Timing, seconds, timed

SHAPES = {"full": "original", "small": "small", "medium": "medium"}
PRECISIONS = ("fp32", "tf32", "bf16")


def device_name(backend):
    """The accelerator this backend computes on, or the CPU."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform.upper()}: {device.device_kind}"
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)}"
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            return f"GPU: {tf.config.experimental.get_device_details(gpus[0]).get('device_name')}"
    return f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


@contextlib.contextmanager
def matmul_precision(backend, precision):
    """Float32 matmuls exact (``fp32``) or TensorFloat-32 (``tf32``) within the block."""
    tf32 = precision == "tf32"
    if backend == "jax":
        import jax

        with jax.default_matmul_precision("tensorfloat32" if tf32 else "float32"):
            yield
    elif backend == "torch":
        import torch

        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    else:
        import tensorflow as tf

        before = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
        try:
            yield
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(before)


def compiled_call(model, backend):
    """``run(ids)``: the model's forward pass compiled for ``backend``, returning once the
    device has finished (``elmo`` as the output that depends on everything)."""
    import keras

    if backend == "jax":
        import jax

        def stateless(values, ids):
            with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
                return model(ids)["elmo"]

        jitted = jax.jit(stateless)
        return lambda ids: jitted([v.value for v in model.variables], ids).block_until_ready()
    if backend == "torch":
        import torch

        def run(ids):
            with torch.no_grad():
                out = model(torch.as_tensor(ids, device=_torch_device()))["elmo"]
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            return out

        return run
    import tensorflow as tf

    spec = tf.TensorSpec([None, None, 50], tf.int32)
    function = tf.function(lambda ids: model(ids)["elmo"], input_signature=[spec])
    return lambda ids: function(ids).numpy()


def _torch_device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def sentences(count, tokens, seed):
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, rng.integers(2, 13))) for _ in range(5000)]
    return [[vocabulary[i] for i in rng.integers(0, len(vocabulary), tokens)] for _ in range(count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="full")
    parser.add_argument("--batch-sizes", default="128,512,2048")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--tokens", type=int, default=27, help="tokens per sentence")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency-calls", type=int, default=20)
    parser.add_argument("--no-embed", action="store_true", help="time the compiled call only")
    args = parser.parse_args()

    import keras

    import elmo_tf

    backend = keras.config.backend()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    precisions = args.precisions.split(",")
    print(f"backend {backend}, {device_name(backend)}, shape {args.shape}, "
          f"{args.tokens} tokens a sentence", flush=True)  # fmt: skip
    rows = []
    models = {}
    for precision in precisions:
        policy = "mixed_bfloat16" if precision == "bf16" else "float32"
        if policy not in models:
            keras.utils.set_random_seed(0)
            models[policy] = elmo_tf.ELMo.from_preset(
                SHAPES[args.shape], load_weights=False, dtype=policy
            )
        model = models[policy]
        run = compiled_call(model, backend)
        for batch in batch_sizes:
            batch_sentences = sentences(batch, args.tokens, seed=batch)
            ids = elmo_tf.batch_to_ids(batch_sentences)
            tokens = batch * args.tokens
            with matmul_precision(backend, precision):
                # the untimed call compiles this shape
                call = tokens / timed(lambda run=run, ids=ids: run(ids), args.repeats).median
                embed = None
                if not args.no_embed:

                    def embed_pass(model=model, batch=batch, batch_sentences=batch_sentences):
                        model.token_cache.clear()
                        model.embed(batch_sentences, batch_size=batch, max_batch_tokens=None)

                    # two warm-ups: the second compiles the token cache's weight check
                    embed_timing = timed(embed_pass, max(1, args.repeats // 2), warmups=2)
                    embed = tokens / embed_timing.median
            rows.append((precision, batch, call, embed))
            embed_text = "-" if embed is None else f"{embed:,.0f}"
            print(f"  {precision} B={batch}: call {call:,.0f} tokens/s, embed {embed_text}",
                  flush=True)  # fmt: skip

    print()
    print("| precision | B | call tokens/s | embed tokens/s |")
    print("|---|---:|---:|---:|")
    for precision, batch, call, embed in rows:
        embed_text = "-" if embed is None else f"{embed:,.0f}"
        print(f"| {precision} | {batch} | {call:,.0f} | {embed_text} |")

    model = models.get("float32") or next(iter(models.values()))
    run = compiled_call(model, backend)
    one = sentences(args.latency_calls + 1, args.tokens, seed=1)
    with matmul_precision(backend, "fp32"):
        ids = [elmo_tf.batch_to_ids([s]) for s in one]
        run(ids[0])  # compiles B = 1
        call_ms = 1000 * Timing(seconds(lambda i=i: run(ids[i])) for i in range(1, len(ids))).median
        model.embed([one[0]])
        model.embed([one[0]])
        each = Timing(seconds(lambda i=i: model.embed([one[i]])) for i in range(1, len(one)))
        embed_ms = 1000 * each.median
    print()
    print(f"one sentence of {args.tokens} tokens (fp32, median of {args.latency_calls}): "
          f"call {call_ms:.2f} ms, embed {embed_ms:.2f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
