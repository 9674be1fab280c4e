"""Which GPUs to sample: the ones the engine computes on, named by UUID.

CUDA numbers the devices a process sees from CUDA_VISIBLE_DEVICES (indices or UUIDs); NVML's index
order is its own. Engine processes start with CUDA_DEVICE_ORDER=PCI_BUS_ID (engine/process.py),
so CUDA's device k is the k-th visible GPU in PCI bus order, and the engine's CUDA ordinals map to
NVML devices exactly. Once the engine runs, NVML's process lists say where its processes really
are (check_engine_gpus); a PID namespace that hides them leaves the choice unconfirmed.
A shot's GPU identity (whichshot.cluster.job_gpus) takes its GPUs outside Slurm by the same rule."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# The device order engines are started with unless their environment names one.
PCI_ORDER = "PCI_BUS_ID"

SEEN_ON_SAMPLED = "engine seen on the sampled GPU(s)"
NOT_IN_PROCESS_LISTS = "engine not in NVML's process lists (another PID namespace?)"
NO_GPU_ENGINE = "engine uses no GPU"
NOT_OUR_PROCESS = "not checked: whichshot did not start the engine (attached to a running server)"


@dataclass(frozen=True)
class GpuUse:
    """The CUDA devices an engine process computes on, in its own numbering (ordinals among the
    devices CUDA_VISIBLE_DEVICES leaves it); None: every device it sees; (): none."""

    ordinals: tuple[int, ...] | None
    env: Mapping[str, str] | None = None  # the engine's own environment overrides (config env)


NO_GPU = GpuUse(ordinals=())
EVERY_VISIBLE_GPU = GpuUse(ordinals=None)


@dataclass(frozen=True)
class NvmlDevice:
    """One GPU as NVML lists it."""

    index: int
    uuid: str
    pci_bus_id: str
    name: str


@dataclass(frozen=True)
class GpuChoice:
    """The GPUs to sample (by UUID), how they were found, and what stands in the way if none."""

    uuids: tuple[str, ...]
    how: str
    problem: str | None = None


def engine_environment(use: GpuUse, harness_env: Mapping[str, str]) -> dict[str, str]:
    """The CUDA variables the engine process starts with."""
    env = {**harness_env, **(use.env or {})}
    return {key: env[key] for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER") if key in env}


def visible_devices(value: str | None, devices: Sequence[NvmlDevice]) -> tuple[list[NvmlDevice], str | None]:
    """The devices CUDA_VISIBLE_DEVICES leaves, in CUDA's order, or a reason it cannot say.
    CUDA reads the list up to its first entry that names no device: the same is done here."""
    in_pci_order = sorted(devices, key=lambda d: d.pci_bus_id.lower())
    if value is None:
        return in_pci_order, None
    chosen: list[NvmlDevice] = []
    for entry in (e.strip() for e in value.split(",")):
        if entry.startswith("MIG-"):
            return [], f"CUDA_VISIBLE_DEVICES names a MIG instance ({entry}): its telemetry is not sampled"
        found = _named_device(entry, in_pci_order)
        if found is None:
            break
        if found not in chosen:
            chosen.append(found)
    return chosen, None


def _named_device(entry: str, in_pci_order: Sequence[NvmlDevice]) -> NvmlDevice | None:
    if entry.isdigit():
        position = int(entry)
        return in_pci_order[position] if position < len(in_pci_order) else None
    prefix = entry if entry.startswith("GPU-") else f"GPU-{entry}"
    matches = [d for d in in_pci_order if d.uuid.startswith(prefix)] if len(prefix) > 4 else []
    return matches[0] if len(matches) == 1 else None


def choose_gpus(use: GpuUse, harness_env: Mapping[str, str], devices: Sequence[NvmlDevice]) -> GpuChoice:
    """The GPUs the engine computes on, from its device numbering and its CUDA environment."""
    if use.ordinals == ():
        return GpuChoice((), NO_GPU_ENGINE)
    env = engine_environment(use, harness_env)
    order = env.get("CUDA_DEVICE_ORDER", PCI_ORDER)
    visible, problem = visible_devices(env.get("CUDA_VISIBLE_DEVICES"), devices)
    if problem:
        return GpuChoice((), "not chosen", problem)
    if order != PCI_ORDER and len(visible) > 1 and use.ordinals != tuple(range(len(visible))):
        reason = (
            f"CUDA_DEVICE_ORDER={order}: CUDA's numbering of the {len(visible)} visible GPUs is not known"
        )
        return GpuChoice((), "not chosen", reason)
    ordinals = range(len(visible)) if use.ordinals is None else use.ordinals
    missing = [o for o in ordinals if o >= len(visible)]
    if missing or not visible:
        wanted = missing or list(ordinals)
        reason = f"the engine's CUDA device(s) {wanted} are not among the {len(visible)} visible"
        return GpuChoice((), "not chosen", reason)
    uuids = tuple(visible[o].uuid for o in ordinals)
    return GpuChoice(uuids, _how(env, use))


def _how(env: Mapping[str, str], use: GpuUse) -> str:
    which = "every visible device" if use.ordinals is None else f"CUDA device(s) {list(use.ordinals)}"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    among = f"CUDA_VISIBLE_DEVICES={visible}" if visible is not None else "all GPUs visible"
    return f"the engine's {which}, {among}, PCI bus order"


def check_engine_gpus(
    sampled: Iterable[str], engine_pids: set[int], pids_by_uuid: Mapping[str, set[int]]
) -> str:
    """Whether NVML's process lists put the engine's processes on the sampled GPUs."""
    on = sorted(uuid for uuid, pids in pids_by_uuid.items() if pids & engine_pids)
    if not on:
        return NOT_IN_PROCESS_LISTS
    elsewhere = sorted(set(on) - set(sampled))
    if elsewhere:
        return "engine seen on GPU(s) not sampled: " + ", ".join(elsewhere)
    idle = sorted(set(sampled) - set(on))
    if idle:
        return "engine not seen on sampled GPU(s), their readings summed in: " + ", ".join(idle)
    return SEEN_ON_SAMPLED
