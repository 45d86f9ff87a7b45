"""Distributed training under the runtime checker (torchrun, DDP, DataParallel, FSDP).

Who this process is: rank, local rank and world size come from the process group when it is
up, else from torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, or SLURM's).

What is observed (no host-device synchronisation on the hot path):

* ``DistributedDataParallel.__init__`` and ``DataParallel.__init__`` are wrapped (class level)
  to put a forward pre-hook on each wrapper instance. The hook reads
  ``require_backward_grad_sync`` (what ``no_sync()`` sets; DDP honours the value it has at
  forward time) and the leading dimension of the first input tensor (a host-side shape).
* Before each backward (``GradTracker._before``) the flag of the forward whose graph is
  back-propagated is filed as one DDP micro-batch, together with the flag at backward time
  (``no_sync()`` around the backward only is LC502).
* When an optimizer window closes, ``checks.ddp`` decides LC501/LC502 from the micro-batch
  flags and ``checks.consistency`` samples a few gradient and parameter elements every K steps.
* FSDP1 (``FullyShardedDataParallel``) and FSDP2 (``fully_shard``) modules are counted only:
  their per-micro-batch reduce-scatter is what they are meant to do, so it is never LC501.

At exit every rank writes its part and rank 0 merges them (``output.parts``, ``output.merge``);
the process group's key-value store is kept here because it outlives ``destroy_process_group``."""
from __future__ import annotations

import os
import socket
import sys
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..callsite import Site, user_site
from ..checks import ddp as ddp_checks
from ..patching import replace_attr

if TYPE_CHECKING:
    from ..session import Session
    from ..state import BackwardInfo, OptimizerRecord

# The forward pre-hook watches this many training forwards of each wrapper (usual batch size,
# exact pairing of forwards and backward passes), then it is removed: a module with hooks takes
# nn.Module's slower call path. Afterwards the sync decision of the last forward is read from
# ``require_forward_param_sync``, which DDP's forward sets to what it decided.
HOOKED_FORWARDS = 64
_COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "reduce_scatter", "reduce_scatter_tensor", "reduce")
_sessions_started = 0  # keys in the store are per session (several sessions in one process)


@dataclass
class RankInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    source: str = "default"  # "process-group" | "env" | "slurm" | "default"

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def detect_rank(torch: Any = None) -> RankInfo:
    """Rank and world size from the process group when it is initialised, else torchrun's
    (or SLURM's) environment; a plain process is rank 0 of 1."""
    info = RankInfo()
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is not None or world is not None:
        info.source = "env"
    elif _env_int("SLURM_PROCID") is not None and (_env_int("SLURM_NTASKS") or 1) > 1:
        rank, world, info.source = _env_int("SLURM_PROCID"), _env_int("SLURM_NTASKS"), "slurm"
    info.rank, info.world_size = rank or 0, world or 1
    info.local_rank = _env_int("LOCAL_RANK", "SLURM_LOCALID") or 0
    info.local_world_size = _env_int("LOCAL_WORLD_SIZE") or (1 if info.world_size == 1 else info.world_size)
    dist = getattr(torch, "distributed", None) if torch is not None else sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            info.rank, info.world_size, info.source = dist.get_rank(), dist.get_world_size(), "process-group"
    except Exception:  # noqa: BLE001, S110 - a half torn-down group: keep the environment's answer
        pass
    return info


@dataclass(eq=False)
class DdpState:
    """One DDP (or DataParallel) wrapper and its micro-batches in the current window."""

    module: weakref.ref[Any]
    kind: str  # "DistributedDataParallel" | "DataParallel"
    site: Site | None
    first_param: weakref.ref[Any] | None
    grad_bytes: int
    devices: int  # DataParallel: GPUs the batch is split over; DDP: 1
    batchnorms: int  # BatchNorm layers that are not SyncBatchNorm
    pending: bool | None = None  # flag of a forward whose backward has not run yet
    handle: Any = None  # the forward pre-hook, until HOOKED_FORWARDS forwards were seen
    window: list[tuple[bool, bool, Site | None]] = field(default_factory=list)  # (fwd, bwd, site)
    batch_sizes: Counter[int] = field(default_factory=Counter)
    forwards: int = 0
    micro_batches: int = 0
    synced: int = 0
    windows: int = 0
    redundant_allreduces: int = 0
    unsynced_last: int = 0
    backward_only_no_sync: int = 0
    owner: Any = None  # OptimizerRecord whose steps close this wrapper's windows
    owner_tries: int = 0

    def as_json(self) -> dict[str, Any]:
        batch = self.batch_sizes.most_common(1)[0][0] if self.batch_sizes else None
        return {"type": self.kind, "created_at": str(self.site) if self.site else None,
                "gradient_bytes": self.grad_bytes, "batchnorm_layers": self.batchnorms,
                "per_device_batch": self.per_device(batch),
                "micro_batches": self.micro_batches, "synced_micro_batches": self.synced,
                "windows": self.windows, "redundant_allreduces": self.redundant_allreduces,
                "redundant_allreduce_bytes": self.redundant_allreduces * self.grad_bytes,
                "unsynced_last_micro_batches": self.unsynced_last,
                "no_sync_around_backward_only": self.backward_only_no_sync}

    def per_device(self, batch: int | None) -> int | None:
        if batch is None:
            return None
        return -(-batch // self.devices) if self.devices > 1 else batch


class DistributedHooks:
    def __init__(self, session: Session) -> None:
        global _sessions_started
        _sessions_started += 1
        self.session = session
        self.number = _sessions_started
        self.ddp: list[DdpState] = []
        self.fsdp: Counter[str] = Counter()
        self.store: Any = None
        self.backend: str | None = None
        self.rank_seen = detect_rank()
        self.started_wall = time.time()
        self.collectives = 0  # all_reduce / reduce_scatter calls made by the script
        from ..checks.consistency import ConsistencySampler

        self.consistency = ConsistencySampler(session, every=consistency_every())

    # -- install -----------------------------------------------------------------------
    def install(self) -> None:
        import torch

        stack = self.session.stack
        replace_attr(stack, torch.nn.DataParallel, "__init__", self._wrap_init("DataParallel"))
        if not torch.distributed.is_available():
            return
        from torch.nn.parallel import DistributedDataParallel

        replace_attr(stack, DistributedDataParallel, "__init__", self._wrap_init("DistributedDataParallel"))
        # manual gradient averaging (dist.all_reduce(p.grad)): counted, so that ranks stepping
        # with no DDP, FSDP or collective at all can be told apart (each trains its own replica)
        from torch.distributed import distributed_c10d

        for name in _COLLECTIVES:
            for owner in (torch.distributed, distributed_c10d):
                if name in vars(owner):
                    replace_attr(stack, owner, name, self._wrap_collective)
        if torch.distributed.is_initialized():  # watch() in a notebook: DDP models built before it
            import gc

            for obj in gc.get_objects():
                if issubclass(type(obj), DistributedDataParallel):  # type(): no lazy-module side effects
                    self.session.guard.call("DDP tracking", self._register, obj, "DistributedDataParallel")

    def _wrap_init(self, kind: str) -> Any:
        guard = self.session.guard

        def make(original: Any) -> Any:
            def __init__(wrapper: Any, *args: Any, **kwargs: Any) -> None:
                original(wrapper, *args, **kwargs)
                guard.call("DDP tracking", self._register, wrapper, kind)

            return __init__

        return make

    def _wrap_collective(self, original: Any) -> Any:
        def collective(*args: Any, **kwargs: Any) -> Any:
            self.collectives += 1
            return original(*args, **kwargs)

        return collective

    def _register(self, wrapper: Any, kind: str) -> None:
        import torch

        self._capture_store()
        if any(state.module() is wrapper for state in self.ddp):
            return
        params = [p for p in wrapper.parameters() if p.requires_grad]
        batchnorms = [m for m in wrapper.modules()
                      if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                      and not isinstance(m, torch.nn.SyncBatchNorm)]
        devices = len(getattr(wrapper, "device_ids", None) or []) if kind == "DataParallel" else 1
        state = DdpState(weakref.ref(wrapper), kind, user_site(),
                         weakref.ref(params[0]) if params else None,
                         sum(p.numel() * p.element_size() for p in params), max(devices, 1),
                         len(batchnorms))
        self.ddp.append(state)
        state.handle = wrapper.register_forward_pre_hook(self._forward_hook(state), with_kwargs=True)
        self.session.stack.callback(state.handle.remove)

    def _forward_hook(self, state: DdpState) -> Any:
        is_grad_enabled = __import__("torch").is_grad_enabled
        guard = self.session.guard

        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if module.training and is_grad_enabled() and guard.active("DDP tracking"):
                guard.call("DDP tracking", note, module, args, kwargs)

        def note(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            state.forwards += 1
            state.pending = bool(getattr(module, "require_backward_grad_sync", True))
            first = args[0] if args else next(iter(kwargs.values()), None)
            shape = getattr(first, "shape", None)  # host-side
            if shape is not None and len(shape) >= 1:
                state.batch_sizes[int(shape[0])] += 1
            if state.forwards >= HOOKED_FORWARDS and state.kind != "DataParallel" \
                    and hasattr(module, "require_forward_param_sync"):
                state.handle.remove()
                state.handle = None

        return hook

    # -- events (called by the session) --------------------------------------------------
    def before_backward(self, info: BackwardInfo) -> None:
        for state in self.ddp:
            module = state.module()
            if module is None or not module.training or state.kind == "DataParallel":
                continue  # DataParallel: one process, no sync flag
            if state.handle is None:  # past HOOKED_FORWARDS: what DDP's last forward decided
                state.pending = bool(module.require_forward_param_sync)
            elif state.pending is None:
                continue
            now = bool(getattr(module, "require_backward_grad_sync", True))
            state.window.append((state.pending, now, info.site))
            state.pending = None

    def on_window_closed(self, record: OptimizerRecord) -> None:
        """``record``'s window is about to be closed (its step ran or was skipped)."""
        if self.store is None:
            self._capture_store()
        index = record.steps + record.skipped
        for state in self.ddp:
            if state.owner is None and state.first_param is not None and state.owner_tries < 64:
                state.owner_tries += 1  # a wrapper whose parameters no optimizer holds: stop looking
                state.owner = self._owner_of(state.first_param())
            if state.owner is record:
                ddp_checks.close_window(self.session, state, index)
        owned = [s for s in self.ddp if s.owner is record and s.kind != "DataParallel"]
        if owned:  # DataParallel has one process: nothing to compare
            self.consistency.on_step(index, owned)

    def _trained_params(self) -> set[int]:
        """ids of the parameters of the optimizers that stepped or back-propagated here."""
        ids: set[int] = set()
        for record in self.session.records:
            optimizer = record.ref()
            if optimizer is not None and record.active:
                ids.update(id(p) for group in optimizer.param_groups for p in group["params"])
        return ids

    def _owner_of(self, param: Any) -> OptimizerRecord | None:
        """The record of the optimizer holding ``param`` (by identity: ids of freed parameters
        of optimizers from an earlier run in the same process can come back)."""
        if param is None:
            return None
        for record in self.session.records:
            optimizer = record.ref()
            if optimizer is not None and any(p is param for group in optimizer.param_groups
                                             for p in group["params"]):
                return record
        return None

    def finish(self) -> None:
        """End of run, before the hooks are removed: BatchNorm verdict, pending samples."""
        for state in self.ddp:
            ddp_checks.batchnorm(self.session, state, self.rank().world_size)
        self.fsdp = _count_fsdp(self._trained_params())
        self.consistency.finish()

    # -- who we are ----------------------------------------------------------------------
    def rank(self) -> RankInfo:
        info = detect_rank(self.session.torch)
        if info.source != "process-group" and self.rank_seen.world_size > info.world_size:
            return self.rank_seen
        return info

    def _capture_store(self) -> None:
        """Keep the process group's key-value store: it outlives ``destroy_process_group``."""
        dist = self.session.torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            return
        self.backend = str(dist.get_backend())
        # the group may be destroyed before exit (mp.spawn jobs may set no RANK/WORLD_SIZE)
        self.rank_seen = detect_rank(self.session.torch)
        try:
            self.store = dist.distributed_c10d._get_default_store()
        except Exception:  # noqa: BLE001 - a private helper: merge from the files instead
            self.store = None

    # -- the report's "distributed" section ---------------------------------------------
    def section(self) -> dict[str, Any]:
        info = self.rank()
        return {
            "rank": info.rank, "local_rank": info.local_rank, "world_size": info.world_size,
            "local_world_size": info.local_world_size, "rank_source": info.source,
            "host": socket.gethostname(), "backend": self.backend,
            "run_id": os.environ.get("TORCHELASTIC_RUN_ID"),
            "effective_batch": self.effective_batch(info.world_size),
            "gradient_sync": {"ddp": sum(s.kind == "DistributedDataParallel" for s in self.ddp),
                              "fsdp": sum(self.fsdp.values()), "collectives": self.collectives},
            "ddp": [state.as_json() for state in self.ddp],
            "fsdp": dict(self.fsdp),
            "consistency": self.consistency.as_json(),
        }

    def effective_batch(self, world_size: int) -> dict[str, Any] | None:
        """micro-batch x backward passes per step x world size, from what was measured."""
        record = self.session.main_record()
        if record is None or not record.sizes:
            return None
        per_step = record.sizes.most_common(1)[0][0]
        micro, source = None, None
        for state in self.ddp:
            if state.batch_sizes:
                micro, source = state.batch_sizes.most_common(1)[0][0], f"{state.kind} input"
                micro = state.per_device(micro) if state.kind == "DataParallel" else micro
                break
        if micro is None and self.session.data.batch_sizes:
            loaders = Counter(h.epochs[0][0] for h in record.history if h.epochs)
            loader = loaders.most_common(1)[0][0] if loaders else None
            micro = self.session.data.batch_sizes.get(loader) if loader is not None else None
            source = "DataLoader batch_size" if micro else None
        devices = max((s.devices for s in self.ddp if s.kind == "DataParallel"), default=1)
        synced = any(s.kind == "DistributedDataParallel" for s in self.ddp) or self.fsdp or self.collectives
        # ranks that never exchange gradients train one replica each: their batches do not add up
        replicas = (world_size if synced else 1) * devices
        return {"micro_batch": micro, "backward_per_step": per_step, "replicas": replicas,
                "effective_batch": micro * per_step * replicas if micro else None,
                "micro_batch_source": source}

def _count_fsdp(trained: set[int]) -> Counter[str]:
    """FSDP modules holding parameters of the watched optimizers (``trained``: their ids), for
    the report only (FSDP's per-micro-batch reduce-scatter is intended, never LC501). Nothing
    is wrapped for them: FSDP2's ``fully_shard`` turns a module's class into a subclass of
    ``FSDPModule``, FSDP1 is a ``FullyShardedDataParallel``; the garbage collector is asked only
    when the script imported ``torch.distributed.fsdp``."""
    found: Counter[str] = Counter()
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is None:
        return found
    import gc

    kinds = [(getattr(fsdp, "FullyShardedDataParallel", None), "FSDP1"),
             (getattr(fsdp, "FSDPModule", None), "FSDP2")]
    kinds = [(cls, name) for cls, name in kinds if isinstance(cls, type)]
    for obj in gc.get_objects():
        for cls, name in kinds:
            # type(): no lazy-module or proxy side effects
            if issubclass(type(obj), cls) and any(id(p) in trained for p in obj.parameters()):
                found[name] += 1
    return found


def consistency_every() -> int:
    """Steps between two cross-rank consistency samples: ``--consistency-every K``
    (``LOOPCHECK_CONSISTENCY_EVERY``); 0 turns the check off (``--no-consistency-check``)."""
    value = os.environ.get("LOOPCHECK_CONSISTENCY_EVERY", "")
    return int(value) if value.strip().isdigit() else 16


def add_run_arguments(parser: Any) -> None:
    """``loopcheck run``'s options for distributed jobs (added by ``command.add_run_arguments``)."""
    parser.add_argument("--consistency-every", type=int, metavar="K", default=None,
                        help="compare a few gradient and parameter elements across ranks every K "
                             "optimizer steps (default 16; 0 turns it off)")
    parser.add_argument("--no-consistency-check", action="store_true",
                        help="do not sample gradients for the cross-rank consistency check")


def configure(args: Any) -> None:
    """Pass the options above to the session through the environment (``watch()`` reads it too)."""
    if getattr(args, "no_consistency_check", False):
        os.environ["LOOPCHECK_CONSISTENCY_EVERY"] = "0"
    elif getattr(args, "consistency_every", None) is not None:
        os.environ["LOOPCHECK_CONSISTENCY_EVERY"] = str(max(args.consistency_every, 0))

