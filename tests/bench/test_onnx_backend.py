"""The ONNX Runtime int8 backend: exported locally from the bundled model, offline."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from memory import embeddings
from memory.onnx_backend import OnnxEmbedder

TEXTS = [
    "Caroline went to the pottery workshop in Boston",
    "What did Melanie paint last week?",
    "a",
    "The release checklist: run the tests, tag, then deploy to staging. " * 8,
]


@pytest.mark.slow
def test_the_int8_model_embeds_close_to_the_torch_model_in_input_order(settings):
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"  # against the model's own arithmetic
    onnx = OnnxEmbedder(
        Path(embeddings.model_path()), Path(settings.VAR_DIR) / "onnx", threads=1
    )
    got = onnx.encode(TEXTS, batch_size=2)
    want = embeddings.embed_texts(TEXTS)
    assert got.shape == (4, 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * want).sum(axis=1)
    # int8 costs a little (per-tensor scales gave 0.93-0.97; per-channel scales keep
    # it closer); order is preserved
    assert cosines.min() > 0.98, cosines
    assert onnx.path.name == "model_int8_pc.onnx" and onnx.path.exists()


@pytest.fixture
def reloaded():
    """The model loads afresh under this test's settings, and again after it (the
    ``settings`` fixture restores the settings themselves)."""
    embeddings.reset_for_tests()
    yield
    embeddings.reset_for_tests()


def test_an_unknown_backend_name_is_reported_as_embedder_unavailable(
    settings, reloaded
):
    settings.MNEMO_EMBEDDING_BACKEND = "tensorflow"
    with pytest.raises(embeddings.EmbedderUnavailable, match="tensorflow"):
        embeddings.get_model()


def test_query_embeddings_use_the_float32_onnx_export_equal_to_torch(
    settings, reloaded
):
    settings.MNEMO_QUERY_EMBEDDING_BACKEND = "onnx"
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"
    got = embeddings.embed_queries(TEXTS)
    model = embeddings.get_query_model()
    assert isinstance(model, OnnxEmbedder) and model.path.name == "model_fp32.onnx"
    want = embeddings.embed_texts(TEXTS)  # documents: the torch backend
    assert (got * want).sum(axis=1).min() > 0.99999


def test_a_query_vector_depends_on_its_text_only_not_on_its_batch(settings, reloaded):
    """The int8 query model scales activations per batch: embedded beside other texts
    a query came out different (cosine ~0.990) from the same query alone."""
    settings.MNEMO_QUERY_EMBEDDING_BACKEND = "onnx-int8"
    together = embeddings.embed_queries(TEXTS)
    embeddings.reset_query_cache()
    alone = np.stack([embeddings.embed_queries([t])[0] for t in TEXTS])
    assert np.array_equal(together, alone)
    # Repeats and cache hits keep input order.
    again = embeddings.embed_queries([TEXTS[1], "a new one", TEXTS[1]])
    assert np.array_equal(again[0], alone[1]) and np.array_equal(again[2], alone[1])


def test_a_query_backend_that_cannot_load_falls_back_to_the_main_one(
    settings, reloaded
):
    settings.MNEMO_QUERY_EMBEDDING_BACKEND = "tensorflow"
    assert embeddings.get_query_model() is embeddings.get_model()
    assert embeddings.embed_queries(["still works"]).shape == (1, 384)


def test_bf16_document_embeddings_stay_within_cosine_0_9999_of_fp32(settings):
    """bf16 autocast (the default where the CPU has AMX) changes vectors only in the
    fourth decimal of their cosine; on other CPUs it is emulated, so still checked."""
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"
    fp32 = embeddings.embed_texts(TEXTS)
    settings.MNEMO_EMBEDDING_PRECISION = "bf16"
    bf16 = embeddings.embed_texts(TEXTS)
    assert bf16.dtype == np.float32 and bf16.shape == (4, 384)
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cosines = (bf16 * fp32).sum(axis=1)
    assert cosines.min() > 0.9999, cosines
    assert not np.array_equal(bf16, fp32)  # the setting did change the arithmetic


def test_bf16_linear_weights_cast_at_load_give_the_vectors_autocast_gave(
    settings, reloaded
):
    """The torch model's linear layers are cast to bf16 once, at load: autocast cast
    them again on every call (its copies live as long as its context). Autocast then
    finds them bf16 and computes what it computed over the fp32 weights."""
    import torch
    from sentence_transformers import SentenceTransformer

    settings.MNEMO_EMBEDDING_BACKEND = "torch"
    settings.MNEMO_EMBEDDING_PRECISION = "bf16"
    model = embeddings.get_model()
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linear) == 37 and {m.weight.dtype for m in linear} == {torch.bfloat16}
    got = embeddings.embed_texts(TEXTS)

    before = SentenceTransformer(embeddings.model_path(), device="cpu")
    before._mnemo_precision = "bf16"  # autocast over fp32 weights, as before
    assert {p.dtype for p in before.parameters()} == {torch.float32}
    want = embeddings.embed_texts(TEXTS, model=before)
    assert np.abs(got - want).max() <= 1e-6

    # Switched to fp32, the process's model loads again with fp32 weights.
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"
    fp32 = embeddings.get_model()
    assert fp32 is not model
    assert {p.dtype for p in fp32.parameters()} == {torch.float32}
    assert (embeddings.embed_texts(TEXTS) * got).sum(axis=1).min() > 0.9999


@pytest.mark.parametrize(
    ("vendor", "flags", "want"),
    [
        ("GenuineIntel", {"avx2", "amx_bf16", "amx_tile"}, "bf16"),
        ("GenuineIntel", {"avx2", "avx512_bf16"}, "fp32"),  # measured slower there
        ("AuthenticAMD", {"avx2", "avx512f", "avx512_bf16"}, "bf16"),
        ("AuthenticAMD", {"avx2", "avx512f"}, "fp32"),
        ("", set(), "fp32"),  # no /proc/cpuinfo
    ],
)
def test_auto_precision_is_bf16_only_where_measured_faster(
    settings, monkeypatch, vendor, flags, want
):
    settings.MNEMO_EMBEDDING_PRECISION = "auto"
    monkeypatch.setattr(embeddings, "_cpu_info", lambda: (vendor, frozenset(flags)))
    assert embeddings.precision() == want
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"
    assert embeddings.precision() == "fp32"


def test_an_unknown_precision_makes_the_model_unavailable_with_its_name(
    settings, reloaded
):
    settings.MNEMO_EMBEDDING_PRECISION = "fp8"
    with pytest.raises(embeddings.EmbedderUnavailable, match="fp8"):
        embeddings.get_model()


def test_a_multi_threaded_session_does_not_spin_and_embeds_as_one_thread(settings):
    """Pool threads that spin between operators took the CPU the web process and
    PostgreSQL needed (docs/benchmarks.md, session 29): off when there are several."""
    model, cache = Path(embeddings.model_path()), Path(settings.VAR_DIR) / "onnx"
    one = OnnxEmbedder(model, cache, threads=1, quantise=False)
    two = OnnxEmbedder(model, cache, threads=2, quantise=False)
    spin = "session.intra_op.allow_spinning"
    assert two.session.get_session_options().get_session_config_entry(spin) == "0"
    with pytest.raises(RuntimeError):  # one thread: ONNX Runtime's default
        one.session.get_session_options().get_session_config_entry(spin)
    assert np.allclose(one.encode(TEXTS), two.encode(TEXTS), atol=1e-5)


MESSAGES = [
    f"{name} said the {thing} was {how} on day {n}"
    for n, (name, thing, how) in enumerate(
        [
            ("Caroline", "pottery class", "wonderful"),
            ("Melanie", "camping trip", "rainy but fun"),
            ("Bob", "release", "late again because the staging tests failed"),
            ("Alice", "garden", "full of tomatoes"),
            ("Dan", "new job", "hard"),
        ]
        * 8
    )
]


class Recording:
    """An ONNX model that records each forward pass's size and thread."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.max_batch = inner.max_batch
        self.concurrent_runs = inner.concurrent_runs
        self.calls: list[tuple[int, str]] = []

    def encode(self, texts: list[str], **kwargs: object) -> np.ndarray:
        self.calls.append((len(texts), threading.current_thread().name))
        return self.inner.encode(texts, **kwargs)


@pytest.fixture
def int8_model(settings):
    return OnnxEmbedder(
        Path(embeddings.model_path()),
        Path(settings.VAR_DIR) / "onnx",
        threads=1,
        max_batch=8,
    )


def test_onnx_chunks_run_in_batches_of_at_most_max_batch(int8_model, monkeypatch):
    monkeypatch.setattr(embeddings, "_process_runs", 1)
    model = Recording(int8_model)
    got = embeddings.embed_texts(MESSAGES, batch_size=64, model=model)
    assert got.shape == (40, 384)
    assert max(n for n, _ in model.calls) <= 8 and sum(n for n, _ in model.calls) == 40
    # Each row is its own text's vector, wherever its batch ran.
    want = np.concatenate([int8_model.encode([t]) for t in MESSAGES[:3]])
    assert (got[:3] * want).sum(axis=1).min() > 0.99


def test_concurrent_runs_give_the_serial_vectors_on_two_threads(
    int8_model, monkeypatch
):
    """A worker runs two forward passes at once (``MNEMO_WORKER_EMBEDDING_RUNS``):
    the same vectors, bit for bit, as one after the other."""
    monkeypatch.setattr(embeddings, "_process_runs", 1)
    serial = embeddings.embed_texts(MESSAGES, model=int8_model)
    monkeypatch.setattr(embeddings, "_process_runs", 2)
    model = Recording(int8_model)
    together = embeddings.embed_texts(MESSAGES, model=model)
    assert np.array_equal(serial, together)
    threads = {name for _, name in model.calls}
    assert len(model.calls) >= 5 and all(n.startswith("embed-run") for n in threads)
    pool = embeddings._runs_pool(2)
    assert pool._max_workers == 2


def test_a_few_texts_are_split_so_that_every_run_has_a_pass(int8_model, monkeypatch):
    monkeypatch.setattr(embeddings, "_process_runs", 2)
    model = Recording(int8_model)
    embeddings.embed_texts(MESSAGES[:10], batch_size=64, model=model)
    assert sorted(n for n, _ in model.calls) == [5, 5]
    assert all(name.startswith("embed-run") for _, name in model.calls)


def record_threads(model, monkeypatch) -> list[str]:
    """The names of the threads ``model.encode`` runs on, call by call."""
    calls: list[str] = []
    real = model.encode

    def encode(texts: list[str], **kwargs: object) -> np.ndarray:
        calls.append(threading.current_thread().name)
        return real(texts, **kwargs)

    monkeypatch.setattr(model, "encode", encode)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_torch_model_runs_concurrently_with_the_vectors_of_its_batches(
    monkeypatch, settings, precision
):
    """Two torch passes at once (fp32: session 33; bf16: session 34): each batch's
    vectors as one after the other, to the last bit (each thread its own autocast)."""
    settings.MNEMO_EMBEDDING_BACKEND = "torch"
    settings.MNEMO_EMBEDDING_PRECISION = precision
    model = embeddings.get_model()
    assert model.concurrent_runs and model._mnemo_precision == precision
    monkeypatch.setattr(embeddings, "_process_runs", 1)
    serial = embeddings.embed_texts(MESSAGES, batch_size=8)
    monkeypatch.setattr(embeddings, "_process_runs", 2)
    calls = record_threads(model, monkeypatch)
    together = embeddings.embed_texts(MESSAGES, batch_size=8)
    assert np.array_equal(serial, together)
    assert len(calls) >= 5 and all(n.startswith("embed-run") for n in calls)


def test_concurrent_torch_runs_tokenize_one_at_a_time(monkeypatch, settings):
    """The shared Rust tokenizer raises "Already borrowed" when two threads call it
    at once (huggingface/tokenizers#537): tokenizing waits for a lock."""
    settings.MNEMO_EMBEDDING_BACKEND = "torch"
    settings.MNEMO_EMBEDDING_PRECISION = "fp32"
    monkeypatch.setattr(embeddings, "_process_runs", 2)
    model = embeddings.get_model()
    done: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: done.append(embeddings.embed_texts(["one", "two words"]))
    )
    with model._mnemo_preprocess_lock:
        worker.start()
        worker.join(timeout=1.0)
        assert worker.is_alive() and not done  # both passes wait to tokenize
    worker.join(timeout=60)
    assert not worker.is_alive() and done[0].shape == (2, 384)
