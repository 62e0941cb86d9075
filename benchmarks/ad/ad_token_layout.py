"""
Cost of AD's two token layouts side by side, in one process at one torch thread: seconds per training update
(forward, backward and Adam on a batch of windows) and per ``predict``-sized forward pass (a batch of left-padded
windows, as an evaluation of many envs makes), at the context lengths of the ``noisy_room_20`` and ``a2c_room``
presets (2 layers, embedding 64, 4 heads, feed-forward 256, ALiBi).

    python -m benchmarks ad token-layout
"""

import argparse
import os
import sys
import time
from typing import Callable

import torch as th
import torch.nn.functional as F

# benchmarks/ad/README.md runs this file by path: then the repository's root is not on the path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.machine import cpu_name
from benchmarks.study import probe, run_script, shared
from sb3_pref.ad.model import TOKEN_LAYOUTS, ADConfig, ADTransformer


def seconds(step: Callable[[], None], repeats: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def windows(n: int, seq_len: int, generator: th.Generator) -> tuple[th.Tensor, ...]:
    """Random observations, actions, rewards and time steps of ``n`` windows (the cost does not depend on them)."""
    shape = (n, seq_len)
    return (
        th.rand(*shape, 2, generator=generator),
        th.randint(5, shape, generator=generator),
        th.randint(2, shape, generator=generator),
        th.randint(20, shape, generator=generator),
    )


def measure(layout: str, seq_len: int, batch: int, repeats: int) -> tuple[float, float]:
    """:return: seconds per training update and per evaluation forward pass of 23 left-padded windows"""
    config = ADConfig(
        obs_dim=2,
        n_actions=5,
        max_timestep=20,
        seq_len=seq_len,
        embed_dim=64,
        n_layers=2,
        n_heads=4,
        ff_dim=256,
        attention_dropout=0.0,
        residual_dropout=0.0,
        recency_bias=True,
        token_layout=layout,
    )
    th.manual_seed(0)
    generator = th.Generator().manual_seed(0)
    model = ADTransformer(config)
    optimizer = th.optim.Adam(model.parameters())
    train, evaluation = windows(batch, seq_len, generator), windows(23, seq_len, generator)
    valid = th.arange(seq_len)[None] >= th.randint(seq_len // 2, (23, 1), generator=generator)

    def update() -> None:
        loss = F.cross_entropy(model(*train).reshape(-1, 5), train[1].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def predict() -> None:
        with th.no_grad():
            model(*evaluation, valid)

    model.train()
    per_update = seconds(update, repeats)
    model.eval()
    return per_update, seconds(predict, repeats)


@probe("token-layout", "seconds per update and per predict of AD's two token layouts", shared("repeats", default=5))
def token_layout(args: argparse.Namespace) -> None:
    """
    Both layouts at the contexts of the ``noisy_room_20`` and ``a2c_room`` presets, one thread.

    :param args: the options
    """
    th.set_num_threads(1)
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores, shared), torch {th.__version__}, 1 thread\n")
    print("| context (transitions) | batch | layout | s / update | s / predict (23 envs) | update ratio | predict ratio |")
    print("|---|---|---|---|---|---|---|")
    for seq_len, batch in ((160, 16), (420, 16)):
        times = {layout: measure(layout, seq_len, batch, args.repeats) for layout in TOKEN_LAYOUTS}
        base = times["triplet"]
        for layout, (u, p) in times.items():
            print(f"| {seq_len} | {batch} | {layout} | {u:.3f} | {p:.3f} | {base[0] / u:.1f}x | {base[1] / p:.1f}x |")


if __name__ == "__main__":
    run_script(token_layout)
