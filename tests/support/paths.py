"""Where the repository and the committed fixtures are."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TINY = FIXTURES / "tiny"  # a tiny random model with AllenNLP's golden outputs
BILM = FIXTURES / "bilm_fixture"  # bilm-tf's test model with its golden outputs
