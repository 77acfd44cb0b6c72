"""A small pi0-like robot policy, for `traceforge capture`: one inference per step.

vision encoder (image patches -> tokens) -> text prefill that builds a KV cache ->
10 denoising steps of an action expert attending to that cache; bf16, batch 1.

    python examples/policy_infer.py                       # full size on GPU, toy on CPU
    traceforge capture --mode all -- python examples/policy_infer.py --iters 20

The script is plain PyTorch: it calls torch.compile itself (traceforge's eager/sdpa/fa2
modes turn that into a no-op) and uses F.scaled_dot_product_attention (the modes pick its
backend). Every call of the top-level module is one step.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

SIZES = {
    # name: (width, heads, vision/prefill/expert layers, image, patch, text, actions)
    "toy": (64, 4, 1, 1, 1, 32, 16, 8, 4),
    "full": (1024, 16, 8, 8, 6, 224, 14, 48, 50),
}


class Block(nn.Module):
    """Pre-norm transformer block; attention through SDPA, optionally over a KV prefix."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor] | None = None,
                causal: bool = False) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        q, k, v = (self._split(t) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        kv = (k, v)
        if prefix is not None:
            k, v = torch.cat([prefix[0], k], dim=2), torch.cat([prefix[1], v], dim=2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(a.transpose(1, 2).flatten(2))
        return x + self.mlp(self.norm2(x)), kv


class Policy(nn.Module):
    def __init__(self, size: str) -> None:
        super().__init__()
        d, h, nv, np_, ne, img, patch, self.n_text, self.n_act = SIZES[size]
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.vision = nn.ModuleList(Block(d, h) for _ in range(nv))
        self.embed = nn.Embedding(1024, d)
        self.prefill = nn.ModuleList(Block(d, h) for _ in range(np_))
        self.bridge = nn.Linear(d, d)  # prefix width -> expert width (same here)
        self.act_in, self.time_in = nn.Linear(32, d), nn.Linear(1, d)
        self.expert = nn.ModuleList(Block(d, h) for _ in range(ne))
        self.act_out = nn.Linear(d, 32)

    def forward(self, image: torch.Tensor, text: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        x = self.patch(image).flatten(2).transpose(1, 2)
        for blk in self.vision:
            x, _ = blk(x)
        prefix = torch.cat([x, self.embed(text)], dim=1)
        cache = []
        for blk in self.prefill:  # prefill: one pass over the prefix, keeping each layer's K/V
            prefix, kv = blk(prefix, causal=True)
            cache.append(kv)
        actions, steps = noise, 10
        for i in range(steps):  # flow-matching denoising: actions += dt * velocity
            t = torch.full((1, 1, 1), 1.0 - i / steps, device=noise.device, dtype=noise.dtype)
            y = self.act_in(actions) + self.time_in(t)
            # expert block i attends to the K/V of prefill block i (the expert is shallower)
            for blk, kv in zip(self.expert, cache[: len(self.expert)], strict=True):
                y, _ = blk(y, prefix=kv)
            actions = actions - self.act_out(y) / steps
        return actions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=SIZES, default=None, help="default: full on GPU, else toy")
    ap.add_argument("--iters", type=int, default=20,
                    help="inferences to run (20: the compiled schedule 5,2,5 leaves 7 unprofiled)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile call")
    args = ap.parse_args()
    size = args.size or ("full" if args.device.startswith("cuda") else "toy")
    dev, dtype = torch.device(args.device), torch.bfloat16
    _, _, _, _, _, img, _, n_text, n_act = SIZES[size]
    policy = Policy(size).to(dev, dtype).eval()
    if not args.no_compile:
        policy = torch.compile(policy)
    image = torch.randn(1, 3, img, img, device=dev, dtype=dtype)
    text = torch.randint(0, 1024, (1, n_text), device=dev)
    noise = torch.randn(1, n_act, 32, device=dev, dtype=dtype)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for _ in range(args.iters):
            out = policy(image, text, noise)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    print(f"policy_infer: {size}, {args.iters} inferences in {time.perf_counter() - t0:.2f} s, "
          f"actions {tuple(out.shape)}")


if __name__ == "__main__":
    main()
