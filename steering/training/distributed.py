"""Training under torchrun: the process group and the few collectives train.py needs.

Every rank runs the same collectives in the same order: what only rank 0 can know (the disk, the
clock) is decided there and sent to the others (tensors only: no pickle). Single-process runs
(world 1) call the same functions, which then do nothing.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def start(device: torch.device, timeout_s: float = 600.0) -> tuple[int, int]:
    """Join the process group torchrun describes in the environment: (rank, world size); (0, 1) alone.

    A peer that stops answering fails the run after timeout_s, and torchrun then ends (or restarts) it."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not dist.is_initialized():
        single_node = os.environ.get("LOCAL_WORLD_SIZE") == str(world)
        if device.type == "cpu" and single_node and "GLOO_SOCKET_IFNAME" not in os.environ:
            # gloo otherwise binds to whatever the hostname resolves to; in sandboxes where that
            # address is not routable its connect hangs for the 30-minute collective timeout
            loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
            if loopback:
                os.environ["GLOO_SOCKET_IFNAME"] = loopback
        backend, timeout = ("nccl" if device.type == "cuda" else "gloo"), timedelta(seconds=timeout_s)
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            rank = int(os.environ["RANK"])
            dist.init_process_group(backend, store=_round_store(rank, world, timeout), rank=rank, world_size=world,
                                    timeout=timeout)  # fmt: skip
        else:
            dist.init_process_group(backend, timeout=timeout)
    return dist.get_rank(), world


def _round_store(rank: int, world: int, timeout: timedelta) -> dist.Store:
    """torchrun's store, under a name that is new in every round of workers.

    torchrun's c10d rendezvous keeps one store for all its restarts (--max-restarts; torch 2.13, see
    pytorch#135712), and the process group's keys from the round before are still in it: a restarted
    rank 0 then read its dead peer's address and gloo failed ("connectFullMesh ... Connection refused").
    torchrun's restart count cannot name the round (each machine counts its own restarts), so rank 0
    draws a random name, and every other rank takes it only once rank 0 has answered the random
    nonce that rank drew itself: no key left from an earlier round can pass for this round's."""
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout)
    deadline = time.monotonic() + timeout.total_seconds()

    def read(key: str) -> str | None:
        return store.get(key).decode() if store.check([key]) else None

    def wait_a_little():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other workers did not join within {timeout.total_seconds():.0f} s")
        time.sleep(0.02)

    if rank == 0:
        name, joining = secrets.token_hex(8), set(range(1, world))
        while joining:
            for r in sorted(joining):
                if read(f"steering/joined/{r}") == name:
                    joining.discard(r)
                elif (nonce := read(f"steering/hello/{r}")) is not None:
                    store.set(f"steering/answer/{r}", f"{nonce} {name}")
            if joining:
                wait_a_little()
    else:
        nonce = secrets.token_hex(8)
        store.set(f"steering/hello/{rank}", nonce)
        while (answer := read(f"steering/answer/{rank}")) is None or answer.split()[0] != nonce:
            wait_a_little()
        name = answer.split()[1]
        store.set(f"steering/joined/{rank}", name)
    return dist.PrefixStore(f"steering/round/{name}", store)


def stop(world: int):
    """Leave the process group once every rank is done."""
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def restarted(world: int, device: torch.device) -> bool:
    """True on every rank when torchrun restarted any of them after a failure (--max-restarts): the run
    resumes. A collective: each machine's agent counts only its own restarts."""
    mine = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if world == 1:
        return mine > 0
    count = torch.tensor([mine], dtype=torch.int64, device=device)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    return int(count) > 0


def broadcast_bytes(payload: bytes | None, rank: int, world: int, device: torch.device) -> bytes:
    """Rank 0's payload, on every rank."""
    if world == 1:
        return payload
    length = torch.tensor([len(payload) if rank == 0 else 0], dtype=torch.int64, device=device)
    dist.broadcast(length, 0)
    if int(length) == 0:
        return b""
    if rank == 0:
        buffer = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    else:
        buffer = torch.empty(int(length), dtype=torch.uint8, device=device)
    dist.broadcast(buffer, 0)
    return buffer.cpu().numpy().tobytes()


def agree(flag: bool, world: int, device: torch.device) -> bool:
    """Rank 0's flag, on every rank."""
    if world == 1:
        return flag
    value = torch.tensor([int(flag)], dtype=torch.int64, device=device)
    dist.broadcast(value, 0)
    return bool(value.item())


def gather_rng_states(sampler_gen: torch.Generator, world: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Every rank's batch sampler and torch RNG states (a collective): rank 0's as rng.sampler and
    rng.torch, rank r's as rng.sampler.r and rng.torch.r."""
    mine = [sampler_gen.get_state(), torch.get_rng_state()]
    per_rank = [mine]
    if world > 1:
        flat = torch.cat(mine).to(device)
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        per_rank = [list(g.cpu().split([len(m) for m in mine])) for g in gathered]
    states = {}
    for r, (sampler_state, torch_state) in enumerate(per_rank):
        suffix = f".{r}" if r else ""
        states[f"rng.sampler{suffix}"], states[f"rng.torch{suffix}"] = sampler_state, torch_state
    return states
