"""Training speed of ``elmo-tf train`` per setting: positions per second, one table.

Builds the same ``Trainer`` as ``elmo-tf train`` (default architecture, the given corpus and
vocabulary) once per variant, runs ``--warmup`` steps (tracing, first allocations), then times
``--steps`` steps; repeats the variants ``--repeats`` times in alternation and reports the
median. Run it on an idle machine:

    python scripts/prepare_sotu.py /tmp/sotu_data
    python benchmarks/profile_train.py /tmp/sotu_data/train.txt \
        --vocab elmo_tf/presets/sotu/vocab.txt \
        --variant default --variant num_sampled=2048 --variant num_sampled=1024 \
        --variant optimizer=adam

A variant is ``name`` or ``key=value[,key=value]`` over ``TrainingOptions`` fields
(``default`` = bilm-tf's settings).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time


def parse_variant(text):
    from elmo_tf.training.training_options import TrainingOptions

    if text == "default":
        return {}
    types = {name: type(value) for name, value in TrainingOptions().to_dict().items()}
    changes = {}
    for item in text.split(","):
        key, value = item.split("=", 1)
        kind = types.get(key, str)
        if kind is bool:
            changes[key] = value.lower() in ("1", "true", "yes")
        elif kind in (int, float, str):
            changes[key] = kind(value)
        else:
            changes[key] = int(value)
    return changes


def time_variant(corpus_files, vocab, changes, warmup, steps):
    from elmo_tf.training import plan
    from elmo_tf.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as run_dir:
        training = {"checkpoint_every": 10**9, **changes}
        training_plan = plan.plan_training(run_dir, corpus_files, vocab=vocab, training=training)
        trainer = Trainer.from_plan(training_plan, run_dir, logdir="")
        per_step = training_plan.options.batch_size * training_plan.options.unroll_steps
        trainer.train(warmup, callback=lambda m: None)
        start = time.perf_counter()
        trainer.train(warmup + steps)
        elapsed = time.perf_counter() - start
        trainer.close()
        return steps * per_step / elapsed


def time_input_pipeline(corpus_files, vocab, steps):
    """Positions per second the input pipeline alone delivers (batches, no model)."""
    from elmo_tf.training import plan
    from elmo_tf.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as run_dir:
        training_plan = plan.plan_training(run_dir, corpus_files, vocab=vocab)
        trainer = Trainer.from_plan(training_plan, run_dir, logdir="")
        per_step = training_plan.options.batch_size * training_plan.options.unroll_steps
        iterator = iter(trainer.dataset(0))
        next(iterator)
        start = time.perf_counter()
        for _ in range(steps):
            next(iterator)
        elapsed = time.perf_counter() - start
        trainer.close()
        return steps * per_step / elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--input-pipeline",
        action="store_true",
        help="also time the input pipeline alone (batches per second without the model)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    variants = args.variant or ["default"]
    rates = {v: [] for v in variants}
    for repeat in range(args.repeats):
        for variant in variants:
            rate = time_variant(
                args.corpus, args.vocab, parse_variant(variant), args.warmup, args.steps
            )
            rates[variant].append(rate)
            print(f"repeat {repeat + 1} {variant}: {rate:,.0f} positions/s", file=sys.stderr)
    if args.input_pipeline:
        rate = time_input_pipeline(args.corpus, args.vocab, 200)
        print(f"input pipeline alone: {rate:,.0f} positions/s", file=sys.stderr)
    base = statistics.median(rates[variants[0]])
    print(f"| variant | positions/s (median of {args.repeats}) | vs {variants[0]} |")
    print("|---|---|---|")
    for variant in variants:
        median = statistics.median(rates[variant])
        print(f"| {variant} | {median:,.0f} | {median / base:.2f}x |")
    if args.input_pipeline:
        print(f"| input pipeline alone (no model) | {rate:,.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
