"""A PyTorch pickle that names code, read in a fresh process: the code never runs there
either."""

import pickle
import subprocess
import sys

from support import torch_pickles


def test_the_code_never_runs_in_a_fresh_process_either(tmp_path):
    """The whole load in a process of its own: no marker, one line, nothing imported."""
    marker = tmp_path / "marker"
    path = tmp_path / "token_embedder.pkl"
    main = pickle.dumps(torch_pickles.WritesMarker(marker, "system"), protocol=2)
    path.write_bytes(torch_pickles.legacy_with_main(main))
    script = (
        "import sys; from elmo_tf.foreign.torch_state_dict import read_state_dict\n"
        "try:\n    read_state_dict(sys.argv[1])\nexcept Exception as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.count("\n") == 1 and "which a state_dict never holds" in done.stdout
    assert not marker.exists()
