"""The guides (docs/models.md, migration.md, backends.md, beam.md): every runnable code block
runs as written (``support.docs`` says how)."""

import pytest
from support.docs import DOCUMENTS_BY_TEST_FILE, run_block, runnable

BLOCKS = runnable(DOCUMENTS_BY_TEST_FILE["guides"])


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block_runs_as_written(block, docs_sessions):
    run_block(block, docs_sessions)
