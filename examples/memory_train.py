"""A training loop with known sizes, captured by traceforge's Python API (GPU check for
traceforge memory): 8 blocks of Linear(2048,2048) + LayerNorm + GELU, fp32, AdamW.

    python3 examples/memory_train.py CONFIG OUTDIR [STEPS] [WAIT,WARMUP,ACTIVE]

CONFIG: base (no memory options), mem (--memory), snap (--memory-snapshot), both. The
H100 run behind README's Memory figures used 70 steps and 2,1,30, four rounds each.
"""
import sys
import time

import torch

import traceforge

cfg, out = sys.argv[1], sys.argv[2]
D, LAYERS, BATCH = 2048, 8, 256
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 30
SCHED = sys.argv[4] if len(sys.argv) > 4 else "2,1,5"
torch.manual_seed(0)
blocks = []
for _ in range(LAYERS):
    blocks += [torch.nn.Linear(D, D), torch.nn.LayerNorm(D), torch.nn.GELU()]
model = torch.nn.Sequential(*blocks).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
params = sum(p.numel() * p.element_size() for p in model.parameters())
x = torch.randn(BATCH, D, device="cuda")
y = torch.randn(BATCH, D, device="cuda")
print("param_bytes", params, flush=True)
t0 = time.perf_counter()
with traceforge.capture(mode="eager", out=out, name="train", steps=SCHED,
                        memory=cfg in ("mem", "both"), memory_snapshot=cfg in ("snap", "both"),
                        quiet=False) as run:
    for _ in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        traceforge.step()
print("total_s", round(time.perf_counter() - t0, 3), "param_bytes", params, flush=True)
