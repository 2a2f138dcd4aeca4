"""Object-detection post-processing: TFLite_Detection_PostProcess (custom op) and NON_MAX_SUPPRESSION_V4 / V5.

Semantics from TFLite's detection_postprocess.cc and non_max_suppression.cc (read for meaning, not copied).

TFLite_Detection_PostProcess (SSD models of the TF Object Detection API; the official builtin resolver registers it
as a custom op): decode centre-size box encodings against anchors (in double, rounded to float32 as the official
kernel), then non-max suppression, either *fast* (each anchor ranked by its best class, one NMS, the best
`max_classes_per_detection` classes of each kept anchor) or *regular* (NMS per class, then the best `max_detections`
over all classes). uint8 inputs are dequantized first. Outputs are float32 boxes [1, D, 4], classes [1, D],
scores [1, D] and the count [1], D = max_detections * max_classes_per_detection; rows past the count are zero (the
official fast path leaves them unwritten).

Tie order is part of the result. Candidates above the score threshold are ordered by a stable sort
(base/sort.py's `stable_sort`, as the official `std::stable_sort`); the best classes of an anchor (fast NMS) come
from `std::partial_sort` there, whose order among equal scores is that of libstdc++'s heap select + heap sort,
which `_partial_argsort_desc` reproduces step by step; regular NMS merges each class's selection into the best so
far with a stable merge (the official `std::inplace_merge` on one thread; with more threads the official merge
order depends on scheduling). NON_MAX_SUPPRESSION_V4/V5 pop candidates from a `std::priority_queue` (a binary
heap, libstdc++ push/pop order), reproduced by `_heap_push` / `_heap_pop`.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.sort import adjust_heap, sift_up, stable_sort
from numba import njit

from lite_numba.ops import PrepareContext, kernel

_F0 = np.float32(0.0)

# ------------------------------------------------------------------------------------------------------------------
# sorting in the official order
# ------------------------------------------------------------------------------------------------------------------


_RUN = 16  # insertion-sorted run length of the candidates' stable sort


@njit(cache=True, inline="always")
def _greater(vals, a, b):
    """The order of both sorts here: a before b when its value is larger."""
    return vals[a] > vals[b]


@njit(cache=True, nogil=True)
def _partial_argsort_desc(vals, n, k, idx):
    """idx[:k] = the k largest of vals[:n] by decreasing value, in the order of the official
    DecreasingPartialArgSort: the first maximum for k == 1, else libstdc++ std::partial_sort (heap select, then
    heap sort) over positions 0..n-1."""
    if k <= 0 or n <= 0:
        return
    if k == 1:
        best = 0
        for i in range(1, n):
            if vals[i] > vals[best]:
                best = i
        idx[0] = best
        return
    for i in range(n):
        idx[i] = i
    if k >= 2:  # make_heap over idx[:k]
        parent = (k - 2) // 2
        while True:
            adjust_heap(idx, parent, k, idx[parent], _greater, vals)
            if parent == 0:
                break
            parent -= 1
    for i in range(k, n):  # heap select
        if vals[idx[i]] > vals[idx[0]]:
            value = idx[i]
            idx[i] = idx[0]
            adjust_heap(idx, 0, k, value, _greater, vals)
    last = k  # sort_heap
    while last > 1:
        last -= 1
        value = idx[last]
        idx[last] = idx[0]
        adjust_heap(idx, 0, last, value, _greater, vals)


# ------------------------------------------------------------------------------------------------------------------
# TFLite_Detection_PostProcess
# ------------------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _decode_boxes(enc, anchors, ys, xs, hs, ws, decoded):
    """Centre-size encodings (y, x, h, w) [N, >=4] and anchors [N, 4] (float32) -> corner boxes [N, 4]."""
    for i in range(enc.shape[0]):
        ah = np.float64(anchors[i, 2])
        aw = np.float64(anchors[i, 3])
        yc = np.float32(np.float64(enc[i, 0]) / ys * ah + np.float64(anchors[i, 0]))
        xc = np.float32(np.float64(enc[i, 1]) / xs * aw + np.float64(anchors[i, 1]))
        half_h = np.float32(0.5 * np.exp(np.float64(enc[i, 2]) / hs) * ah)
        half_w = np.float32(0.5 * np.exp(np.float64(enc[i, 3]) / ws) * aw)
        decoded[i, 0] = yc - half_h
        decoded[i, 1] = xc - half_w
        decoded[i, 2] = yc + half_h
        decoded[i, 3] = xc + half_w
        if decoded[i, 0] > decoded[i, 2] or decoded[i, 1] > decoded[i, 3]:
            raise ValueError("TFLite_Detection_PostProcess: a decoded box has ymin > ymax or xmin > xmax "
                             "(negative anchor height or width)")


@njit(cache=True, nogil=True)
def dequantize_u8(q, zero_point, scale, vector_blocks, out):
    """out = (q - zero_point) * scale in float32, rounded once (box encodings and anchors). With vector_blocks the
    class predictions' rounding: the official optimized Dequantize computes whole blocks of 8 as
    float(q) * scale + float(-zero_point * scale), two float32 roundings, and only the tail exactly."""
    s = np.float32(scale)
    n = q.size
    i = 0
    if vector_blocks:
        offset = np.float32(-zero_point * np.float64(s))
        while i + 8 <= n:
            for j in range(i, i + 8):
                out[j] = np.float32(q[j]) * s + offset
            i += 8
    for j in range(i, n):
        out[j] = np.float32(np.int32(q[j]) - np.int32(zero_point)) * s


@njit(cache=True, nogil=True)
def _nms_one_class(decoded, scores, score_thr, iou_thr, max_det, iwork, fwork, active, selected):
    """Greedy NMS over scores[N] >= score_thr: selected[:count] (box indices, best first); returns count.
    iwork: int32 [2N], fwork: float32 [5N] scratch. The kept boxes are sorted (stable, by decreasing score; a NaN
    score is never kept, so the order is strict) and copied with their areas into fwork, so the pairwise loop reads
    consecutive memory; IoU as the official ComputeIntersectionOverUnion (float32, 0 when either area <= 0)."""
    n = scores.shape[0]
    keep_idx = iwork[0:n]
    boxes = fwork[0:4 * n]
    areas = fwork[4 * n:5 * n]
    nk = 0
    for i in range(n):
        if scores[i] >= score_thr:
            keep_idx[nk] = i
            nk += 1
    stable_sort(keep_idx, iwork[n:2 * n], nk, _RUN, _greater, scores)
    for i in range(nk):
        b = keep_idx[i]
        for q in range(4):
            boxes[4 * i + q] = decoded[b, q]
        areas[i] = (decoded[b, 2] - decoded[b, 0]) * (decoded[b, 3] - decoded[b, 1])
        active[i] = 1
    out_size = min(nk, max_det)
    n_active = nk
    n_sel = 0
    for i in range(nk):
        if n_active == 0 or n_sel >= out_size:
            break
        if active[i] == 0:
            continue
        selected[n_sel] = keep_idx[i]
        n_sel += 1
        active[i] = 0
        n_active -= 1
        area_i = areas[i]
        if area_i <= _F0:
            continue  # IoU 0 with everything: suppresses nothing
        y0, x0, y1, x1 = boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3]
        for j in range(i + 1, nk):
            if active[j] == 0 or areas[j] <= _F0:
                continue
            ih = min(y1, boxes[4 * j + 2]) - max(y0, boxes[4 * j])
            iw = min(x1, boxes[4 * j + 3]) - max(x0, boxes[4 * j + 1])
            inter = max(ih, _F0) * max(iw, _F0)
            if inter / (area_i + areas[j] - inter) > iou_thr:
                active[j] = 0
                n_active -= 1
    return n_sel


@njit(cache=True, nogil=True)
def _postprocess_fast(decoded, scores, label_offset, num_classes, max_cls, max_det, score_thr, iou_thr,
                      out_boxes, out_classes, out_scores, out_num, iscratch, fscratch, active):
    """Fast multi-class NMS: every anchor ranked by its best class score, one NMS, the best classes per anchor."""
    n = decoded.shape[0]
    k = min(max_cls, num_classes)
    iwork = iscratch[0:2 * n]
    selected = iscratch[2 * n:3 * n]
    cls_order = iscratch[3 * n:3 * n + num_classes]
    best_cls = iscratch[3 * n + num_classes:3 * n + num_classes + n * k]
    max_scores = fscratch[0:n]
    fwork = fscratch[n:6 * n]
    for r in range(n):
        row = scores[r, label_offset:label_offset + num_classes]
        _partial_argsort_desc(row, num_classes, k, cls_order)
        for c in range(k):
            best_cls[r * k + c] = cls_order[c]
        max_scores[r] = row[cls_order[0]]
    n_sel = _nms_one_class(decoded, max_scores, score_thr, iou_thr, max_det, iwork, fwork, active, selected)
    out_boxes[:] = _F0
    out_classes[:] = _F0
    out_scores[:] = _F0
    for o in range(n_sel):
        s = selected[o]
        for c in range(k):
            slot = max_cls * o + c
            cls = best_cls[s * k + c]
            for q in range(4):
                out_boxes[slot, q] = decoded[s, q]
            out_classes[slot] = np.float32(cls)
            out_scores[slot] = scores[s, label_offset + cls]
    out_num[0] = np.float32(n_sel)


@njit(cache=True, nogil=True)
def _postprocess_regular(decoded, scores, label_offset, num_classes, per_class, max_det, score_thr, iou_thr,
                         out_boxes, out_classes, out_scores, out_num, iscratch, fscratch, active):
    """Regular multi-class NMS: NMS per class (per_class boxes each), each class's selection merged into the best
    max_det so far; the merge is stable (earlier classes first among equal scores), as the official
    std::inplace_merge on one thread."""
    n = decoded.shape[0]
    cbg = scores.shape[1]
    iwork = iscratch[0:2 * n]
    selected = iscratch[2 * n:3 * n]
    merged_idx = iscratch[3 * n:3 * n + max_det]
    new_idx = iscratch[3 * n + max_det:3 * n + 2 * max_det]
    class_scores = fscratch[0:n]
    fwork = fscratch[n:6 * n]
    merged_sc = fscratch[6 * n:6 * n + max_det]
    new_sc = fscratch[6 * n + max_det:6 * n + 2 * max_det]
    size = 0
    for col in range(num_classes):
        for r in range(n):
            class_scores[r] = scores[r, col + label_offset]
        n_sel = _nms_one_class(decoded, class_scores, score_thr, iou_thr, min(per_class, max_det), iwork, fwork,
                               active, selected)
        total = min(size + n_sel, max_det)
        a = 0
        b = 0
        for o in range(total):
            if b < n_sel and (a >= size or class_scores[selected[b]] > merged_sc[a]):
                new_idx[o] = selected[b] * cbg + col + label_offset
                new_sc[o] = class_scores[selected[b]]
                b += 1
            else:
                new_idx[o] = merged_idx[a]
                new_sc[o] = merged_sc[a]
                a += 1
        for o in range(total):
            merged_idx[o] = new_idx[o]
            merged_sc[o] = new_sc[o]
        size = total
    out_boxes[:] = _F0
    out_classes[:] = _F0
    out_scores[:] = _F0
    for o in range(size):
        anchor = merged_idx[o] // cbg
        for q in range(4):
            out_boxes[o, q] = decoded[anchor, q]
        out_classes[o] = np.float32(merged_idx[o] - anchor * cbg - label_offset)
        out_scores[o] = merged_sc[o]
    out_num[0] = np.float32(size)


_DPP_REQUIRED = ("max_detections", "max_classes_per_detection", "nms_score_threshold", "nms_iou_threshold",
                 "num_classes", "y_scale", "x_scale", "h_scale", "w_scale")


def _dpp_init(options) -> dict:
    """The flexbuffer options as the official Init reads them (detections_per_class 100, use_regular_nms false by
    default); problems are reported by prepare, which can name the node."""
    if not isinstance(options, dict):
        return {"error": "custom options are not a flexbuffer map"}
    missing = [k for k in _DPP_REQUIRED if options.get(k) is None]
    if missing:
        return {"error": f"custom options lack {', '.join(missing)}"}
    def f32(key):  # flexbuffer AsFloat: a float32
        return float(np.float32(options[key]))

    per_class = options.get("detections_per_class")
    try:
        state = {
            "max_detections": int(options["max_detections"]),
            "max_classes_per_detection": int(options["max_classes_per_detection"]),
            "detections_per_class": 100 if per_class is None else int(per_class),
            "use_regular_nms": bool(options.get("use_regular_nms") or False),
            "score_threshold": f32("nms_score_threshold"),
            "iou_threshold": f32("nms_iou_threshold"),
            "num_classes": int(options["num_classes"]),
            "scales": tuple(f32(k) for k in ("y_scale", "x_scale", "h_scale", "w_scale")),
        }
    except (TypeError, ValueError) as exc:
        return {"error": f"bad custom option value ({exc})"}
    return state


@kernel("TFLite_Detection_PostProcess", init=_dpp_init)
def DETECTION_POSTPROCESS(ctx: PrepareContext) -> None:
    """Decode SSD box encodings against anchors and select detections by fast or regular NMS."""
    st = ctx.state
    ctx.check("error" not in st, st.get("error", ""))
    ctx.check_num(inputs=3, outputs=4)
    enc, scores, anchors = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(enc.ndim == 3, f"box encodings must have rank 3 [1, boxes, >=4], got {list(enc.shape)}")
    ctx.check(scores.ndim == 3, f"class predictions must have rank 3 [1, boxes, classes], got {list(scores.shape)}")
    ctx.check(anchors.ndim == 2, f"anchors must have rank 2 [boxes, 4], got {list(anchors.shape)}")
    ctx.check(enc.shape[0] == 1 and scores.shape[0] == 1, "only batch size 1 is supported (as the official kernel)")
    n = enc.shape[1]
    ctx.check(enc.shape[2] >= 4, f"box encodings need at least 4 values per box, got {enc.shape[2]}")
    ctx.check(scores.shape[1] == n, f"class predictions cover {scores.shape[1]} boxes, box encodings {n}")
    ctx.check(anchors.shape == (n, 4), f"anchors must have shape [{n}, 4], got {list(anchors.shape)}")
    for t, what in ((enc, "box encodings"), (scores, "class predictions"), (anchors, "anchors")):
        ctx.check(t.dtype in (np.float32, np.uint8),
                  f"{what} have type {t.dtype.name}; the official kernel supports float32 and uint8")
    ctx.check(anchors.dtype == enc.dtype,
              f"anchors ({anchors.dtype.name}) must have the type of the box encodings ({enc.dtype.name})")
    num_classes = st["num_classes"]
    cbg = scores.shape[2]
    ctx.check(num_classes >= 1, f"num_classes must be >= 1, got {num_classes}")
    ctx.check(cbg - num_classes in (0, 1),
              f"class predictions have {cbg} classes; num_classes is {num_classes} (expected {num_classes} or "
              f"{num_classes + 1} with a background class)")
    max_det, max_cls = st["max_detections"], st["max_classes_per_detection"]
    regular = st["use_regular_nms"]
    ctx.check(max_det >= 0, f"max_detections must be >= 0, got {max_det}")
    ctx.check(max_cls > 0 or regular, f"max_classes_per_detection must be > 0, got {max_cls}")
    ctx.check(min(st["detections_per_class"], max_det) > 0 or not regular,
              f"regular NMS needs detections_per_class and max_detections > 0, got {st['detections_per_class']} "
              f"and {max_det}")
    iou = st["iou_threshold"]
    ctx.check(0.0 < iou <= 1.0, f"nms_iou_threshold must be in (0, 1], got {iou}")
    ctx.check(all(s != 0.0 for s in st["scales"]), f"box scales must be non-zero, got {list(st['scales'])}")
    d = max_det * max_cls
    ctx.check(d >= 0, f"max_detections * max_classes_per_detection = {d} is negative")
    boxes_out = ctx.set_output(0, (1, d, 4), np.float32)
    classes_out = ctx.set_output(1, (1, d), np.float32)
    scores_out = ctx.set_output(2, (1, d), np.float32)
    num_out = ctx.set_output(3, (1,), np.float32)

    decoded = ctx.temp((n, 4), np.float32)
    if enc.dtype == np.uint8:
        enc_f = ctx.temp((n, enc.shape[2]), np.float32)
        anchors_f = ctx.temp((n, 4), np.float32)
        ctx.call(dequantize_u8, ctx.view(enc, (enc.size,)), enc.zero_point, float(np.float32(enc.scale)), 0,
                 ctx.view(enc_f, (enc.size,)))
        ctx.call(dequantize_u8, ctx.view(anchors, (anchors.size,)), anchors.zero_point,
                 float(np.float32(anchors.scale)), 0, ctx.view(anchors_f, (anchors.size,)))
    else:
        enc_f, anchors_f = enc, anchors
    ctx.call(_decode_boxes, ctx.view(enc_f, (n, enc.shape[2])), anchors_f, *st["scales"], decoded)
    if scores.dtype == np.uint8:
        scores_f = ctx.temp((n, cbg), np.float32)
        ctx.call(dequantize_u8, ctx.view(scores, (scores.size,)), scores.zero_point,
                 float(np.float32(scores.scale)), 1, ctx.view(scores_f, (scores.size,)))
    else:
        scores_f = scores
    args = (ctx.view(boxes_out, (d, 4)), ctx.view(classes_out, (d,)), ctx.view(scores_out, (d,)), num_out)
    active = ctx.temp((max(n, 1),), np.uint8)
    if regular:
        iscratch = ctx.temp((3 * n + 2 * max_det + 1,), np.int32)
        fscratch = ctx.temp((6 * n + 2 * max_det + 1,), np.float32)
        ctx.call(_postprocess_regular, decoded, ctx.view(scores_f, (n, cbg)), cbg - num_classes, num_classes,
                 st["detections_per_class"], max_det, st["score_threshold"], iou, *args, iscratch, fscratch, active)
    else:
        k = min(max_cls, num_classes)
        iscratch = ctx.temp((3 * n + num_classes + n * k + 1,), np.int32)
        fscratch = ctx.temp((6 * n + 1,), np.float32)
        ctx.call(_postprocess_fast, decoded, ctx.view(scores_f, (n, cbg)), cbg - num_classes, num_classes, max_cls,
                 max_det, st["score_threshold"], iou, *args, iscratch, fscratch, active)


# ------------------------------------------------------------------------------------------------------------------
# NON_MAX_SUPPRESSION_V4 / V5 (float32)
# ------------------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _q_less(score, a, b):
    """The priority queue's order: candidate a below candidate b."""
    return score[a] < score[b]


@njit(cache=True, nogil=True)
def _heap_push(heap, size, score, slot):
    """libstdc++ push_heap of `slot` onto heap[:size] (max-heap by score); returns the new size."""
    sift_up(heap, size, 0, slot, _q_less, score)
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap, size, score):
    """libstdc++ pop_heap of heap[:size]: the top moves to heap[size - 1]; returns the new size."""
    if size > 1:
        last = size - 1
        value = heap[last]
        heap[last] = heap[0]
        adjust_heap(heap, 0, last, value, _q_less, score)
    return size - 1


@njit(cache=True, nogil=True, inline="always")
def _box_iou(b, i, j):
    """IoU of boxes i and j of b [N, 4] given by any two opposite corners, float32; 0 when either area <= 0."""
    iy0, iy1 = min(b[i, 0], b[i, 2]), max(b[i, 0], b[i, 2])
    ix0, ix1 = min(b[i, 1], b[i, 3]), max(b[i, 1], b[i, 3])
    jy0, jy1 = min(b[j, 0], b[j, 2]), max(b[j, 0], b[j, 2])
    jx0, jx1 = min(b[j, 1], b[j, 3]), max(b[j, 1], b[j, 3])
    area_i = (iy1 - iy0) * (ix1 - ix0)
    area_j = (jy1 - jy0) * (jx1 - jx0)
    if area_i <= _F0 or area_j <= _F0:
        return _F0
    inter = max(min(iy1, jy1) - max(iy0, jy0), _F0) * max(min(ix1, jx1) - max(ix0, jx0), _F0)
    union = area_i + area_j - inter
    if union == _F0:
        return _F0
    return inter / union


@njit(cache=True, nogil=True)
def nms_float(n, boxes, scores, iou_thr_t, score_thr_t, sigma_t, max_out, selected, selected_scores, with_scores,
              num_selected, heap, cand_index, cand_score, cand_begin):
    """(Soft-)NMS over boxes [n, 4] and scores [n]: selected[:max_out] (then zeros), selected_scores[:max_out] when
    with_scores (V5), num_selected [1]. sigma_t holds 0 for V4."""
    iou_thr = iou_thr_t[0]
    score_thr = score_thr_t[0]
    sigma = sigma_t[0]
    if sigma < _F0:
        raise ValueError("NON_MAX_SUPPRESSION_V5: soft_nms_sigma must be >= 0")
    size = 0
    for i in range(n):
        if scores[i] > score_thr:
            cand_index[i] = i
            cand_score[i] = scores[i]
            cand_begin[i] = 0
            size = _heap_push(heap, size, cand_score, i)
    n_sel = 0
    num_out = min(size, max_out)
    scale = np.float32(-0.5) / sigma if sigma > _F0 else _F0
    while n_sel < num_out and size > 0:
        slot = heap[0]
        size = _heap_pop(heap, size, cand_score)
        original = cand_score[slot]
        hard = False
        j = n_sel - 1
        while j >= cand_begin[slot]:
            iou = _box_iou(boxes, cand_index[slot], selected[j])
            if iou >= iou_thr:
                hard = True
                break
            if sigma > _F0:
                cand_score[slot] = cand_score[slot] * np.float32(np.exp(scale * iou * iou))
            if cand_score[slot] <= score_thr:
                break
            j -= 1
        cand_begin[slot] = n_sel
        if not hard:
            if cand_score[slot] == original:
                selected[n_sel] = cand_index[slot]
                if with_scores:
                    selected_scores[n_sel] = cand_score[slot]
                n_sel += 1
            if cand_score[slot] > score_thr:
                size = _heap_push(heap, size, cand_score, slot)
    for i in range(n_sel, max_out):
        selected[i] = 0
        if with_scores:
            selected_scores[i] = _F0
    num_selected[0] = n_sel


def _nms_prepare(ctx: PrepareContext, soft: bool) -> None:
    ctx.check_num(inputs=6 if soft else 5, outputs=3 if soft else 2)
    boxes, scores, max_t = ctx.input(0), ctx.input(1), ctx.input(2)
    iou_t, score_t = ctx.input(3), ctx.input(4)
    ctx.check(boxes.dtype == np.float32,
              f"boxes have type {boxes.dtype.name}; only float32 non-max suppression is implemented")
    ctx.check(boxes.ndim == 2 and boxes.shape[1] == 4, f"boxes must have shape [boxes, 4], got {list(boxes.shape)}")
    n = boxes.shape[0]
    ctx.check(scores.dtype == np.float32, f"scores have type {scores.dtype.name}, expected float32")
    ctx.check(scores.shape == (n,), f"scores must have shape [{n}], got {list(scores.shape)}")
    ctx.check(max_t.dtype == np.int32 and max_t.ndim == 0,
              f"max_output_size must be an int32 scalar, got {max_t.dtype.name} {list(max_t.shape)}")
    scalars = [(iou_t, "iou_threshold"), (score_t, "score_threshold")]
    if soft:
        scalars.append((ctx.input(5), "soft_nms_sigma"))
    for t, what in scalars:
        ctx.check(t.dtype == np.float32 and t.ndim == 0,
                  f"{what} must be a float32 scalar, got {t.dtype.name} {list(t.shape)}")
    max_out = int(np.asarray(ctx.value(2)).reshape(-1)[0])
    ctx.check(max_out >= 0, f"max_output_size must be >= 0, got {max_out}")
    sel = ctx.set_output(0, (max_out,), np.int32)
    if soft:
        sel_scores = ctx.set_output(1, (max_out,), np.float32)
        num = ctx.set_output(2, (), np.int32)
        sigma = ctx.input(5)
    else:
        num = ctx.set_output(1, (), np.int32)
        sel_scores = None
        sigma = np.zeros(1, np.float32)
    if max_out == 0:  # nothing to write but the count (empty outputs are not passed to kernels)
        sel = np.zeros(1, np.int32)
    if sel_scores is None or max_out == 0:
        sel_scores = np.zeros(1, np.float32)
    m = max(n, 1)
    heap = ctx.temp((m,), np.int32)
    cand_index = ctx.temp((m,), np.int32)
    cand_score = ctx.temp((m,), np.float32)
    cand_begin = ctx.temp((m,), np.int32)
    ctx.call(nms_float, n, boxes if n else np.zeros((1, 4), np.float32), scores if n else np.zeros(1, np.float32),
             iou_t, score_t, sigma, max_out, sel, sel_scores, int(soft and max_out > 0), num, heap, cand_index,
             cand_score, cand_begin)


@kernel("NON_MAX_SUPPRESSION_V4")
def NON_MAX_SUPPRESSION_V4(ctx: PrepareContext) -> None:
    """Greedy NMS: selected_indices padded with zeros to max_output_size, and their count."""
    _nms_prepare(ctx, soft=False)


@kernel("NON_MAX_SUPPRESSION_V5")
def NON_MAX_SUPPRESSION_V5(ctx: PrepareContext) -> None:
    """Soft-NMS (Gaussian, sigma input): selected indices and their decayed scores, padded, and their count."""
    _nms_prepare(ctx, soft=True)


__all__ = ["DETECTION_POSTPROCESS", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5"]
