#!/usr/bin/env python
"""Deployment forms: PyTorch fp32 vs ONNX fp32 vs ONNX INT8 (static, as published) for the default
MLP at two sizes, plus dynamic INT8 for the static-vs-dynamic choice (trainer/export.py).

For each form: file size, accuracy and ROC AUC on a held-out set, and p50/p99 latency scoring
one row and 1024 rows *from a raw DataFrame* (what a model service does: PyTorch's
``predict_proba`` with its ``encode``; ONNX through ``OnnxScorer.predict`` with its ``feeds``),
and the model alone at batch 1 (inputs already converted: tensors / feeds). One thread for every
runtime. Ratios against PyTorch measured in the same run.
Goals (issue 13): INT8 keeps >= 98 % of fp32 accuracy and is >= 2x faster than PyTorch at batch 1.

    python bench/bench_export.py            # two sizes, 20k training rows (about a minute)
    python bench/bench_export.py --quick    # scaled down (seconds)
"""
from __future__ import annotations

import argparse
import io
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, no install needed

import torch  # noqa: E402

from monitor.config import load_config  # noqa: E402
from monitor.onnx_scoring import OnnxScorer, feeds  # noqa: E402
from trainer.build import build_model  # noqa: E402
from trainer.forms import latency  # noqa: E402
from trainer.export import features_of, to_int8, to_onnx  # noqa: E402
from trainer.loop import LoopConfig  # noqa: E402
from trainer.metrics import binary_metrics  # noqa: E402
from trainer.runs import fit_frames  # noqa: E402
from trainer.synthetic import make_dataset  # noqa: E402


def dynamic_int8(fp32: bytes) -> bytes:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "m.onnx", Path(tmp) / "d.onnx"
        src.write_bytes(fp32)
        quantize_dynamic(str(src), str(dst), per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["Gemm", "MatMul"])
        return dst.read_bytes()


def bench_size(hidden: list[int], rows: int, epochs: int, repeats: int, home: Path) -> list[dict]:
    cfg = load_config(path=None, environ={}, overrides={
        "home": str(home), "training": {"hidden": hidden, "epochs": epochs, "progress": False, "threads": 1}})
    train, test = make_dataset(rows, seed=1), make_dataset(20000 if rows > 5000 else 4000, seed=2)
    model = build_model(cfg, train)
    cut = int(len(train) * 0.8)
    fit_frames(model, train.iloc[:cut], train.iloc[cut:], "label", LoopConfig.from_training(cfg.training),
               checkpoint_path=home / f"bench-{hidden[0]}.pt", resume=False)
    model.eval()
    reference = train.sample(n=min(5000, len(train)), random_state=0)
    fp32 = to_onnx(model, reference)
    features = features_of(model)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    one, batch = test.head(1), test.head(1024)
    x_num, x_cat = model.encode(one)

    @torch.no_grad()
    def torch_alone(_):
        return torch.sigmoid(model(x_num, x_cat))

    forms = {"torch fp32": (buffer.getbuffer().nbytes, model.predict_proba, torch_alone),
             }
    for name, data in (("onnx fp32", fp32), ("onnx int8 static", to_int8(fp32, reference, features)),
                       ("onnx int8 dynamic", dynamic_int8(fp32))):
        scorer = OnnxScorer(data, {"features": features})
        inputs = feeds(one, features)
        forms[name] = (len(data), scorer.predict, lambda _, s=scorer, i=inputs: s.predict_feeds(i))
    out = []
    y = test["label"].to_numpy()
    for name, (size, score, alone) in forms.items():
        m = binary_metrics(y, score(test))
        p50_1, p99_1 = latency(score, one, repeats)
        p50_b, p99_b = latency(score, batch, max(5, repeats // 20))
        alone50, _ = latency(alone, one, repeats)
        out.append({"hidden": "x".join(map(str, hidden)), "form": name, "size_kb": size / 1024,
                    "accuracy": m["accuracy"], "roc_auc": m["roc_auc"], "p50_1": p50_1, "p99_1": p99_1,
                    "p50_1024": p50_b, "p99_1024": p99_b, "alone_p50_1": alone50})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small data, few repeats")
    ap.add_argument("--sizes", default="64,32;512,256", help="hidden widths per size, ';' between sizes")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the quantizer's advice on the root logger
    torch.set_num_threads(1)
    rows, epochs, repeats = (4000, 5, 200) if args.quick else (20000, 15, 2000)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(";"):
            results += bench_size([int(w) for w in size.split(",")], rows, epochs, repeats, Path(tmp))
    print(f"\n{'hidden':>8} {'form':<18} {'size KB':>8} {'acc':>7} {'AUC':>7} {'p50 1':>8} {'p99 1':>8} "
          f"{'p50 1024':>9} {'p99 1024':>9} {'alone 1':>8}   (latency in ms; 'alone': model only, batch 1)")
    for r in results:
        print(f"{r['hidden']:>8} {r['form']:<18} {r['size_kb']:8.1f} {r['accuracy']:7.4f} {r['roc_auc']:7.4f} "
              f"{r['p50_1']:8.4f} {r['p99_1']:8.4f} {r['p50_1024']:9.3f} {r['p99_1024']:9.3f} {r['alone_p50_1']:8.4f}")
    print()
    for hidden in dict.fromkeys(r["hidden"] for r in results):
        by = {r["form"]: r for r in results if r["hidden"] == hidden}
        t, q = by["torch fp32"], by["onnx int8 static"]
        print(f"{hidden}: INT8/torch accuracy {q['accuracy'] / t['accuracy']:.4f} (goal >= 0.98); "
              f"torch/INT8 p50 latency batch 1 {t['p50_1'] / q['p50_1']:.2f}x (goal >= 2x), "
              f"batch 1024 {t['p50_1024'] / q['p50_1024']:.2f}x, "
              f"model alone {t['alone_p50_1'] / q['alone_p50_1']:.2f}x; "
              f"size torch/INT8 {t['size_kb'] / q['size_kb']:.2f}x, fp32 ONNX/INT8 "
              f"{by['onnx fp32']['size_kb'] / q['size_kb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
