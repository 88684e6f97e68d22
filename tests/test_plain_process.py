"""The public API from a plain Python process, as a script, a server or a student's scratch
notebook calls it: torch on its default threads (two on a 2-core machine, where a fork under a
live thread pool once hung `embed_images` for ever), before and after other torch and Keras work,
and where a process cannot fork. Each scenario runs in a subprocess with a time limit, so a hang
fails the test instead of stalling the run."""
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import need

from attnlab.plumbing import parallel

# Every name of the public API (CONTRIBUTING.md), called once, after other torch and Keras work.
EVERY_FUNCTION = """
import numpy as np
import torch
import attnlab
from attnlab.pretrained import embeddings
from attnlab.pretrained.llama import load_smollm2
from attnlab.lessons.classifier import train_classifier

images = attnlab.load_fashion_mnist()[1][0][:96]
first = attnlab.embed_images(images)  # before any other work: folding the weights is the
#                                       first parallel torch work of this process
torch.randn(512, 512) @ torch.randn(512, 512)  # the thread pool busy, on every thread
keras = embeddings.embed_images_keras(images[:8])  # Keras's predict
q = torch.randn(2, 5, 8)  # (B, T, d_k)
out, w = attnlab.scaled_dot_product_attention(q, q, q, mask=attnlab.causal_mask(5))
mha = attnlab.MultiHeadAttention(16, 4)
y, w = mha(torch.randn(2, 5, 16), context=torch.randn(2, 3, 16))
assert w.shape == (2, 4, 5, 3)
attnlab.rotary(torch.randn(2, 5, 8))
block = attnlab.EncoderBlock(16, 4, 32)
tiny = attnlab.TinyTransformer(50)
with attnlab.uniform_attention(tiny):
    tiny(torch.randint(0, 50, (2, 7)))
attnlab.sample_next(torch.randn(3, 10), temperature=0.7, top_k=3)
trained = train_classifier()
assert len(trained.test) > 0
assert attnlab.load_minilm().encode(["a cat", "a dog"]).shape == (2, 384)
model, tokenizer = load_smollm2()
assert model(torch.tensor([tokenizer.encode("The cat")])).shape[-1] == 49152
assert attnlab.SentimentApp().analyze("the plot was dull")["label"]
again = attnlab.embed_images(images)  # after all of it
norms = np.linalg.norm(keras, axis=1) * np.linalg.norm(first[:8], axis=1)
cosine = (keras * first[:8]).sum(1) / norms
assert (first == again).all() and cosine.min() > 0.999, cosine
print("threads", torch.get_num_threads(), "every function returned")
"""

# The notebooks' way (one thread, set after the pool ran on two), then a process without fork.
ONE_THREAD_THEN_NO_FORK = """
import os
import numpy as np
import torch
import attnlab
from attnlab.plumbing import parallel

images = attnlab.load_fashion_mnist()[1][0][:96]
torch.randn(512, 512) @ torch.randn(512, 512)  # the pool started on the default threads
torch.set_num_threads(1)
forked = attnlab.embed_images(images, batch_size=16)
pids = parallel.parallel_map(lambda i: os.getpid(), range(2))
del os.fork  # as on Windows: no fork at all
alone = attnlab.embed_images(images, batch_size=16)
assert np.array_equal(forked, alone)
assert parallel.parallel_map(lambda i: os.getpid(), range(2)) == [os.getpid()] * 2
print("forked" if os.getpid() not in pids else "in turn", "then in turn: the same bits")
"""


def run(code: str, timeout: float, **env) -> str:
    """`code` in a fresh Python, torch on its default threads; its stdout. A run over
    `timeout` seconds fails the test, naming what it was doing."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", parallel.WORKERS)}
    environment.update(KERAS_BACKEND="torch", **env)
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"no answer after {timeout} s (a hang?); it printed:\n{e.stdout}\n{e.stderr}")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.integration  # 15-25 s: make test-all
def test_every_public_function_returns_from_a_plain_process():
    need("mobilenet_v2_0.35", "minilm/model.safetensors", "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "every function returned" in run(EVERY_FUNCTION, timeout=300)


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_one_thread_forks_and_no_fork_runs_in_turn():
    need("mobilenet_v2_0.35")
    out = run(ONE_THREAD_THEN_NO_FORK, timeout=120)
    if len(os.sched_getaffinity(0)) > 1 and sys.platform.startswith("linux"):
        assert out.startswith("forked")  # two cores: the notebooks' way really forked


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_a_fork_under_a_live_thread_pool_is_an_error_not_a_hang():
    """The hang itself, made on purpose (parallel_map told the caller runs one thread while the
    pool runs two): the stuck workers are stopped and the caller is told why, within seconds."""
    code = """
    import os, torch
    from attnlab.plumbing import parallel
    torch.randn(512, 512) @ torch.randn(512, 512)  # the pool started on two threads
    parallel.STALL_SECONDS = 2.0
    parallel.torch.get_num_threads = lambda: 1     # the check fooled: fork anyway
    os.sched_getaffinity = lambda pid: {0, 1}
    try:
        parallel.parallel_map(lambda i: torch.randn(256, 256) @ torch.randn(256, 256), [0, 1])
    except RuntimeError as e:
        print(e)
    """
    out = run(code, timeout=60, OMP_NUM_THREADS="2")
    assert "used no CPU time for 2 s" in out and "ATTNLAB_WORKERS=1" in out, out
