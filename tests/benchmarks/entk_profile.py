"""Where the empirical NTK's work goes: matrix products counted by shape, per engine, no timings (#34 item 4).

    python tests/benchmarks/entk_profile.py                       # the defaults below, N = 64
    python tests/benchmarks/entk_profile.py --model timm:test_efficientnet --n 128
    python tests/benchmarks/entk_profile.py --model convnet --model timm:mobilenetv3_small_050 --top 8

For each model it prints which trainable parameters the structured engine covers and which go to the generic
one (`vmap(jacrev)` over the whole network per chunk), then `torch.utils.flop_counter.FlopCounterMode`'s FLOPs
of one `empirical_ntk(net, x)` (K(x, x), float64 Gram) by operator, the most expensive matrix-product shapes,
and the FLOPs per sample pair against those of one forward and backward pass per sample: a count of work, not
a time, so it is the same on an idle or a busy machine. `convnet` is kernel-limits-images' `convnet` (the
adapter at width 0.25); `timm:<name>` is the timm adapter's network on factor-grid's 1 × 32 × 32 sprites.
The rate (FLOP/s against a float64 matmul's) is tests/benchmarks/test_bench_flops.py's, for an idle machine.
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from compbench.theory import empirical_ntk
from compbench.theory.ntk import structured_coverage

DEFAULT_MODELS = ["convnet", "timm:test_resnet", "timm:test_efficientnet", "timm:mobilenetv3_small_050", "timm:test_convnext"]


def build(name: str) -> tuple[torch.nn.Module, tuple[int, int, int]]:
    """The adapter's network for `name` and its input shape (channels, height, width)."""
    from compbench.adapters import get_adapter

    if name == "convnet":
        shape = (1, 8, 16)  # kernel-limits-images: two 8×8 digits side by side
        adapter = get_adapter("convnet")(get_adapter("convnet").Params(width=0.25))
    else:
        shape = (1, 32, 32)  # factor-grid's sprites
        adapter = get_adapter(name)(get_adapter(name).Params())
    torch.manual_seed(0)
    return adapter.build(shape, 1).eval(), shape


def profile(name: str, n: int, top: int) -> None:
    """Print one model's coverage, FLOPs by operator and by matrix-product shape, and FLOPs per sample pair."""
    net, shape = build(name)
    x = torch.rand(n, *shape, generator=torch.Generator().manual_seed(1))
    cover = structured_coverage(net)
    params = dict(net.named_parameters())
    generic = sum(params[p].numel() for p in cover["generic"])
    total = sum(p.numel() for p in net.parameters() if p.requires_grad)
    print(f"\n== {name}: {total:,} parameters, {len(cover['generic'])} tensors ({generic:,} parameters) to the generic engine")
    if cover["generic"]:
        print("   generic:", ", ".join(cover["generic"][:8]) + (" ..." if len(cover["generic"]) > 8 else ""))
    shapes: Counter[tuple[str, tuple]] = Counter()
    flops_of: Counter[tuple[str, tuple]] = Counter()
    calls: Counter[str] = Counter()

    class Shapes(TorchDispatchMode):
        """Every operator call counted; matrix products by shape (a loop over samples shows as many small calls)."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            op = func.__name__.split(".")[0]
            calls[op] += 1
            if op in ("mm", "addmm", "bmm", "baddbmm"):
                a, b = [t for t in args if torch.is_tensor(t) and t.dim() >= 2][-2:]
                key = (op, (tuple(a.shape), tuple(b.shape)))
                shapes[key] += 1
                flops_of[key] += 2 * a.numel() * b.shape[-1]
            return func(*args, **(kwargs or {}))

    with FlopCounterMode(display=False) as counter, Shapes():
        empirical_ntk(net, x)
    ntk_flops = counter.get_total_flops()
    with FlopCounterMode(display=False) as fb:
        net(x).sum().backward()
    net.zero_grad(set_to_none=True)
    by_op = sorted(((str(op), f) for op, f in counter.get_flop_counts()["Global"].items()), key=lambda t: -t[1])
    print(f"   eNTK K(x, x) at N = {n}: {ntk_flops / 1e9:.3f} GFLOP; one forward + backward of the batch: "
          f"{fb.get_total_flops() / 1e9:.3f} GFLOP; ratio {ntk_flops / max(1, fb.get_total_flops()):.1f}")
    print("   by operator: " + ", ".join(f"{op} {f / 1e9:.3f}" for op, f in by_op))
    print(f"   operator calls: {sum(calls.values()):,} ({', '.join(f'{op} {c:,}' for op, c in calls.most_common(5))})")
    print(f"   largest matrix products (calls × shapes, GFLOP), of {sum(shapes.values()):,} calls:")
    for key, f in flops_of.most_common(top):
        print(f"     {shapes[key]:4d} × {key[0]} {key[1]}  {f / 1e9:.3f}")


def main() -> None:
    """Profile the models named on the command line (or the defaults)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="convnet or timm:<name> (repeatable)")
    ap.add_argument("--n", type=int, default=64, help="samples (default 64)")
    ap.add_argument("--top", type=int, default=6, help="matrix-product shapes shown per model")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.model or DEFAULT_MODELS:
        profile(name, args.n, args.top)


if __name__ == "__main__":
    main()
