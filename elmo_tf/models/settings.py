"""What ``ELMo``'s settings may be, checked without TensorFlow (the command line checks its flags
with these before it imports it)."""

from elmo_tf import checks

# Output representations a model may mix (AllenNLP uses one or two, one per task input): each
# is a ScalarMix and an output, and a .keras file's config can ask for any number.
MAX_OUTPUT_REPRESENTATIONS = 64

# What fine-tuning trains (ElmoLayer's fine_tune, an export's trainable): "mix" the ScalarMix
# weights and gamma of every output representation, "all" every weight, "none" nothing.
FINE_TUNE_CHOICES = ("mix", "all", "none")


def check_settings(num_output_representations=1, do_layer_norm=False, l2_coefficient=0.0,
                   dropout=0.0, dedupe_tokens=True):  # fmt: skip
    """ValueError naming the first of ``ELMo``'s settings that is not a legal value: they also
    arrive from files (a ``.keras`` config, an exported ``elmo_config``), where ``"false"``
    would read as true and 100,000 representations would build for minutes and crash."""
    checks.integer(
        "num_output_representations",
        num_output_representations,
        minimum=1,
        maximum=MAX_OUTPUT_REPRESENTATIONS,
    )
    checks.boolean("do_layer_norm", do_layer_norm)
    checks.number("l2_coefficient", l2_coefficient, minimum=0)
    checks.number("dropout", dropout, minimum=0, below=1)
    checks.boolean("dedupe_tokens", dedupe_tokens)


def check_fine_tune(fine_tune, name="fine_tune"):
    """``fine_tune`` if it is one of ``FINE_TUNE_CHOICES``, else a ValueError naming ``name``
    (``trainable`` for an export)."""
    return checks.one_of(name, fine_tune, FINE_TUNE_CHOICES)
