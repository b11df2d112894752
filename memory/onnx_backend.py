"""ONNX Runtime int8 embedding backend (``MNEMO_EMBEDDING_BACKEND=onnx-int8``).

The ONNX graph is exported locally from the same sentence-transformers folder the torch
backend loads (no hub, no download), quantised with ONNX Runtime's dynamic int8
quantisation (per-channel weight scales), and cached under ``VAR_DIR/onnx/``. Pooling
(mean over the attention mask) and L2 normalisation are done here, as the model's own
modules.json asks.

sentence-transformers' built-in ``backend="onnx"`` needs ``optimum-onnx``, whose current
release pins ``transformers<5`` and would downgrade the version sentence-transformers 6
requires; exporting with ``torch.onnx`` avoids that dependency.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _fingerprint(model_dir: Path) -> str:
    h = hashlib.sha256(str(model_dir.resolve()).encode())
    for name in ("config.json", "model.safetensors"):
        path = model_dir / name
        if path.exists():
            h.update(str(path.stat().st_size).encode())
            with open(path, "rb") as f:
                h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def export_int8(model_dir: Path, cache_dir: Path, *, quantise: bool = True) -> Path:
    """The ONNX file for ``model_dir``: int8 (quantised) or, with ``quantise=False``,
    the plain float32 export (same weights as torch). Exported once and cached."""
    # Per-channel weight scales (one per output column, not one per tensor): the same
    # speed, and vectors much closer to float32's (minimum cosine over 50 queries
    # 0.994 against 0.969 per tensor; docs/benchmarks.md, session 14). The file name
    # changed with it, so a cache of the per-tensor export is not reused.
    name = "model_int8_pc.onnx" if quantise else "model_fp32.onnx"
    target = cache_dir / _fingerprint(model_dir) / name
    if target.exists():
        return target
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    sample = tok(["an example sentence"], return_tensors="pt")

    class Encoder(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self, input_ids: Any, attention_mask: Any, token_type_ids: Any
        ) -> Any:
            return self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state

    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        fp32 = Path(tmp) / "model.onnx"
        axes = {n: {0: "batch", 1: "seq"} for n in (*INPUTS, "last_hidden_state")}
        torch.onnx.export(
            Encoder(model),
            tuple(sample[n] for n in INPUTS),
            str(fp32),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
        if not quantise:
            os.replace(fp32, target)  # atomic, as below
            return target
        staged = Path(tmp) / "model_int8.onnx"
        logging.disable(logging.INFO)  # the quantiser logs one line per tensor
        try:
            quantize_dynamic(
                str(fp32), str(staged), weight_type=QuantType.QInt8, per_channel=True
            )
        finally:
            logging.disable(logging.NOTSET)
        os.replace(staged, target)  # atomic: concurrent processes never see half a file
    return target


class OnnxEmbedder:
    """A small stand-in for ``SentenceTransformer.encode`` on ONNX Runtime."""

    def __init__(
        self,
        model_dir: Path,
        cache_dir: Path,
        *,
        threads: int,
        quantise: bool = True,
        max_batch: int = 64,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = export_int8(model_dir, cache_dir, quantise=quantise)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        if threads > 1:
            # ONNX Runtime's pool threads spin between operators by default: with the
            # web process and PostgreSQL on the same cores that burnt the CPU they
            # needed. Without spinning, two threads embedded 765 texts/s here against
            # 592 spinning and 437 on one (docs/benchmarks.md, session 29).
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(path), opts, providers=["CPUExecutionProvider"]
        )
        max_len = 256
        config = model_dir / "sentence_bert_config.json"
        if config.exists():
            max_len = int(json.loads(config.read_text()).get("max_seq_length", 256))
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_len)
        self.tokenizer.enable_padding()
        self.path = path
        # Texts a forward pass (``embed_texts`` splits larger batches). The int8 model
        # embedded 64-text chunks of bench messages at 2.05-2.22 ms a text in batches
        # of 64 and 1.71-1.91 in batches of 8 (docs/benchmarks.md, session 32): a
        # smaller batch pads less (each is padded to its longest text) and its
        # activations fit the caches.
        self.max_batch = max(1, int(max_batch))
        # ``encode`` may be called from several threads at once (``embed_texts``).
        self.concurrent_runs = True

    def encode(
        self,
        texts: list[str],
        *,
        batch_size: int = 64,
        normalize_embeddings: bool = True,
        **_: Any,
    ) -> np.ndarray:
        """Mean-pooled (and by default unit-normalised) float32 vectors, input order."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        chunks = []
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {
                "input_ids": ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(ids),
            }
            hidden = self.session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            chunks.append((idx, pooled.astype(np.float32)))
        dim = chunks[0][1].shape[1] if chunks else 0
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for idx, pooled in chunks:
            out[idx] = pooled
        if normalize_embeddings and len(texts):
            out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out
