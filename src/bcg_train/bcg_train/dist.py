"""Data-parallel helpers: one `Comm` per process. Single process: every call is the identity.

Two processes (`--procs 2` or torchrun) each simulate num_envs / 2 worlds; gradients (actor, critic,
discriminator) are averaged with all_reduce, normalizer statistics see the gathered batch of every rank, so
all ranks hold identical weights. gloo on CPU, NCCL on CUDA.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as tdist


class Comm:
    def __init__(self, rank: int = 0, world_size: int = 1):
        self.rank, self.world_size = rank, world_size

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def reduce_grads(self, params) -> None:
        """Average .grad over ranks (missing grads count as zero)."""
        if not self.active:
            return
        params = [p for p in params]
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        tdist.all_reduce(flat)
        flat /= self.world_size
        i = 0
        for p in params:
            n = p.numel()
            p.grad = flat[i : i + n].view_as(p).clone()
            i += n

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Rows of every rank concatenated (ranks may hold different row counts)."""
        if not self.active:
            return x
        n = torch.tensor([x.shape[0]], device=x.device)
        sizes = [torch.zeros_like(n) for _ in range(self.world_size)]
        tdist.all_gather(sizes, n)
        top = int(max(s.item() for s in sizes))
        pad = torch.zeros(top, *x.shape[1:], dtype=x.dtype, device=x.device)
        pad[: x.shape[0]] = x
        parts = [torch.zeros_like(pad) for _ in range(self.world_size)]
        tdist.all_gather(parts, pad)
        return torch.cat([p[: int(s.item())] for p, s in zip(parts, sizes)])

    def mean(self, values: dict[str, float]) -> dict[str, float]:
        """Per-key mean over ranks (keys must match on every rank)."""
        if not self.active or not values:
            return values
        keys = sorted(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
        tdist.all_reduce(t)
        return {k: float(v) / self.world_size for k, v in zip(keys, t.tolist())}

    def sum_int(self, value: int) -> int:
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        tdist.all_reduce(t)
        return int(t.item())

    def any(self, flag: bool) -> bool:
        return self.sum_int(int(flag)) > 0

    def broadcast_modules(self, modules) -> None:
        if not self.active:
            return
        for m in modules:
            for t in list(m.parameters()) + list(m.buffers()):
                tdist.broadcast(t.data, 0)

    def share(self, values: dict[str, float] | None, keys: tuple[str, ...], src: int) -> dict[str, float]:
        """Rank `src`'s `values` (floats under `keys`; None elsewhere) on every rank."""
        if not self.active:
            return values
        t = torch.zeros(len(keys), dtype=torch.float64)
        if self.rank == src:
            t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
        tdist.broadcast(t, src)
        return dict(zip(keys, t.tolist()))

    def barrier(self) -> None:
        if self.active:
            tdist.barrier()


def init_from_env(device: str) -> Comm:
    """A Comm from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT), else a single process."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Comm()
    backend = "nccl" if device.startswith("cuda") else "gloo"
    tdist.init_process_group(backend)
    return Comm(tdist.get_rank(), tdist.get_world_size())
