"""What ``export_tflite`` accepts, checked without TensorFlow: ``elmo-tf export tflite`` checks
its flags with it before the slow model load, ``export_tflite`` checks its arguments with it.
"""

from elmo_tf.tokens.text_lines import MAX_TOKENS_PER_LINE

QUANTIZE_CHOICES = ("dynamic",)
# The fixed batch a TFLite model runs at once, on a phone or a small device: 4,096 sentences
# is past any such use, and a billion made the converter die of std::bad_alloc.
MAX_BATCH_SIZE = 4096


def check_arguments(batch_size, max_length, quantize):
    """Raises ``ValueError`` naming the first argument out of its range: ``batch_size`` from
    1 to ``MAX_BATCH_SIZE``, ``max_length`` ``None`` or from 1 to ``MAX_TOKENS_PER_LINE``,
    ``quantize`` ``None`` or one of ``QUANTIZE_CHOICES``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise ValueError(f"batch_size must be an integer, got {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be from 1 to {MAX_BATCH_SIZE:,}, got {batch_size:,}")
    if max_length is not None:
        if isinstance(max_length, bool) or not isinstance(max_length, int):
            raise ValueError(f"max_length must be an integer or None, got {max_length!r}")
        if not 1 <= max_length <= MAX_TOKENS_PER_LINE:
            raise ValueError(
                f"max_length must be from 1 to {MAX_TOKENS_PER_LINE:,} (max_tokens_per_line) "
                f"or None, got {max_length:,}"
            )
    if quantize not in (None, *QUANTIZE_CHOICES):
        raise ValueError(f"quantize must be None or one of {QUANTIZE_CHOICES}, got {quantize!r}")
