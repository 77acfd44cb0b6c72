"""A small GPT trained with DistributedDataParallel, for `traceforge capture` in front of torchrun.

    torchrun --nproc-per-node 2 examples/ddp_train.py                    # NCCL on GPUs, gloo on CPU
    traceforge capture -- torchrun --nproc-per-node 2 examples/ddp_train.py --steps 8

Every optimizer step is one traceforge step; each rank writes its own trace. The script
compiles its model with torch.compile (a no-op in traceforge's eager/sdpa/fa2 modes).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

SIZES = {  # name: (width, heads, layers, sequence, batch per rank, vocab)
    "toy": (64, 4, 2, 32, 2, 256),
    "full": (1024, 16, 12, 512, 8, 32000),
}


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, d: int, heads: int, layers: int, seq: int, vocab: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.norm(self.blocks(self.tok(idx) + self.pos(pos))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=SIZES, default=None, help="default: full on GPU, else toy")
    ap.add_argument("--steps", type=int, default=14,
                    help="optimizer steps (14: the schedule 2,2,5 leaves 5 unprofiled)")
    ap.add_argument("--batch", type=int, default=None,
                    help="samples per rank per step (default: the size's)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile call")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    size = args.size or ("full" if cuda else "toy")
    d, h, layers, seq, batch, vocab = SIZES[size]
    batch = args.batch or batch
    torch.manual_seed(0)
    model = DDP(GPT(d, h, layers, seq, vocab).to(dev), device_ids=[local] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=cuda)
    if not args.no_compile:
        # traceforge's eager/sdpa/fa2 modes turn this into a no-op; compiled mode runs it.
        model = torch.compile(model)
    gen = torch.Generator(device=dev).manual_seed(rank)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        x = torch.randint(0, vocab, (batch, seq + 1), device=dev, generator=gen)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if rank == 0:
        print(f"ddp_train: {size}, {world} rank(s), {args.steps} steps in {dt:.2f} s, "
              f"{args.steps * batch * world / dt:.1f} samples/s, loss {loss.item():.3f}")
    # Free DDP (its reducer holds the process group) before the group itself goes away.
    del model, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
