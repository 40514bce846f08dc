"""Lines at the edges of a line bound, shared by the line reader's and Beam's tests."""

from elmo_tf.tokens.text_lines import RawLine


def edge_lines(bound):
    """Lines of ``bound``, ``bound + 1``, ``2 * bound - 1``, ``2 * bound`` and ``2 * bound +
    1`` bytes, with short ones between; ``(lines, expected RawLines)``."""
    lengths = [bound, bound + 1, 2, 2 * bound - 1, bound, 2 * bound, 0, 2 * bound + 1, bound + 1]
    lines = [bytes([ord("a") + i % 26]) * n for i, n in enumerate(lengths)]
    expected = [
        RawLine(i, line[:bound], too_long=len(line) > bound) for i, line in enumerate(lines)
    ]
    return lines, expected
