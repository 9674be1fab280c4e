"""Telemetry follows the GPU(s) the engine computes on, by UUID: CUDA_VISIBLE_DEVICES (indices or
UUIDs) and the engine's own device number pick them in PCI bus order, whatever NVML's index order;
NVML's process lists then confirm the engine is there. NVML is a stand-in here (no GPU on this
machine): four GPUs whose NVML order is not their PCI order."""

import subprocess
import sys
import time
from types import SimpleNamespace

import pynvml
import pytest

from whichshot.cluster import cluster_identity
from whichshot.engine import load_engine
from whichshot.engine.base import ServerSettings
from whichshot.engine.process import EngineProcess
from whichshot.measure.series import RecorderTelemetry
from whichshot.telemetry import TelemetryRecorder, close_backends, open_backends
from whichshot.telemetry import nvml as nvml_backend
from whichshot.telemetry.gpus import (
    EVERY_VISIBLE_GPU,
    NO_GPU,
    NOT_IN_PROCESS_LISTS,
    SEEN_ON_SAMPLED,
    GpuUse,
    NvmlDevice,
    check_engine_gpus,
    choose_gpus,
)

# NVML index -> (UUID, PCI bus id, power in mW). PCI order: C (index 2), A (0), D (3), B (1).
FAKE_GPUS = {
    0: ("GPU-aaaa1111", "00000000:19:00.0", 100_000),
    1: ("GPU-bbbb2222", "00000000:DB:00.0", 200_000),
    2: ("GPU-cccc3333", "00000000:04:00.0", 300_000),
    3: ("GPU-dddd4444", "00000000:3B:00.0", 400_000),
}
IN_PCI_ORDER = ["GPU-cccc3333", "GPU-aaaa1111", "GPU-dddd4444", "GPU-bbbb2222"]
DEVICES = [NvmlDevice(i, uuid, bus, "H200") for i, (uuid, bus, _) in FAKE_GPUS.items()]


@pytest.fixture
def fake_nvml(monkeypatch):
    """pynvml with four GPUs; running processes per NVML index are the fixture's to set."""
    running: dict[int, list[int]] = {}
    handle = SimpleNamespace
    handles = {i: handle(index=i) for i in FAKE_GPUS}
    patches = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(FAKE_GPUS),
        "nvmlDeviceGetHandleByIndex": lambda i: handles[i],
        "nvmlDeviceGetName": lambda h: "NVIDIA H200",
        "nvmlDeviceGetUUID": lambda h: FAKE_GPUS[h.index][0],
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=FAKE_GPUS[h.index][1].encode()),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            SimpleNamespace(pid=p) for p in running.get(h.index, [])
        ],
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
        "nvmlGpmQueryDeviceSupport": lambda h: SimpleNamespace(isSupportedDevice=0),
    }
    for name, fake in patches.items():
        monkeypatch.setattr(pynvml, name, fake)
    readers = {
        "clock_sm_mhz": lambda h: 1980 - 100 * h.index,
        "clock_mem_mhz": lambda h: 3201,
        "power_mw": lambda h: FAKE_GPUS[h.index][2],
        "energy_mj": lambda h: 1_000_000 * (h.index + 1),
        "temp_c": lambda h: 40 + h.index,
        "clocks_event_reasons": lambda h: 0,
    }
    for field, reader in readers.items():
        monkeypatch.setitem(nvml_backend.READERS, field, reader)
    return running


def read_once(use: GpuUse, env: dict[str, str], monkeypatch):
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    backends, caveats, gpus = open_backends(["nvml"], use)
    try:
        return (backends[0].read(full=True).values if backends else None), caveats, gpus
    finally:
        close_backends(backends)


@pytest.mark.parametrize(
    ("use", "env", "sampled"),
    [
        (EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "1"}, ["GPU-aaaa1111"]),  # CUDA 1 = PCI 2nd, NVML 0
        (GpuUse((0,)), {}, ["GPU-cccc3333"]),  # no CUDA_VISIBLE_DEVICES: PCI first, NVML index 2
        (GpuUse((1,)), {"CUDA_VISIBLE_DEVICES": "3,2"}, ["GPU-dddd4444"]),  # cuda:1 of the list
        (EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, ["GPU-bbbb2222"]),  # a UUID prefix
        (EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "0,7,1"}, ["GPU-cccc3333"]),  # CUDA stops at 7
        (GpuUse((0,), env={"CUDA_VISIBLE_DEVICES": "2"}), {"CUDA_VISIBLE_DEVICES": "0"}, ["GPU-dddd4444"]),
    ],
)
def test_the_sampled_gpu_is_the_engines(fake_nvml, monkeypatch, use, env, sampled):
    values, _caveats, gpus = read_once(use, env, monkeypatch)
    assert list(gpus.uuids) == sampled and values["gpu_uuid"] == sampled[0]
    index = next(i for i, gpu in FAKE_GPUS.items() if gpu[0] == sampled[0])
    assert values["gpu_power_w"] == FAKE_GPUS[index][2] / 1000  # this GPU's reading, not GPU 0's


def test_an_engine_over_two_gpus_gives_their_combined_readings(fake_nvml, monkeypatch):
    values, _caveats, gpus = read_once(EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "0,1"}, monkeypatch)
    assert gpus.uuids == ("GPU-cccc3333", "GPU-aaaa1111")
    assert values["gpu_uuid"] == "GPU-cccc3333|GPU-aaaa1111" and values["gpu_index"] is None
    assert values["gpu_power_w"] == 400.0 and values["gpu_energy_j"] == 4000.0  # summed
    assert values["gpu_sm_clock_mhz"] == 1780 and values["gpu_temp_c"] == 42  # slowest, hottest


@pytest.mark.parametrize(
    ("use", "env", "problem"),
    [
        (GpuUse((2,)), {"CUDA_VISIBLE_DEVICES": "0,1"}, "not among the 2 visible"),
        (EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "MIG-1234"}, "MIG instance"),
        (
            GpuUse((1,)),
            {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
            "numbering of the 4 visible GPUs is not known",
        ),
        (EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": ""}, "not among the 0 visible"),
    ],
)
def test_an_unknowable_gpu_is_not_measured_never_gpu_0(fake_nvml, monkeypatch, use, env, problem):
    values, caveats, gpus = read_once(use, env, monkeypatch)
    assert values is None and gpus.uuids == () and problem in gpus.problem
    assert {c["sensor"] for c in caveats} >= {"gpu_power_w", "gpu_energy_j"}
    assert all(problem in c["reason"] for c in caveats)


def test_an_engine_on_no_gpu_gets_no_gpu_telemetry(fake_nvml, monkeypatch):
    values, caveats, gpus = read_once(NO_GPU, {}, monkeypatch)
    assert values is None and gpus.how == "engine uses no GPU"
    assert caveats and all(c["reason"] == "engine uses no GPU" for c in caveats)


def test_the_config_can_still_name_an_nvml_index(fake_nvml, monkeypatch):
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(key, raising=False)
    backends, _caveats, gpus = open_backends(["nvml:3"], NO_GPU)
    assert gpus.uuids == ("GPU-dddd4444",) and "NVML index 3" in gpus.how
    close_backends(backends)


def test_each_kind_says_which_cuda_devices_it_uses():
    settings = ServerSettings(
        threads=1, context_tokens=512, engine_spec={"env": {"CUDA_VISIBLE_DEVICES": "3"}}
    )
    assert load_engine("transformers").gpu_use({"device": "cuda:1"}, settings) == GpuUse((1,))
    assert load_engine("transformers").gpu_use({"device": "cuda"}, settings) == GpuUse((0,))
    assert load_engine("transformers").gpu_use({"device": "cpu"}, settings) == NO_GPU
    assert load_engine("llama_cpp").gpu_use({"identity": {"backend": "cuda"}}, settings) == EVERY_VISIBLE_GPU
    assert load_engine("llama_cpp").gpu_use({"identity": {"backend": "cpu"}}, settings) == NO_GPU
    openai = load_engine("openai").gpu_use({}, settings)
    assert openai.ordinals is None and openai.env == {"CUDA_VISIBLE_DEVICES": "3"}
    chosen = choose_gpus(openai, {"CUDA_VISIBLE_DEVICES": "0"}, DEVICES)  # its own env wins
    assert chosen.uuids == ("GPU-bbbb2222",)


def test_nvml_process_lists_confirm_or_contradict_the_choice(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    backends, caveats, gpus = open_backends(["nvml"], EVERY_VISIBLE_GPU)  # samples GPU-aaaa (NVML 0)
    telemetry = RecorderTelemetry(TelemetryRecorder(backends, interval_s=1.0), caveats, gpus)
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    engine_pid, other_pid, hidden_pid = (p.pid for p in sleepers)  # they stand in for engines
    fake_nvml[0], fake_nvml[1] = [engine_pid], [other_pid]
    try:
        assert telemetry.gpu_check(engine_pid) == SEEN_ON_SAMPLED
        assert "not sampled: GPU-bbbb2222" in telemetry.gpu_check(other_pid)
        assert telemetry.gpu_check(hidden_pid) == NOT_IN_PROCESS_LISTS
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    now = time.monotonic()
    summary = telemetry.summarize(now - 1, now, 10, engine_pid)
    assert summary["telemetry_gpus"] == "GPU-aaaa1111"
    assert summary["telemetry_gpu_check"] == SEEN_ON_SAMPLED
    assert "CUDA_VISIBLE_DEVICES=1" in summary["telemetry_gpu_choice"]
    close_backends(backends)


def test_check_names_sampled_gpus_the_engine_is_not_on():
    said = check_engine_gpus(["GPU-a", "GPU-b"], {7}, {"GPU-a": {7}, "GPU-b": {9}})
    assert said == "engine not seen on sampled GPU(s), their readings summed in: GPU-b"


def test_engine_processes_number_cuda_devices_in_pci_order(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    show = "import os; print(os.environ.get('CUDA_DEVICE_ORDER'))"
    for env, expected in ((None, "PCI_BUS_ID"), ({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, "FASTEST_FIRST")):
        log = tmp_path / f"{expected}.log"
        process = EngineProcess([sys.executable, "-c", show], log, env=env)
        process.popen.wait(timeout=30)
        assert log.read_text().strip() == expected


def test_a_gpu_the_cgroup_withholds_is_not_numbered(fake_nvml, monkeypatch):
    """Slurm's ConstrainDevices: NVML lists GPU-cccc (PCI first) but may not open it; CUDA's
    device 0 is then the first GPU the job may use."""
    opened = pynvml.nvmlDeviceGetHandleByIndex

    def withheld(index):
        if index == 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        return opened(index)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", withheld)
    values, _caveats, gpus = read_once(EVERY_VISIBLE_GPU, {"CUDA_VISIBLE_DEVICES": "0"}, monkeypatch)
    assert gpus.uuids == ("GPU-aaaa1111",) and values["gpu_power_w"] == 100.0


@pytest.mark.parametrize("visible", [None, "1", "3,0", "GPU-dddd", "", "MIG-1234"])
def test_the_shots_gpu_identity_names_the_gpus_telemetry_samples(fake_nvml, monkeypatch, visible):
    """One rule for which GPUs a job outside Slurm uses: the shot's identity (whichshot.cluster)
    describes the very GPUs telemetry samples for an engine on every visible GPU."""
    monkeypatch.setattr(pynvml, "nvmlDeviceGetEnforcedPowerLimit", lambda h: FAKE_GPUS[h.index][2])
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMaxClockInfo", lambda h, _clock: 1980)
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: "580.95.05")
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    _values, _caveats, gpus = read_once(EVERY_VISIBLE_GPU, env, monkeypatch)
    identity = cluster_identity(env)
    assert (identity["gpu_uuid"] or "") == ",".join(gpus.uuids)
    power_w = [FAKE_GPUS[i][2] / 1000 for i, gpu in FAKE_GPUS.items() if gpu[0] in gpus.uuids]
    assert identity["gpu_power_limit_w"] == (sum(power_w) if power_w else None)
