"""TFLite_Detection_PostProcess and NON_MAX_SUPPRESSION_V4/V5 (kernels/signal/detection.py) against the official
runtime.

Scores are drawn from a few levels so that ties are common: the tie order (stable sort, libstdc++ partial_sort and
priority queue) is part of the official result. The official fast post-process leaves output rows past the
detection count unwritten (arena garbage), so only the rows it writes are compared; ours are zero there.
"""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_official, run_ours

require_official()

DPP = "TFLite_Detection_PostProcess"


def _dpp_model(n, cbg, opts, box_dtype=np.float32, score_dtype=np.float32, enc_len=4, const_anchors=None,
               box_q=None, anchor_q=None, score_q=None) -> bytes:
    b = ModelBuilder()
    enc = b.add_input("box_encodings", box_dtype, [1, n, enc_len], quant=box_q)
    sc = b.add_input("class_predictions", score_dtype, [1, n, cbg], quant=score_q)
    if const_anchors is None:
        an = b.add_input("anchors", box_dtype, [n, 4], quant=anchor_q)
    else:
        an = b.add_const("anchors", const_anchors, quant=anchor_q)
    d = opts["max_detections"] * opts["max_classes_per_detection"]
    outs = [b.add_tensor("boxes", np.float32, [1, d, 4]), b.add_tensor("classes", np.float32, [1, d]),
            b.add_tensor("scores", np.float32, [1, d]), b.add_tensor("num", np.float32, [1])]
    b.add_custom_op(DPP, [enc, sc, an], outs, options=opts)
    for o in outs:
        b.mark_output(o)
    return b.build()


def _opts(**kw) -> dict:
    o = dict(max_detections=10, max_classes_per_detection=1, detections_per_class=100, use_regular_nms=False,
             nms_score_threshold=0.3, nms_iou_threshold=0.5, num_classes=3, y_scale=10.0, x_scale=10.0,
             h_scale=5.0, w_scale=5.0)
    o.update(kw)
    return o


def _dpp_data(rng, n, cbg, levels=5, enc_len=4):
    enc = (rng.standard_normal((1, n, enc_len)) * 2).astype(np.float32)
    scores = (rng.integers(0, levels, (1, n, cbg)) / (levels - 1)).astype(np.float32)
    centres = rng.random((n, 2)) * 0.8 + 0.1
    sizes = rng.random((n, 2)) * 0.3 + 0.05
    anchors = np.concatenate([centres, sizes], 1).astype(np.float32)
    return enc, scores, anchors


def _compare_dpp(ref, got, opts, score_tol=0.0):
    """Compare the rows the official kernel writes; ours must be zero elsewhere."""
    n = int(ref[3][0])
    assert got[3][0] == n
    d = opts["max_detections"] * opts["max_classes_per_detection"]
    if opts["use_regular_nms"]:
        valid = np.arange(d) < opts["max_detections"]  # regular NMS writes max_detections rows (zeros past n)
    else:
        k = min(opts["max_classes_per_detection"], opts["num_classes"])
        slot = np.arange(d)
        valid = (slot // opts["max_classes_per_detection"] < n) & (slot % opts["max_classes_per_detection"] < k)
    np.testing.assert_array_equal(got[1][0][valid], ref[1][0][valid])  # classes
    assert_close(got[2][0][valid], ref[2][0][valid], tol=score_tol)  # scores
    np.testing.assert_array_equal(got[0][0][valid], ref[0][0][valid])  # decoded boxes (double maths, bit-exact)
    assert not got[0][0][~valid].any() and not got[1][0][~valid].any() and not got[2][0][~valid].any()


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
@pytest.mark.parametrize("seed", range(12))
def test_detection_postprocess_float(seed, regular):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    num_classes = int(rng.integers(1, 7))
    cbg = num_classes + int(rng.integers(0, 2))
    opts = _opts(max_detections=int(rng.integers(1, 15)), max_classes_per_detection=int(rng.integers(1, 5)),
                 detections_per_class=int(rng.integers(1, 6)), use_regular_nms=regular,
                 nms_score_threshold=float(rng.choice([0.0, 0.2, 0.5, 0.75])),
                 nms_iou_threshold=float(rng.choice([0.1, 0.4, 0.6, 1.0])), num_classes=num_classes,
                 y_scale=float(rng.choice([10.0, 1.0])), h_scale=float(rng.choice([5.0, 2.0])))
    enc, scores, anchors = _dpp_data(rng, n, cbg, levels=int(rng.integers(2, 8)), enc_len=int(rng.choice([4, 6])))
    model = _dpp_model(n, cbg, opts, enc_len=enc.shape[2])
    _compare_dpp(run_official(model, [enc, scores, anchors]), run_ours(model, [enc, scores, anchors]), opts)


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
@pytest.mark.parametrize("seed", range(4))
def test_detection_postprocess_uint8(seed, regular):
    """uint8 encodings, anchors (constant, as in converted SSD models) and scores, each with its own quantization."""
    rng = np.random.default_rng(100 + seed)
    n, num_classes = int(rng.integers(5, 50)), int(rng.integers(1, 5))
    cbg = num_classes + 1
    opts = _opts(max_detections=int(rng.integers(1, 12)), max_classes_per_detection=int(rng.integers(1, 4)),
                 detections_per_class=int(rng.integers(1, 5)), use_regular_nms=regular,
                 nms_score_threshold=0.25, num_classes=num_classes)
    enc = rng.integers(0, 256, (1, n, 4)).astype(np.uint8)
    scores = rng.choice(np.array([0, 60, 128, 200, 255], np.uint8), (1, n, cbg))
    anchors = np.concatenate([rng.integers(20, 230, (n, 2)), rng.integers(8, 80, (n, 2))], 1).astype(np.uint8)
    model = _dpp_model(n, cbg, opts, np.uint8, np.uint8, const_anchors=anchors, box_q=(0.0731, 131),
                       anchor_q=(0.0039215, 0), score_q=(0.00390625, 0))
    _compare_dpp(run_official(model, [enc, scores]), run_ours(model, [enc, scores]), opts)


def test_detection_postprocess_float_boxes_uint8_scores():
    rng = np.random.default_rng(7)
    n, cbg = 30, 4
    opts = _opts(max_detections=6, max_classes_per_detection=2)
    enc, _, anchors = _dpp_data(rng, n, cbg)
    scores = rng.integers(0, 256, (1, n, cbg)).astype(np.uint8)
    model = _dpp_model(n, cbg, opts, score_dtype=np.uint8, score_q=(0.0123, 17))
    _compare_dpp(run_official(model, [enc, scores, anchors]), run_ours(model, [enc, scores, anchors]), opts)


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_detection_postprocess_edge_cases(regular):
    """All-equal scores, zero-area boxes (anchors of zero height/width), everything below the threshold, more
    max_detections than candidates."""
    rng = np.random.default_rng(3)
    n, cbg = 16, 3
    enc, scores, anchors = _dpp_data(rng, n, cbg)
    anchors[::3, 2] = 0.0  # zero-height boxes: IoU 0 with everything
    anchors[1::4, 3] = 0.0
    cases = [
        (_opts(use_regular_nms=regular, num_classes=2, max_detections=40, max_classes_per_detection=3,
               nms_score_threshold=0.0), np.full_like(scores, 0.5)),
        (_opts(use_regular_nms=regular, num_classes=3, max_detections=5, nms_score_threshold=1.5), scores),
        (_opts(use_regular_nms=regular, num_classes=3, max_detections=50, max_classes_per_detection=2,
               detections_per_class=100, nms_iou_threshold=1.0), scores),
    ]
    for opts, sc in cases:
        model = _dpp_model(n, cbg, opts)
        _compare_dpp(run_official(model, [enc, sc, anchors]), run_ours(model, [enc, sc, anchors]), opts)


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_detection_postprocess_ssd_head(regular):
    """An SSD MobileNet-sized head as the converter writes it: logits -> LOGISTIC -> post-process, constant anchors
    (1917 boxes, 90 classes + background), resolved by the builtin resolver as in the official runtime."""
    from lite_numba.runtime.resolver import BuiltinOpResolver

    rng = np.random.default_rng(11)
    n, cbg = 1917, 91
    enc, _, anchors = _dpp_data(rng, n, cbg)
    logits = (rng.standard_normal((1, n, cbg)) * 2 - 4).astype(np.float32)
    opts = _opts(max_detections=10, max_classes_per_detection=1, use_regular_nms=regular,
                 nms_score_threshold=1e-8, nms_iou_threshold=0.6, num_classes=90)
    b = ModelBuilder()
    e = b.add_input("raw_outputs/box_encodings", np.float32, [1, n, 4])
    lg = b.add_input("raw_outputs/class_predictions", np.float32, [1, n, cbg])
    sc = b.add_tensor("scores", np.float32, [1, n, cbg])
    b.add_op("LOGISTIC", [lg], [sc])
    outs = [b.add_tensor("TFLite_Detection_PostProcess", np.float32, [1, 10, 4]),
            b.add_tensor("TFLite_Detection_PostProcess:1", np.float32, [1, 10]),
            b.add_tensor("TFLite_Detection_PostProcess:2", np.float32, [1, 10]),
            b.add_tensor("TFLite_Detection_PostProcess:3", np.float32, [1])]
    b.add_custom_op(DPP, [e, sc, b.add_const("anchors", anchors)], outs, options=opts)
    for o in outs:
        b.mark_output(o)
    model = b.build()
    ref = run_official(model, [enc, logits])
    it = Interpreter(model_content=model, op_resolver=BuiltinOpResolver())
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), (enc, logits)):
        it.set_tensor(d["index"], v)
    it.invoke()
    got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    assert ref[3][0] == 10
    _compare_dpp(ref, got, opts, score_tol=1e-6)  # LOGISTIC may differ from the official one in the last bit


def _prepare_error(model: bytes, match: str):
    it = Interpreter(model_content=model)
    with pytest.raises(ValueError, match=match):
        it.allocate_tensors()


def test_detection_postprocess_errors():
    _prepare_error(_dpp_model(4, 3, _opts(nms_iou_threshold=0.0)), r"TFLite_Detection_PostProcess.*nms_iou")
    _prepare_error(_dpp_model(4, 5, _opts(num_classes=3)), r"class predictions have 5 classes")
    _prepare_error(_dpp_model(4, 3, _opts(), np.int8, np.int8, box_q=(0.1, 0), anchor_q=(0.1, 0),
                              score_q=(0.1, 0)), "int8.*float32 and uint8")
    _prepare_error(_dpp_model(4, 3, _opts(use_regular_nms=True, max_detections=0)), "regular NMS needs")
    opts = _opts()
    del opts["y_scale"]
    _prepare_error(_dpp_model(4, 3, opts), "lack y_scale")


def test_detection_postprocess_negative_anchor_fails_at_invoke():
    enc, scores, anchors = _dpp_data(np.random.default_rng(0), 4, 3)
    anchors[2, 2] = -0.1
    it = Interpreter(model_content=_dpp_model(4, 3, _opts()))
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), (enc, scores, anchors)):
        it.set_tensor(d["index"], v)
    with pytest.raises(Exception, match="ymin > ymax"):
        it.invoke()


# ------------------------------------------------------------------------------------------------------------------
# NON_MAX_SUPPRESSION_V4 / V5
# ------------------------------------------------------------------------------------------------------------------


def _nms_model(n, max_out, iou, score_thr, sigma=None, const_max=True) -> bytes:
    b = ModelBuilder()
    boxes = b.add_input("boxes", np.float32, [n, 4])
    scores = b.add_input("scores", np.float32, [n])
    if const_max:
        m = b.add_const("max_output_size", np.array(max_out, np.int32))
    else:
        m = b.add_input("max_output_size", np.int32, [])
    ins = [boxes, scores, m, b.add_const("iou_threshold", np.array(iou, np.float32)),
           b.add_const("score_threshold", np.array(score_thr, np.float32))]
    sel = b.add_tensor("selected_indices", np.int32, [max_out])
    if sigma is None:
        outs = [sel, b.add_tensor("num", np.int32, [])]
        b.add_op("NON_MAX_SUPPRESSION_V4", ins, outs)
    else:
        ins.append(b.add_const("soft_nms_sigma", np.array(sigma, np.float32)))
        outs = [sel, b.add_tensor("selected_scores", np.float32, [max_out]), b.add_tensor("num", np.int32, [])]
        b.add_op("NON_MAX_SUPPRESSION_V5", ins, outs)
    for o in outs:
        b.mark_output(o)
    return b.build()


def _nms_data(rng, n, levels):
    corners = rng.random((n, 4)).astype(np.float32)  # any two opposite corners, in either order
    scores = (rng.integers(0, levels, n) / (levels - 1)).astype(np.float32)
    return corners, scores


@pytest.mark.parametrize("version", ["V4", "V5", "V5soft"])
@pytest.mark.parametrize("seed", range(10))
def test_non_max_suppression(seed, version):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 60))
    boxes, scores = _nms_data(rng, n, int(rng.integers(2, 9)))
    flat = rng.random(n) < 0.15
    boxes[flat, 2] = boxes[flat, 0]  # zero-height boxes
    max_out = int(rng.integers(0, n + 4))
    iou = float(rng.choice([0.0, 0.3, 0.5, 0.7, 1.0]))
    score_thr = float(rng.choice([-np.inf, 0.0, 0.3, 0.6]))
    sigma = None if version == "V4" else (0.0 if version == "V5" else float(rng.choice([0.1, 0.5, 2.0])))
    model = _nms_model(n, max_out, iou, score_thr, sigma)
    ref, got = run_official(model, [boxes, scores]), run_ours(model, [boxes, scores])
    assert got[-1] == ref[-1]
    np.testing.assert_array_equal(got[0], ref[0])
    if sigma is not None:
        assert_close(got[1], ref[1], tol=1e-6)


def test_non_max_suppression_runtime_max_output_size():
    rng = np.random.default_rng(5)
    boxes, scores = _nms_data(rng, 20, 4)
    for max_out in (0, 3, 25):
        model = _nms_model(20, max_out, 0.5, 0.1, const_max=False)
        inputs = [boxes, scores, np.array(max_out, np.int32)]
        ref, got = run_official(model, inputs), run_ours(model, inputs)
        assert got[1] == ref[1]
        np.testing.assert_array_equal(got[0], ref[0])


def test_non_max_suppression_everything_below_threshold():
    rng = np.random.default_rng(6)
    boxes, scores = _nms_data(rng, 8, 4)
    model = _nms_model(8, 5, 0.5, 2.0, sigma=0.5)
    ref, got = run_official(model, [boxes, scores]), run_ours(model, [boxes, scores])
    assert got[2] == ref[2] == 0
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


def test_registry_custom_rows_resolve():
    """The custom ops registered by default (registry CUSTOMS) name real kernels of the same name."""
    from lite_numba.kernels.registry import CUSTOMS

    from lite_numba.runtime.resolver import BuiltinOpResolver

    resolver = BuiltinOpResolver()
    for name, lo, hi, k in CUSTOMS:
        assert lo <= hi and k.name == name
        assert resolver.find_custom(name, lo) is k
