"""TrainingOptions: the hyper-parameters of a biLM training run (bilm-tf's defaults)."""

import dataclasses
import json
import math

from elmo_tf import checks
from elmo_tf.errors import TrainingPlanError
from elmo_tf.system import files

# The optimizers a run can use and their default learning rates.
DEFAULT_LEARNING_RATES = {"adagrad": 0.2, "adam": 0.001}


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """What a training run does besides the architecture; saved beside the checkpoints.

    A value out of range raises ``TrainingPlanError`` (a ``ValueError``) naming its field.

    Args:
        batch_size: B, streams per batch over all replicas (bilm-tf: 128 per GPU).
        unroll_steps: T, positions per window of truncated back-propagation (bilm-tf: 20).
        num_sampled: candidates of the sampled softmax (bilm-tf: 8192), capped at V.
        optimizer: ``"adagrad"`` (bilm-tf's) or ``"adam"`` (converges in fewer steps on a
            small corpus; the bundled model is trained with it).
        learning_rate: the optimizer's learning rate; ``None``: its default (Adagrad 0.2,
            bilm-tf's; Adam 0.001).
        initial_accumulator_value: Adagrad's initial accumulator (bilm-tf: 1.0).
        clip_norm: global-norm clip of the summed gradients (bilm-tf: 10.0).
        dropout: dropout rate on LSTM inputs and top outputs (bilm-tf: 0.1).
        reset_state_per_sentence: every sentence starts from the zero LSTM state, as
            ``ELMo.embed`` runs it (bilm-tf: ``False``, the state flows across sentences;
            a model trained so leans on that carried state and is weaker from a zero state).
        seed: seed of initialisation, shuffling, dropout and sampling.
        max_steps: batches to train for, in all (``None``: from ``epochs``).
        epochs: passes over the corpus when ``max_steps`` is not given.
        checkpoint_every: steps between checkpoints (one is also written at the end).
        keep_checkpoints: newest checkpoints kept.
        log_every: steps between TensorBoard summaries.
    """

    batch_size: int = 128
    unroll_steps: int = 20
    num_sampled: int = 8192
    optimizer: str = "adagrad"
    learning_rate: float | None = None
    initial_accumulator_value: float = 1.0
    clip_norm: float = 10.0
    dropout: float = 0.1
    reset_state_per_sentence: bool = False
    seed: int = 0
    max_steps: int | None = None
    epochs: float = 10.0
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    log_every: int = 100

    def __post_init__(self):
        def fail(name, expected):
            raise TrainingPlanError(f"{name} must be {expected}, got {getattr(self, name)!r}")

        def is_integer(value):
            return isinstance(value, int) and not isinstance(value, bool)

        # Types are checked too: the options also come from a run's training_options.json.
        if not isinstance(self.optimizer, str) or self.optimizer not in DEFAULT_LEARNING_RATES:
            fail("optimizer", " or ".join(repr(name) for name in DEFAULT_LEARNING_RATES))
        if self.learning_rate is None:
            object.__setattr__(self, "learning_rate", DEFAULT_LEARNING_RATES[self.optimizer])
        for name in (
            "learning_rate",
            "initial_accumulator_value",
            "clip_norm",
            "dropout",
            "epochs",
        ):
            value = getattr(self, name)
            if not (is_integer(value) or isinstance(value, float)) or not math.isfinite(value):
                fail(name, "a finite number")

        for name in ("batch_size", "unroll_steps", "num_sampled", "checkpoint_every"):
            if not is_integer(getattr(self, name)) or getattr(self, name) < 1:
                fail(name, "a positive integer")
        for name in ("keep_checkpoints", "log_every"):
            if not is_integer(getattr(self, name)) or getattr(self, name) < 1:
                fail(name, "at least 1")
        if self.max_steps is not None and (not is_integer(self.max_steps) or self.max_steps < 0):
            fail("max_steps", "non-negative")
        if not is_integer(self.seed):
            fail("seed", "an integer")
        if not isinstance(self.reset_state_per_sentence, bool):
            fail("reset_state_per_sentence", "true or false")
        if self.epochs <= 0:
            fail("epochs", "positive")
        if not 0.0 <= self.dropout < 1.0:
            fail("dropout", "in [0, 1)")
        for name in ("learning_rate", "clip_norm"):
            if getattr(self, name) <= 0:
                fail(name, "positive")
        if self.initial_accumulator_value < 0:
            fail("initial_accumulator_value", "non-negative")

    def total_steps(self, n_positions):
        """``max_steps``, or the steps of ``epochs`` passes over ``n_positions`` positions."""
        if self.max_steps is not None:
            return self.max_steps
        per_step = self.batch_size * self.unroll_steps
        return max(1, -(-int(self.epochs * n_positions) // per_step))

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="training options"):
        check_known(values, f"{source}: ")
        return cls(**values)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def check_known(values, prefix=""):
    """``TrainingPlanError`` naming the keys of ``values`` that are no training option (the
    first five, each shown on one line: a file's key may hold anything)."""
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(TrainingOptions)})
    if unknown:
        names = ", ".join(checks.shown(name, 40, quote=False) for name in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise TrainingPlanError(f"{prefix}unknown training option(s) {names}{more}")


def write_json(path, value):
    """Writes ``value`` as indented JSON, replacing ``path`` atomically (``files.atomic_path``)."""
    files.write_text(path, json.dumps(value, indent=2) + "\n")
