"""The loss and perplexity entries that ``elmo-tf evaluate`` reports for a biLM or a baseline."""

import math


def perplexities(forward_loss, backward_loss):
    """Both directions' mean losses (nats per prediction) and their perplexities.

    The biLM's perplexity is that of the mean loss, ``exp((forward + backward) / 2)``, as
    bilm-tf reports it.
    """
    return {
        "perplexity": math.exp(0.5 * (forward_loss + backward_loss)),
        "forward_perplexity": math.exp(forward_loss),
        "backward_perplexity": math.exp(backward_loss),
        "forward_loss": forward_loss,
        "backward_loss": backward_loss,
    }
