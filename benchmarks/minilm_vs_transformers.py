"""Embed 400 short sentences with attnlab's all-MiniLM-L6-v2 and with Hugging Face `transformers`,
in one run, on the same files, threads and batches; print the times and the ratio (goal <= 1.0).

`transformers` is never a dependency of attnlab: it lives only in the benchmarks' own virtual
environment, .venv-bench, which `make bench` creates from the students' lock and
benchmarks/requirements.txt (transformers==5.23.0 and what it needs besides) and then runs this
script in; by hand: `.venv-bench/bin/python benchmarks/minilm_vs_transformers.py`.
Options: --threads N [N ...] (default: 1, as the notebooks use, and torch's default for the
machine), --repeats N, --batch-size N, -n N. On a machine shared with other work, compare the
CPU-time lines too: wall time there also counts other programs' turns on the cores.

What is compared: both sides tokenize with the same BERT WordPiece vocabulary, run batches of 32
sentences grouped by length (as sentence-transformers does), mean-pool over the attention mask and
L2-normalise. Ours: `attnlab.load_minilm().encode(...)`. Theirs: `AutoTokenizer` + `AutoModel`
from the same model folder, with PyTorch's fused SDPA attention (transformers' default) and, for
reference, its "eager" attention. The script also checks the two give the same vectors.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

import attnlab
from attnlab.pretrained.minilm import model_files

try:  # the baseline lives in .venv-bench only (benchmarks/requirements.txt), never in the locks
    import transformers
    from transformers import AutoModel, AutoTokenizer
except ImportError:
    transformers = None


def sentences(n: int = 400, seed: int = 0) -> list[str]:
    """n short English sentences (4 to 16 words), reproducible."""
    rng = random.Random(seed)
    subjects = ["the movie", "this film", "the plot", "the lead actor", "my sister",
                "the soundtrack", "our neighbour", "the old dog", "a small cafe", "the new phone",
                "the train", "dinner"]
    verbs = ["was", "felt", "seemed", "turned out", "looked", "sounded"]
    adjectives = ["wonderful", "dreadful", "surprisingly good", "a bit long", "quite boring",
                  "far too loud", "charming", "forgettable", "brilliant", "late again", "cold"]
    tails = ["", " today", " last night", " to be honest", " in the end",
             " after all that waiting", " despite the rain", " and everyone agreed", ", sadly",
             " for the price"]
    return [f"{rng.choice(subjects)} {rng.choice(verbs)} "
            f"{rng.choice(adjectives)}{rng.choice(tails)}.".capitalize() for _ in range(n)]


def hf_encoder(folder: Path, attn_implementation: str, batch_size: int):
    """The model card's recipe (AutoTokenizer + AutoModel + mean pooling + normalise), batched by
    length like sentence-transformers."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation=attn_implementation).eval()

    @torch.inference_mode()
    def encode(texts: list[str]) -> torch.Tensor:
        ids_per_text = tokenizer(texts, truncation=True, max_length=256)["input_ids"]
        lengths = [len(ids) for ids in ids_per_text]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        out = torch.empty(len(texts), model.config.hidden_size)
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                              max_length=256, return_tensors="pt")
            hidden = model(**batch).last_hidden_state  # (b, T, d)
            keep = batch["attention_mask"].unsqueeze(-1).float()  # (b, T, 1)
            mean = (hidden * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
            out[idx] = torch.nn.functional.normalize(mean, p=2, dim=1)
        return out

    return encode


def timed(fn, *args):
    """(wall seconds, CPU seconds of this process, result). On a shared machine the wall time
    also counts other programs' turns on the cores; the CPU time counts only this work."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+",
                        default=sorted({1, torch.get_num_threads()}),
                        help="torch thread counts to measure (default: 1, as the notebooks use, "
                             "and torch's default for this machine)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("-n", type=int, default=400, help="number of sentences")
    args = parser.parse_args(argv)

    if transformers is None:
        print("transformers is not installed in this environment; "
              "see this file's docstring for the separate benchmark venv.", file=sys.stderr)
        return 2

    texts = sentences(args.n)
    load_ours, _, ours = timed(attnlab.load_minilm)  # first: its sha256 checks are not cached yet
    folder = model_files()["model.safetensors"].parent  # the same checked files for both sides
    load_hf, _, hf = timed(hf_encoder, folder, "sdpa", args.batch_size)
    hf_eager = hf_encoder(folder, "eager", args.batch_size)
    candidates = {
        "attnlab.load_minilm": lambda t: ours.encode(t, batch_size=args.batch_size),
        "transformers (sdpa)": hf,
        "transformers (eager)": hf_eager,
    }
    print(f"{args.n} sentences, batch {args.batch_size}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {args.repeats} interleaved repeats (best and median shown)")
    print(f"load (files -> ready model, imports done): attnlab {load_ours:.3f} s "
          f"(sha256 checks included), transformers {load_hf:.3f} s")
    ours_name = "attnlab.load_minilm"
    for threads in args.threads:
        torch.set_num_threads(threads)
        for fn in candidates.values():  # warm-up: first-call allocations and kernel selection
            fn(texts[:64])
        wall = {name: [] for name in candidates}
        cpu = {name: [] for name in candidates}
        vectors = {}
        for _ in range(args.repeats):  # interleaved, so machine noise hits every side alike
            for name, fn in candidates.items():
                w, c, vectors[name] = timed(fn, texts)
                wall[name].append(w)
                cpu[name].append(c)
        print(f"\n{threads} torch thread(s):")
        for name in candidates:
            diff = (vectors[name] - vectors[ours_name]).abs().max().item()
            print(f"  {name:21s} wall best {min(wall[name]):.3f} s "
                  f"median {statistics.median(wall[name]):.3f} s | "
                  f"CPU best {min(cpu[name]):.3f} s median {statistics.median(cpu[name]):.3f} s | "
                  f"{args.n / min(wall[name]):.0f} sentences/s | max |diff| vs attnlab {diff:.1e}")
        for clock, table in (("wall", wall), ("CPU", cpu)):
            ratios = [f"{min(table[ours_name]) / min(table[name]):.3f} vs {name}"
                      for name in candidates if name != ours_name]
            print(f"  ratio attnlab / transformers, best {clock} time: " + ", ".join(ratios))
        ratio = min(wall[ours_name]) / min(wall["transformers (sdpa)"])
        print("  goal ratio <= 1.0 against transformers' default (sdpa), best wall time: "
              f"{ratio:.3f} -> {'met' if ratio <= 1.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
