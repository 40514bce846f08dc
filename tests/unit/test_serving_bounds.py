"""The server's bounds in process, without a server: each request's limits, the body decoder's
pieces, the body budget, bodies received and answers written, JSON pieces a row at a time, the
batcher under clients that go, whitespace as str.split's."""

import asyncio
import concurrent.futures
import gzip
import json
import os
import sys
import threading
import time
import zlib

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

from elmo_tf.serving.content_coding import PIECE_BYTES, BodyDecoder
from elmo_tf.serving.errors import ServingError
from elmo_tf.serving.in_flight import ReceivedBodies, WrittenAnswers
from elmo_tf.serving.options import BatchingOptions
from elmo_tf.serving.request_batching import Batcher
from elmo_tf.serving.request_limits import BodyBudget, RequestLimits
from elmo_tf.serving.signature import SignatureSpec
from elmo_tf.tokens.characters import WHITESPACE, split_tokens

TIMEOUT = 30  # seconds, for every call


# The limits of tests/model/test_serving_requests.py.
LIMITS = RequestLimits(
    max_request_rows=16, max_tokens_per_row=12, max_request_tokens=64, max_token_bytes=40
)


def _refused(call, *args):
    """``(gRPC code, REST status, message)`` of the ``ServingError`` that ``call`` raises."""
    with pytest.raises(ServingError) as error:
        call(*args)
    return error.value.code, error.value.http_status, error.value.message


def _over(message):
    """What a request over a limit is answered: RESOURCE_EXHAUSTED, REST 413 (not a retry)."""
    return grpc.StatusCode.RESOURCE_EXHAUSTED, 413, message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_request_rows", 0),
        ("max_tokens_per_row", -1),
        ("max_request_tokens", 1.5),
        ("max_token_bytes", True),
    ],
)
def test_request_limits_are_positive_integers(field, value):
    with pytest.raises(ValueError) as error:
        RequestLimits(**{field: value})
    assert str(error.value) == f"{field} must be a positive integer, got {value!r}"


@pytest.mark.parametrize(
    ("shape", "spec_shape"),
    [
        ([], None),
        ([], ()),
        ([0], None),
        ([16], (None,)),
        ([2, 0, 50], (None, None, 50)),
        ([1, 12], (None, None)),
        ([16, 4], None),  # 64 tokens
        ([1, 12, 50], (None, None, 50)),  # the characters of 12 tokens
        ([2, 3, 4, 5], None),
    ],
)
def test_a_shape_within_the_signature_and_the_limits_is_taken(shape, spec_shape):
    assert LIMITS.check_shape("x", shape, spec_shape) is None


@pytest.mark.parametrize(
    ("shape", "spec_shape", "message"),
    [
        ([-1, 2], None, "input 'x' has a negative dimension in shape [-1, 2]"),
        ([1, 2], (None,), "input 'x' must have rank 1, got shape [1, 2]"),
        ([3], (None, None), "input 'x' must have rank 2, got shape [3]"),
        (
            [1, 2, 49],
            (None, None, 50),
            "input 'x' must have size 50 in dimension 2, got shape [1, 2, 49]",
        ),
    ],
)
def test_a_shape_unlike_the_signatures_is_an_invalid_argument(shape, spec_shape, message):
    assert _refused(LIMITS.check_shape, "x", shape, spec_shape) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        400,
        message,
    )


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([17], "input 'x' has 17 rows, over the limit of 16 (max_request_rows)"),
        ([1, 13], "input 'x' has 13 tokens per row, over the limit of 12 (max_tokens_per_row)"),
        ([1, 13, 50], "input 'x' has 13 tokens per row, over the limit of 12 (max_tokens_per_row)"),
        ([16, 5], "input 'x' has 16 rows x 5 tokens, over the limit of 64 (max_request_tokens)"),
    ],
)
def test_a_shape_over_a_limit_names_it(shape, message):
    assert _refused(LIMITS.check_shape, "x", shape, None) == _over(
        f"{message}; send a smaller request"
    )


def test_the_values_of_a_rank_1_input_are_bounded_as_tokens():
    limits = RequestLimits(max_request_rows=1000, max_request_tokens=64)
    assert limits.check_shape("x", [64], None) is None
    assert _refused(limits.check_shape, "x", [65], None) == _over(
        "input 'x' declares 65 values, over the limit of 64 (max_request_tokens); send a "
        "smaller request"
    )


def test_a_value_at_a_limit_is_taken_and_one_over_is_refused():
    assert LIMITS.check("max_token_bytes", 40, "a token") is None
    assert _refused(LIMITS.check, "max_token_bytes", 41, "a token") == _over(
        "a token, over the limit of 40 (max_token_bytes); send a smaller request"
    )


def test_token_lists_are_bounded_per_row_in_all_and_per_token():
    for counts, longest in [([], 0), ([12, 3], 40), ([8] * 8, 1)]:
        assert LIMITS.check_token_lists("sentences", counts, longest) is None
    for counts, longest, message in [
        ([3, 13], 1, "has a row of 13 tokens, over the limit of 12 (max_tokens_per_row)"),
        ([11] * 6, 1, "pads to 6 rows x 11 tokens, over the limit of 64 (max_request_tokens)"),
        ([1], 41, "has a 41-byte token, over the limit of 40 (max_token_bytes)"),
    ]:
        assert _refused(LIMITS.check_token_lists, "sentences", counts, longest) == _over(
            f"input 'sentences' {message}; send a smaller request"
        )


def test_body_decoder_bounds_each_piece():
    """A body is decoded a bounded piece at a time (so the limit is checked between pieces,
    never after a bomb is whole), across the bytes as they arrive."""
    body = os.urandom(1000) + b"\0" * (3 * PIECE_BYTES + 5)
    for coding, data in [("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))]:
        decoder, pieces = BodyDecoder(coding), []
        for i in range(0, len(data), 100):
            pieces += decoder.decode(data[i : i + 100])
        decoder.finish()
        assert b"".join(pieces) == body and max(map(len, pieces)) <= PIECE_BYTES
    cut = BodyDecoder("gzip")
    list(cut.decode(gzip.compress(body)[:-8]))
    with pytest.raises(ServingError, match="ends before its end marker") as error:
        cut.finish()
    assert error.value.http_status == 400
    for header in ("br", "gzip, gzip", "compress"):
        with pytest.raises(ServingError, match="is not supported") as error:
            BodyDecoder(header)
        assert error.value.http_status == 415


def test_body_budget_capacity_is_a_positive_integer():
    with pytest.raises(ValueError) as error:
        BodyBudget(0)
    assert str(error.value) == "capacity must be a positive integer, got 0"


def test_body_budget_adds_up_reservations_and_releases_each_once():
    budget = BodyBudget(10)
    first, second = budget.reserve(3), budget.reserve(4)
    assert (first.size, second.size, budget.used) == (3, 4, 7)
    assert first.release() is True and budget.used == 4
    assert first.release() is False and budget.used == 4
    with second:
        pass
    assert second.release() is False and budget.used == 0


def test_body_budget_admits_in_turn():
    budget = BodyBudget(10)
    first = budget.reserve(6)
    assert budget.used == 6 and budget.reserve(6, timeout=0) is None  # no room: not admitted
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        large = pool.submit(budget.reserve, 100)  # over the capacity: takes all of it
        _wait_for(lambda: budget.waiting == 1)
        small = pool.submit(budget.reserve, 1)  # fits, but waits its turn behind the large one
        _wait_for(lambda: budget.waiting == 2)
        assert not large.done() and not small.done()
        first.release()
        first.release()  # twice releases once
        assert large.result(TIMEOUT).size == 10 and budget.used == 10
        assert not small.done()
        large.result().release()
        with small.result(TIMEOUT):
            assert budget.used == 1
    assert budget.used == 0 and budget.waiting == 0


def _wait_for(condition):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_received_bodies_admit_the_first_body_and_free_on_release():
    async def scenario():
        bodies = ReceivedBodies(100)
        first, second = bodies.begin(), bodies.begin()
        await first.take(80, timeout=1.0)
        waiting = asyncio.ensure_future(second.take(40, timeout=5.0))
        await first.take(50, timeout=1.0)  # the first in line goes on past the capacity
        await asyncio.sleep(0.05)
        assert not waiting.done() and bodies.used == 130
        third = bodies.begin()
        with pytest.raises(asyncio.TimeoutError):
            await third.take(40, timeout=0.05)  # no room within its timeout
        third.release()
        first.release()
        first.release()  # twice frees once
        await waiting
        assert bodies.used == 40 and bodies.receiving[0] is second
        second.received()  # whole: out of the line, its bytes still held
        assert bodies.receiving == [] and bodies.used == 40
        second.release()
        assert bodies.used == 0

    asyncio.run(scenario())


def test_written_answers_refuse_past_the_capacity():
    answers = WrittenAnswers(100)
    assert answers.take(500)  # alone, an answer larger than the capacity is written
    assert not answers.take(1)
    answers.give_back(500)
    assert answers.take(60) and answers.take(40) and not answers.take(1)
    answers.give_back(60)
    answers.give_back(40)
    assert (answers.used, answers.answers) == (0, 0)


def test_json_pieces_hold_one_row_at_a_time():
    """json_pieces writes what json.dumps of the whole answer would, with a small fraction of
    its memory (tolist() of 2 M floats alone is ~64 MB of Python objects)."""
    import tracemalloc

    from elmo_tf.serving.tensors import json_pieces, to_json

    values = np.random.default_rng(0).random((64, 32, 1024), np.float32)  # 8 MB
    small = {"predictions": [{"elmo": row, "n": np.int32(3)} for row in values[:2, :2]]}
    whole = {"predictions": [{"elmo": to_json(row), "n": 3} for row in values[:2, :2]]}
    assert "".join(json_pieces(small)) == json.dumps(whole)
    tracemalloc.start()
    try:
        length = sum(len(piece) for piece in json_pieces({"outputs": values}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert length > 20 * values.nbytes // 4  # every float was written
    assert peak < 2_000_000, peak


def _toy_batcher(run, options):
    signature_def = meta_graph_pb2.SignatureDef()
    for key in ("inputs", "outputs"):
        getattr(signature_def, key)["x"].dtype = tf.int32.as_datatype_enum
        getattr(signature_def, key)["x"].tensor_shape.dim.add(size=-1)
    return Batcher(run, SignatureSpec("toy", signature_def), options)


def test_batcher_drops_a_request_whose_client_has_gone():
    """Checked when dequeued: a gone request is not run; a long one stops at the next chunk."""
    entered, release, ran = threading.Event(), threading.Event(), []

    def run(inputs):
        ran.append(inputs["x"].tolist())
        entered.set()
        assert release.wait(TIMEOUT)
        return {"x": inputs["x"]}

    options = BatchingOptions(max_batch_size=2, batch_timeout_micros=0, num_batch_threads=1)
    batcher = _toy_batcher(run, options)
    alive = {"long": True}
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            long = pool.submit(
                batcher.submit, {"x": np.arange(6, dtype=np.int32)}, 6, lambda: alive["long"]
            )
            assert entered.wait(TIMEOUT)  # its first chunk [0, 1] is running
            gone = pool.submit(batcher.submit, {"x": np.array([7], np.int32)}, 1, lambda: False)
            deadline = time.monotonic() + TIMEOUT
            while batcher.queued_rows < 5:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            alive["long"] = False  # the client gives up while its first chunk runs
            release.set()
            for future in (long, gone):
                with pytest.raises(ServingError, match="client is gone") as e:
                    future.result(TIMEOUT)
                assert e.value.code == grpc.StatusCode.CANCELLED
        assert ran == [[0, 1]]  # neither the gone request nor the long one's other chunks ran
        assert batcher.dropped == 2 and batcher.queued_rows == 0
    finally:
        release.set()
        batcher.close()


def test_batcher_serves_a_small_request_between_chunks_of_large_ones():
    """Round robin: a one-row request queued behind two 40-row requests runs in the next batch,
    not after their 20 chunks."""
    gate, order = threading.Event(), []

    def run(inputs):
        assert gate.wait(TIMEOUT)
        order.append(sorted(set(inputs["x"].tolist())))
        return {"x": inputs["x"]}

    options = BatchingOptions(max_batch_size=4, batch_timeout_micros=0, num_batch_threads=1)
    batcher = _toy_batcher(run, options)
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = []
            for value, rows, queued in ((1, 40, 36), (2, 40, 76), (3, 1, 77)):
                x = np.full(rows, value, np.int32)
                futures.append(pool.submit(batcher.submit, {"x": x}, rows))
                deadline = time.monotonic() + TIMEOUT
                while batcher.queued_rows < queued:  # the first chunk waits at the gate
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
            gate.set()
            results = [future.result(TIMEOUT)["x"] for future in futures]
        assert [len(r) for r in results] == [40, 40, 1]
        small = next(i for i, values in enumerate(order) if 3 in values)
        assert small <= 3, order  # within a round of the large ones, not after their 20 chunks
        assert len(order) >= 20
    finally:
        gate.set()
        batcher.close()


def test_whitespace_is_str_split_whitespace():
    assert set(WHITESPACE) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert split_tokens("a\u00a0b\u3000c") == ["a", "b", "c"]


def test_a_code_point_models_text_must_be_utf8():
    """Its graph decodes the text: bytes that are not UTF-8 are refused in one line naming the
    input and the string, before the graph runs (which said only "Graph execution error")."""
    signature_def = meta_graph_pb2.SignatureDef()
    signature_def.inputs["sentences"].dtype = tf.string.as_datatype_enum
    signature_def.inputs["sentences"].tensor_shape.dim.add(size=-1)
    sentences = np.array([b"caf\xc3\xa9 .", b"caf\xe9 ."], dtype=object)
    assert SignatureSpec("default", signature_def).validate({"sentences": sentences}) == 2
    spec = SignatureSpec("default", signature_def, utf8_text=True)
    with pytest.raises(ServingError) as error:
        spec.validate({"sentences": sentences})
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.message == (
        "input 'sentences' must be UTF-8 text for this model, which maps code points "
        "(ELMoForManyLangs'); its string 1 is not (byte 3)"
    )
    assert spec.validate({"sentences": sentences[:1]}) == 1
