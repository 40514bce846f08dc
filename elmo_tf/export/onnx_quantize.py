"""An ONNX export with int8 weights (``elmo-tf export onnx OUTPUT --precision int8``), made by
ONNX Runtime's own dynamic quantisation.

What the file holds: every ``MatMul`` whose weight is a constant, those inside the biLSTM's
``Loop`` bodies included (the recurrent and projection kernels, read every step), becomes
``DynamicQuantizeLinear`` + ``MatMulInteger``: int8 weights with one scale per output column
(per channel: the four gates' blocks of the LSTM kernel have different ranges), activations
quantised to uint8 at every call from their own range. ONNX Runtime runs them as its fused
``DynamicQuantizeMatMul`` (u8 x s8; VNNI where the CPU has it). The character CNN's ``Conv``
stays float32 (ONNX Runtime's ``ConvInteger`` has no fast kernel). The file keeps the float
export's contract (``onnx_export``: the input, the outputs, built-in operators of the default
domain, the ``elmo_tf.options`` and ``elmo_tf.version`` metadata); its numbers move from the
float file's by what docs/performance.md ("Reduced precision") measures.

How, and why each step: the export's LSTM kernels are slices of the stored kernel, computed
when ONNX Runtime loads the file, and the quantiser skips a ``MatMul`` whose weight is not a
constant. So the file is first folded by ONNX Runtime at its basic level (its own constant
folding, built-in operators only), with ``MatMulAddFusion`` off: that fusion makes ``x W + b``
a ``Gemm``, which dynamic quantisation does not cover. ``quantize_dynamic`` with
``EnableSubgraph`` then quantises the ``Loop`` bodies too; it reads their weights from the
enclosing graph, where the export puts them (``loop_invariants_from_outer_scope``).
"""

import contextlib
import logging
import os
import tempfile

from elmo_tf.export import onnx_graph
from elmo_tf.export.onnx_contract import PRECISION_KEY
from elmo_tf.system import extras, native_logs

# The quantiser's settings (onnxruntime.quantization.quantize_dynamic), in one place.
OP_TYPES = ("MatMul",)
PER_CHANNEL = True
# 8-bit weights: CPUs with VNNI (or Arm) multiply u8 x s8 without the 16-bit saturation that
# ONNX Runtime's reduce_range (7-bit weights) works around on AVX2/AVX-512 without VNNI.
REDUCE_RANGE = False
FOLDING_DISABLED = ("MatMulAddFusion",)


def quantize_int8(model_proto):
    """``model_proto`` (a float32 ELMo export, ``onnx_export.onnx_model``) with int8 weights:
    a new, checked ``onnx.ModelProto`` (this module's docstring)."""
    extras.require("onnx", "elmo_tf.export.onnx_quantize", modules=("onnxruntime", "onnx"))
    import onnx  # lazy: the [onnx] extra
    import onnxruntime  # lazy: the [onnx] extra
    from onnxruntime.quantization import QuantType, quantize_dynamic  # lazy: likewise

    with tempfile.TemporaryDirectory(prefix="elmo-onnx-int8-") as directory:
        folded = os.path.join(directory, "folded.onnx")
        quantized = os.path.join(directory, "int8.onnx")
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        options.log_severity_level = 3
        with native_logs.quiet():
            onnxruntime.InferenceSession(
                model_proto.SerializeToString(),
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=list(FOLDING_DISABLED),
            )
        with _quantiser_advice_off():
            quantize_dynamic(
                folded,
                quantized,
                op_types_to_quantize=list(OP_TYPES),
                per_channel=PER_CHANNEL,
                reduce_range=REDUCE_RANGE,
                weight_type=QuantType.QInt8,
                extra_options={"EnableSubgraph": True},
            )
        result = onnx.load(quantized)
    # The quantiser sorts each graph by its nodes' own inputs; a Loop also reads values of
    # the enclosing graph from its body (loop_invariants_from_outer_scope), which must come
    # first too.
    onnx_graph.sort_topologically(result.graph)
    onnx_graph.keep_used_domains(result)
    result.producer_name = model_proto.producer_name
    result.producer_version = model_proto.producer_version
    metadata = {p.key: p.value for p in model_proto.metadata_props}
    onnx.helper.set_model_props(result, {**metadata, PRECISION_KEY: "int8"})
    unknown = onnx_graph.non_standard_operators(result)
    if unknown:
        raise RuntimeError(f"the quantised model needs operators outside ONNX {unknown}")
    if quantized_matmuls(result) == 0:
        raise RuntimeError("the quantiser left every MatMul in float32")
    onnx.checker.check_model(result, full_check=True)
    return result


def quantized_matmuls(model_proto):
    """How many ``MatMulInteger`` nodes the model holds, in its ``Loop`` bodies too."""
    counts = onnx_graph.op_counts(model_proto).values()
    return sum(graph.get("MatMulInteger", 0) for graph in counts)


@contextlib.contextmanager
def _quantiser_advice_off():
    """The quantiser logs, on the root logger, advice to run its pre-processing (shape
    inference and ONNX Runtime's optimiser), which ``quantize_int8`` replaces with its own
    folding; that one record is dropped within the block, every other passes."""

    def advice(record):
        return "pre-processing before quantization" not in record.getMessage()

    root = logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)
