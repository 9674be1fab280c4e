"""Telemetry: parsers on recorded samples, sysfs trees, the sampler thread, per-shot summaries."""

import json
import math
import statistics
import sys
import time
from pathlib import Path

import pynvml
import pytest

from whichshot.telemetry import (
    LINUX_COLUMNS,
    MAC_COLUMNS,
    NVML_COLUMNS,
    SAMPLE_COLUMNS,
    SUMMARY_COLUMNS,
    THERMAL_REASONS,
    Reading,
    TelemetryRecorder,
    decode_throttle_reasons,
    open_backends,
    parse_powermetrics,
    summarize_shot,
)
from whichshot.telemetry import nvml as nvml_backend
from whichshot.telemetry.linux import (
    SOURCE_PROC_CPUINFO,
    SOURCE_SCALING_CUR_FREQ,
    open_linux,
    unwrap_delta_uj,
)
from whichshot.telemetry.powermetrics import (
    PowermetricsBackend,
    open_powermetrics,
    powermetrics_argv,
)

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
H200_FIXTURE = FIXTURES / "nvml_h200.json"
RAPL_MAX_RANGE_UJ = 262143328850  # max_energy_range_uj as Intel packages commonly report it


# --- NVML -----------------------------------------------------------------------------------


def _reason(suffix: str) -> int:
    return getattr(pynvml, "nvmlClocksEventReason" + suffix)


def test_throttle_mask_decodes_with_pynvml_constants() -> None:
    mask = _reason("SwPowerCap") | _reason("HwSlowdown")
    assert decode_throttle_reasons(mask) == ["sw_power_cap", "hw_slowdown"]
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(_reason("GpuIdle")) == ["gpu_idle"]


def test_every_reason_bit_round_trips_and_unknown_bits_are_kept() -> None:
    suffixes = {
        "GpuIdle": "gpu_idle",
        "ApplicationsClocksSetting": "applications_clocks_setting",
        "SwPowerCap": "sw_power_cap",
        "HwSlowdown": "hw_slowdown",
        "SyncBoost": "sync_boost",
        "SwThermalSlowdown": "sw_thermal_slowdown",
        "HwThermalSlowdown": "hw_thermal_slowdown",
        "HwPowerBrakeSlowdown": "hw_power_brake_slowdown",
        "DisplayClockSetting": "display_clock_setting",
    }
    for suffix, name in suffixes.items():
        assert decode_throttle_reasons(_reason(suffix)) == [name]
    assert decode_throttle_reasons(1 << 40) == ["unknown_bit_40"]
    assert set(THERMAL_REASONS) == {"sw_thermal_slowdown", "hw_thermal_slowdown"}


def test_decode_converts_units_and_keeps_missing_as_none() -> None:
    raw = {
        "index": 0,
        "name": "NVIDIA H200",
        "clock_sm_mhz": 1755,
        "clock_mem_mhz": 3201,
        "power_mw": 690512,
        "energy_mj": 123456789,
        "temp_c": 61,
        "clocks_event_reasons": _reason("SwPowerCap"),
        "gpm_dram_bw_util_pct": None,
        "gpm_sm_util_pct": 97.5,
    }
    columns = nvml_backend.decode(raw)
    assert set(columns) == set(NVML_COLUMNS)
    assert columns["gpu_power_w"] == pytest.approx(690.512)
    assert columns["gpu_energy_j"] == pytest.approx(123456.789)
    assert columns["gpu_throttle_reasons"] == "sw_power_cap"
    assert columns["gpu_dram_bw_util_pct"] is None
    no_reasons = nvml_backend.decode({**raw, "clocks_event_reasons": 0, "power_mw": None})
    assert no_reasons["gpu_throttle_reasons"] == ""
    assert no_reasons["gpu_power_w"] is None
    assert nvml_backend.decode({})["gpu_throttle_reasons"] is None


def test_nvml_backend_reads_energy_only_when_due_or_full(monkeypatch) -> None:
    calls: list[str] = []
    for field, value in (("clock_sm_mhz", 1980), ("power_mw", 80000), ("energy_mj", 5000)):
        monkeypatch.setitem(nvml_backend.READERS, field, lambda h, f=field, v=value: calls.append(f) or v)
    fields = ("clock_sm_mhz", "power_mw", "energy_mj")
    static = {"index": 0, "name": "test GPU", "uuid": "GPU-test"}
    gpu = nvml_backend._Gpu(None, static, fields, gpm=None)
    backend = nvml_backend.NvmlBackend([gpu], energy_interval_s=3600)
    first, second, marked = backend.read(), backend.read(), backend.read(full=True)
    assert first.values["gpu_energy_j"] == 5.0
    assert second.values["gpu_energy_j"] is None  # not read this tick: no value, no error
    assert second.errors == {}
    assert second.values["gpu_sm_clock_mhz"] == 1980
    assert marked.values["gpu_energy_j"] == 5.0
    assert calls.count("energy_mj") == 2
    assert calls.count("clock_sm_mhz") == 3


def test_decode_recorded_h200_samples() -> None:
    fixture = json.loads(H200_FIXTURE.read_text())
    context = fixture["context"]
    records = fixture["samples"]
    decoded = [nvml_backend.decode({**fixture["gpu"], **r["raw"]}) for r in records]
    assert "H200" in decoded[0]["gpu_name"]
    for record, columns in zip(records, decoded, strict=True):
        assert record["raw"]["errors"] == {}
        assert 0 < columns["gpu_sm_clock_mhz"] <= context["max_clock_sm_mhz"]
        assert 0 < columns["gpu_mem_clock_mhz"] <= context["max_clock_mem_mhz"]
        assert columns["gpu_power_w"] == record["raw"]["power_mw"] / 1000
        assert 0 < columns["gpu_power_w"] <= context["enforced_power_limit_mw"] / 1000 * 1.05
        assert 0 < columns["gpu_temp_c"] < 100
        reasons = columns["gpu_throttle_reasons"].split("|") if columns["gpu_throttle_reasons"] else []
        assert set(reasons) <= set(nvml_backend.REASON_ORDER)
        for pct in (columns["gpu_dram_bw_util_pct"], columns["gpu_sm_util_pct"]):
            assert pct is None or 0.0 <= pct <= 100.0
    energies_j = [c["gpu_energy_j"] for c in decoded]
    assert energies_j == sorted(energies_j)  # a cumulative counter never goes back
    by_phase = {
        phase: [c for r, c in zip(records, decoded, strict=True) if r["phase"] == phase]
        for phase in ("idle", "load")
    }
    idle_w = statistics.median(c["gpu_power_w"] for c in by_phase["idle"])
    if by_phase["load"]:
        assert statistics.median(c["gpu_power_w"] for c in by_phase["load"]) > idle_w
    # NVML power is a trailing average: right after the load, with the SMs already idle,
    # it still reads far above idle. This is why sub-second power medians are flagged.
    drained = [
        c
        for r, c in zip(records, decoded, strict=True)
        if r["phase"] == "after_load" and c["gpu_sm_util_pct"] == 0.0
    ]
    if drained:
        assert drained[0]["gpu_power_w"] > 2 * idle_w


def _fail_nvml_init() -> None:
    raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the linux backend needs Linux")
def test_auto_without_nvidia_driver_gives_linux_only_and_gpu_caveats(monkeypatch) -> None:
    monkeypatch.setattr(pynvml, "nvmlInit", _fail_nvml_init)
    backends, caveats, gpus = open_backends(["auto"])
    # linux where this machine has a CPU sensor (a VM with only a nominal clock has none)
    assert [b.name for b in backends] in (["linux"], []) and gpus.uuids == ()
    gpu_caveats = [c for c in caveats if c["backend"] == "nvml"]
    assert [c["sensor"] for c in gpu_caveats] == list(NVML_COLUMNS)
    for item in gpu_caveats:
        assert item["id"] == "sensor_not_readable"
        assert item["reason"].startswith("no NVIDIA driver (NVML init failed: ")
    for backend in backends:
        backend.close()


def test_none_and_unknown_backend_names() -> None:
    assert open_backends(["none"])[:2] == ([], [])
    for bad in ("rocm", "nvml:x", "linux:1"):
        with pytest.raises(ValueError, match="unknown telemetry backend"):
            open_backends([bad])


# --- Linux ----------------------------------------------------------------------------------


def test_linux_vm_fixture_has_only_a_nominal_clock_so_no_cpu_sensor() -> None:
    backend, caveats = open_linux(FIXTURES / "linux_vm")
    assert backend is None  # /proc/cpuinfo's constant 'cpu MHz' is the nominal clock, not a sensor
    by_sensor = {c["sensor"]: c for c in caveats}
    assert by_sensor["cpu_freq_mhz"]["id"] == "sensor_not_readable"
    assert (
        "nominal" in by_sensor["cpu_freq_mhz"]["reason"] and "2445 MHz" in by_sensor["cpu_freq_mhz"]["reason"]
    )
    assert by_sensor["cpu_energy_j"]["id"] == "sensor_not_readable"
    assert by_sensor["cpu_temp_c"]["id"] == "sensor_not_readable"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _sysfs_tree(root: Path) -> dict[str, Path]:
    """A small machine: 4 cores with cpufreq, 2 RAPL packages (one with a core subdomain),
    2 readable thermal zones and one that errors on read."""
    cpu = root / "sys/devices/system/cpu"
    for n, khz in enumerate((2400000, 3500000, 1200000, 3000000)):
        _write(cpu / f"cpu{n}/cpufreq/scaling_cur_freq", f"{khz}\n")
    _write(cpu / "cpufreq/boost", "1\n")  # not a cpuN directory: must be ignored
    powercap = root / "sys/class/powercap"
    files = {}
    for package, energy_uj in ((0, RAPL_MAX_RANGE_UJ - 1_000_000), (1, 5_000_000)):
        domain = powercap / f"intel-rapl:{package}"
        files[f"energy{package}"] = _write(domain / "energy_uj", f"{energy_uj}\n")
        _write(domain / "max_energy_range_uj", f"{RAPL_MAX_RANGE_UJ}\n")
        _write(domain / "name", f"package-{package}\n")
    _write(powercap / "intel-rapl:0:0/energy_uj", "999\n")  # core subdomain, inside package 0
    _write(powercap / "intel-rapl:0:0/name", "core\n")
    thermal = root / "sys/class/thermal"
    _write(thermal / "thermal_zone0/temp", "45000\n")
    files["temp1"] = _write(thermal / "thermal_zone1/temp", "61000\n")
    (thermal / "thermal_zone2/temp").mkdir(parents=True)  # reading it fails, like ENODATA
    files["freq0"] = cpu / "cpu0/cpufreq/scaling_cur_freq"
    return files


def test_sysfs_tree_reads_and_unwraps_rapl(tmp_path: Path) -> None:
    files = _sysfs_tree(tmp_path)
    backend, caveats = open_linux(tmp_path)
    assert caveats == []
    first = backend.read()
    assert first.errors == {}
    assert first.values["cpu_freq_mhz"] == pytest.approx(2525.0)
    assert first.values["cpu_freq_source"] == SOURCE_SCALING_CUR_FREQ
    assert first.values["cpu_temp_c"] == pytest.approx(61.0)
    # Package 0 wraps past max_energy_range_uj; package 1 moves by 0.5 J.
    files["energy0"].write_text("2000000\n")
    files["energy1"].write_text("5500000\n")
    files["temp1"].write_text("58000\n")
    second = backend.read()
    backend.close()
    assert second.values["cpu_energy_j"] - first.values["cpu_energy_j"] == pytest.approx(3.5)
    assert second.values["cpu_temp_c"] == pytest.approx(58.0)


def _rapl_tree(root: Path, zones: dict[str, tuple[str, int]]) -> dict[str, Path]:
    """One core with cpufreq, a thermal zone and powercap zones {directory: (name, energy_uj)};
    their energy_uj files."""
    _write(root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1800000\n")
    _write(root / "sys/class/thermal/thermal_zone0/temp", "45000\n")
    files = {}
    for zone, (name, energy_uj) in zones.items():
        domain = root / "sys/class/powercap" / zone
        files[zone] = _write(domain / "energy_uj", f"{energy_uj}\n")
        _write(domain / "max_energy_range_uj", f"{RAPL_MAX_RANGE_UJ}\n")
        _write(domain / "name", f"{name}\n")
    return files


def _cpu_energy_j(root: Path) -> tuple[float | None, dict[str, str]]:
    """cpu_energy_j of one read, and the caveats' reasons by sensor."""
    backend, caveats = open_linux(root)
    reading = backend.read()
    backend.close()
    return reading.values["cpu_energy_j"], {c["sensor"]: c["reason"] for c in caveats}


def test_rapl_counts_the_packages_never_the_psys_domain_that_includes_them(tmp_path: Path) -> None:
    zones = {"intel-rapl:0": ("package-0", 1_000_000), "intel-rapl:1": ("psys", 3_000_000)}
    files = _rapl_tree(tmp_path, zones)
    backend, caveats = open_linux(tmp_path)
    first = backend.read().values["cpu_energy_j"]
    files["intel-rapl:0"].write_text("1500000\n")
    files["intel-rapl:1"].write_text("4000000\n")
    second = backend.read().values["cpu_energy_j"]
    backend.close()
    assert caveats == []
    assert first == pytest.approx(1.0) and second - first == pytest.approx(0.5)


def test_rapl_adds_the_dies_of_a_multi_die_package(tmp_path: Path) -> None:
    _rapl_tree(
        tmp_path,
        {"intel-rapl:0": ("package-0-die-0", 1_000_000), "intel-rapl:1": ("package-0-die-1", 2_000_000)},
    )
    assert _cpu_energy_j(tmp_path) == (pytest.approx(3.0), {})


def test_a_psys_only_machine_has_no_cpu_energy_and_says_why(tmp_path: Path) -> None:
    _rapl_tree(tmp_path, {"intel-rapl:0": ("psys", 1_000_000)})
    energy_j, reasons = _cpu_energy_j(tmp_path)
    assert energy_j is None and "intel-rapl:0=psys" in reasons["cpu_energy_j"]
    assert "platform" in reasons["cpu_energy_j"]


def test_a_rapl_domain_whose_name_cannot_be_read_is_not_counted_as_a_package(tmp_path: Path) -> None:
    _rapl_tree(tmp_path, {"intel-rapl:0": ("package-0", 1_000_000)})
    unnamed = tmp_path / "sys/class/powercap/intel-rapl:1"
    _write(unnamed / "energy_uj", "2000000\n")
    _write(unnamed / "max_energy_range_uj", f"{RAPL_MAX_RANGE_UJ}\n")  # but no name file
    energy_j, reasons = _cpu_energy_j(tmp_path)
    assert energy_j is None and "intel-rapl:1/name not readable" in reasons["cpu_energy_j"]


def test_unwrap_delta_uj() -> None:
    assert unwrap_delta_uj(100, 250, RAPL_MAX_RANGE_UJ) == 150
    assert unwrap_delta_uj(RAPL_MAX_RANGE_UJ - 10, 5, RAPL_MAX_RANGE_UJ) == 15


def test_missing_sysfs_files_give_none_and_caveats(tmp_path: Path) -> None:
    _write(tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1800000\n")
    backend, caveats = open_linux(tmp_path)
    reading = backend.read()
    backend.close()
    assert reading.values["cpu_freq_mhz"] == pytest.approx(1800.0)
    assert reading.values["cpu_energy_j"] is None
    assert reading.values["cpu_temp_c"] is None
    assert {(c["id"], c["sensor"]) for c in caveats} == {
        ("sensor_not_readable", "cpu_energy_j"),
        ("sensor_not_readable", "cpu_temp_c"),
    }


def test_nothing_readable_gives_no_backend(tmp_path: Path) -> None:
    backend, caveats = open_linux(tmp_path)
    assert backend is None
    assert {c["sensor"] for c in caveats} == {"cpu_freq_mhz", "cpu_energy_j", "cpu_temp_c"}


def test_sensor_failing_mid_read_is_an_error_not_a_value(tmp_path: Path) -> None:
    files = _sysfs_tree(tmp_path)
    backend, _ = open_linux(tmp_path)
    files["freq0"].write_text("<unknown>\n")
    reading = backend.read()
    backend.close()
    assert reading.values["cpu_freq_mhz"] is None
    assert reading.values["cpu_freq_source"] is None
    assert "ValueError" in reading.errors["cpu_freq_mhz"]
    assert reading.values["cpu_temp_c"] == pytest.approx(61.0)


# --- powermetrics ---------------------------------------------------------------------------


def test_parse_powermetrics_m2_fixture() -> None:
    parsed = parse_powermetrics((FIXTURES / "powermetrics_m2.txt").read_text())
    assert parsed == {
        "mac_gpu_freq_mhz": 1397.0,
        "mac_gpu_power_w": pytest.approx(9.461),
        "mac_cpu_power_w": pytest.approx(1.187),
        "mac_package_power_w": pytest.approx(10.648),
    }


def test_parse_powermetrics_takes_last_sample_and_misses_give_none() -> None:
    text = (
        "*** Sampled system activity (a) ***\nCPU Power: 500 mW\nGPU HW active frequency: 444 MHz\n"
        "*** Sampled system activity (b) ***\nCPU Power: 700 mW\nPackage Power: 2100 mW\n"
    )
    parsed = parse_powermetrics(text)
    assert parsed["mac_cpu_power_w"] == pytest.approx(0.7)
    assert parsed["mac_package_power_w"] == pytest.approx(2.1)
    assert parsed["mac_gpu_freq_mhz"] is None
    assert parsed["mac_gpu_power_w"] is None


def test_powermetrics_argv_and_backend_with_recorded_text() -> None:
    assert powermetrics_argv(250) == [
        "powermetrics",
        "--samplers",
        "cpu_power,gpu_power",
        "-i",
        "250",
        "-n",
        "1",
    ]
    text = (FIXTURES / "powermetrics_m2.txt").read_text()
    backend = PowermetricsBackend(runner=lambda window_ms: text)  # as run_powermetrics returns
    reading = backend.read()
    assert reading.errors == {}
    assert reading.values["mac_gpu_power_w"] == pytest.approx(9.461)


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the refusal off macOS")
def test_powermetrics_off_macos_is_caveats_only() -> None:
    backend, caveats = open_powermetrics()
    assert backend is None
    assert [c["sensor"] for c in caveats] == list(MAC_COLUMNS)


# --- recorder -------------------------------------------------------------------------------


class FakeCpuBackend:
    """Reads a fixed frequency; starts raising after `fail_after` reads, until `recover_at`."""

    name = "linux"
    columns = LINUX_COLUMNS

    def __init__(self, fail_after: int | None = None, recover_at: int | None = None) -> None:
        self.reads = 0
        self.full_reads = 0
        self.fail_after = fail_after
        self.recover_at = recover_at

    def read(self, full: bool = False) -> Reading:
        self.reads += 1
        self.full_reads += full
        failing = self.fail_after is not None and self.reads > self.fail_after
        if failing and (self.recover_at is None or self.reads < self.recover_at):
            raise OSError("cpufreq vanished")
        return Reading({"cpu_freq_mhz": 2000.0, "cpu_freq_source": SOURCE_SCALING_CUR_FREQ})

    def close(self) -> None:
        pass


class FakeGpuBackend:
    """Power always reads; temperature reports an error on reads 2 and 3."""

    name = "nvml"
    columns = NVML_COLUMNS

    def __init__(self) -> None:
        self.reads = 0

    def read(self, full: bool = False) -> Reading:
        self.reads += 1
        values = {"gpu_power_w": 300.0, "gpu_temp_c": None if self.reads in (2, 3) else 50}
        errors = {"gpu_temp_c": "NVMLError_GpuIsLost: GPU is lost"} if self.reads in (2, 3) else {}
        return Reading(values, errors)

    def close(self) -> None:
        pass


def test_backend_that_starts_raising_records_a_gap_and_sampling_goes_on() -> None:
    cpu, gpu = FakeCpuBackend(fail_after=2, recover_at=5), FakeGpuBackend()
    recorder = TelemetryRecorder([cpu, gpu])
    samples = [recorder.sample_once(t_mono_s=float(t)) for t in range(7)]
    assert [s["cpu_freq_mhz"] for s in samples] == [2000.0, 2000.0, None, None, 2000.0, 2000.0, 2000.0]
    assert [s["gpu_power_w"] for s in samples] == [300.0] * 7
    assert [s["gpu_temp_c"] for s in samples] == [50, None, None, 50, 50, 50, 50]
    gaps = recorder.gaps
    cpu_gaps = [g for g in gaps if g["backend"] == "linux"]
    assert [g["sensor"] for g in cpu_gaps] == list(LINUX_COLUMNS)  # once, not once per tick
    assert {g["t_mono_s"] for g in cpu_gaps} == {2.0}
    assert all(g["error"] == "OSError: cpufreq vanished" for g in cpu_gaps)
    gpu_gaps = [g for g in gaps if g["backend"] == "nvml"]
    assert gpu_gaps == [
        {
            "backend": "nvml",
            "sensor": "gpu_temp_c",
            "t_mono_s": 1.0,
            "error": "NVMLError_GpuIsLost: GPU is lost",
        }
    ]


def test_failure_after_recovery_is_recorded_again() -> None:
    gpu = FakeGpuBackend()
    recorder = TelemetryRecorder([gpu])
    for t in range(4):
        recorder.sample_once(t_mono_s=float(t))
    gpu.reads = 1  # reads 2 and 3 fail again
    for t in range(4, 7):
        recorder.sample_once(t_mono_s=float(t))
    assert [g["t_mono_s"] for g in recorder.gaps] == [1.0, 4.0]


def test_failing_sink_is_a_gap_not_a_crash() -> None:
    def sink(sample: dict) -> None:
        raise RuntimeError("disk full")

    recorder = TelemetryRecorder([FakeCpuBackend()], sink=sink)
    recorder.sample_once(t_mono_s=1.0)
    recorder.sample_once(t_mono_s=2.0)
    assert recorder.gaps == [
        {"backend": "sink", "sensor": "sink", "t_mono_s": 1.0, "error": "RuntimeError: disk full"}
    ]
    assert len(recorder.samples_between(0.0, 3.0)) == 2


def test_sampler_thread_samples_on_schedule_and_stops_promptly() -> None:
    delivered: list[dict] = []
    recorder = TelemetryRecorder([FakeCpuBackend()], interval_s=0.02, sink=delivered.append)
    t0_s = time.monotonic()
    recorder.start()
    time.sleep(0.3)
    recorder.stop()
    samples = recorder.samples_between(t0_s, time.monotonic())
    assert 8 <= len(samples) <= 25
    assert delivered == samples
    assert all(tuple(s) == SAMPLE_COLUMNS for s in samples)
    assert samples[0]["telemetry_backends"] == "linux"
    times = [s["t_mono_s"] for s in samples]
    assert times == sorted(times)
    assert all(s["lateness_s"] >= 0 for s in samples)  # no mark(): every sample is a tick
    assert recorder.sampler_cpu_s is not None

    slow = TelemetryRecorder([FakeCpuBackend()], interval_s=5.0)
    slow.start()
    time.sleep(0.05)
    t_stop_s = time.monotonic()
    slow.stop()
    assert time.monotonic() - t_stop_s < 0.5
    assert len(slow.samples_between(t0_s, time.monotonic())) == 1


def test_mark_takes_a_full_sample_between_ticks() -> None:
    backend = FakeCpuBackend()
    idle = TelemetryRecorder([backend], interval_s=60.0)
    assert idle.mark() is not None  # not started: sampled in the caller's thread
    assert backend.full_reads == 1

    recorder = TelemetryRecorder([backend], interval_s=60.0)
    recorder.start()
    before_s = time.monotonic()
    t_mark_s = recorder.mark()
    recorder.stop()
    assert t_mark_s is not None and t_mark_s >= before_s
    marked = recorder.samples_between(t_mark_s, t_mark_s)
    assert len(marked) == 1
    assert marked[0]["lateness_s"] is None
    assert backend.full_reads == 2
    assert len(recorder.samples_between(0.0, math.inf)) == 2  # first tick + the mark


def test_mark_soon_takes_a_full_sample_without_waiting_for_it() -> None:
    """The first token's reading: asked for from the client's thread, taken by the sampler."""
    backend = FakeCpuBackend()
    recorder = TelemetryRecorder([backend], interval_s=60.0)
    recorder.start()
    deadline = time.monotonic() + 2
    while not recorder.samples_between(0.0, math.inf) and time.monotonic() < deadline:  # first tick
        time.sleep(0.01)
    asked_s = time.monotonic()
    recorder.mark_soon()
    assert time.monotonic() - asked_s < 0.05  # it did not wait for the read
    while backend.full_reads < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    recorder.stop()
    assert backend.full_reads == 1
    taken = recorder.samples_between(asked_s, math.inf)
    assert len(taken) == 1 and taken[0]["lateness_s"] is None  # a mark, not a tick


class FakeEnergyBackend:
    """CPU energy counter read only on every 4th read (as NVML energy is, to save CPU)."""

    name = "linux"
    columns = LINUX_COLUMNS

    def __init__(self) -> None:
        self.reads = 0

    def read(self, full: bool = False) -> Reading:
        due = full or self.reads % 4 == 0
        self.reads += 1
        return Reading({"cpu_energy_j": 100.0 * self.reads if due else None})


class FakeMacBackend:
    """A backend with no counter columns."""

    name = "powermetrics"
    columns = MAC_COLUMNS

    def read(self, full: bool = False) -> Reading:
        return Reading({"mac_gpu_power_w": 5.0})

    def close(self) -> None:
        pass


def test_samples_between_is_inclusive() -> None:
    recorder = TelemetryRecorder([FakeCpuBackend()])
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        recorder.sample_once(t_mono_s=t)
    assert [s["t_mono_s"] for s in recorder.samples_between(0.25, 0.75)] == [0.25, 0.5, 0.75]
    assert recorder.samples_between(0.3, 0.4) == []


def test_samples_around_reaches_out_to_counter_readings() -> None:
    recorder = TelemetryRecorder([FakeEnergyBackend()])
    for i in range(9):  # energy read at t = 0, 1.0, 2.0
        recorder.sample_once(t_mono_s=i * 0.25)
    times = [s["t_mono_s"] for s in recorder.samples_around(1.1, 1.3)]
    assert times == [1.0, 1.25, 1.5, 1.75, 2.0]
    around = recorder.samples_around(0.3, 0.6)
    assert [s["t_mono_s"] for s in around] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert summarize_shot(around, 0.3, 0.6, output_tokens=1)["cpu_energy_j"] == 400.0
    assert recorder.samples_around(5.0, 6.0)[0]["t_mono_s"] == 2.0  # past the end: last reading

    plain = TelemetryRecorder([FakeMacBackend()])
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        plain.sample_once(t_mono_s=t)
    assert [s["t_mono_s"] for s in plain.samples_around(0.3, 0.6)] == [0.25, 0.5, 0.75]


# --- summary --------------------------------------------------------------------------------


def _gpu_samples() -> list[dict]:
    """Samples every 0.25 s from t=0 to t=2; the energy counter rises by the power over each interval
    (NVML's power reading itself is a trailing average, so the two part where the power jumps)."""
    clocks = [1980, 1980, 1890, 1755, 1500, 1785, 1890, 1980, 1980]
    powers = [350.0, 420.0, 690.0, 695.0, 700.0, 698.0, 690.0, 500.0, 400.0]
    reasons = [
        "",
        "",
        "sw_power_cap",
        "sw_power_cap",
        "hw_slowdown|sw_power_cap",
        "sw_thermal_slowdown",
        "",
        "",
        "",
    ]
    samples = []
    for i, (clock, power, reason) in enumerate(zip(clocks, powers, reasons, strict=True)):
        sample = dict.fromkeys(SAMPLE_COLUMNS)
        sample.update(
            t_mono_s=i * 0.25,
            telemetry_backends="nvml|linux",
            gpu_sm_clock_mhz=clock,
            gpu_mem_clock_mhz=3201,
            gpu_power_w=power,
            gpu_energy_j=10_000.0 + 0.25 * sum(powers[:i]),
            gpu_temp_c=55 + i,
            gpu_throttle_reasons=reason,
            cpu_freq_mhz=2445.406,
        )
        samples.append(sample)
    return samples


def test_summary_of_a_long_shot() -> None:
    summary = summarize_shot(_gpu_samples(), t_start_s=0.3, t_end_s=1.6, output_tokens=40)
    assert tuple(summary) == SUMMARY_COLUMNS
    # window: t = 0.5, 0.75, 1.0, 1.25, 1.5
    assert summary["telemetry_samples"] == 5
    assert summary["sm_clock_median_mhz"] == 1785
    assert summary["sm_clock_min_mhz"] == 1500
    assert summary["mem_clock_median_mhz"] == 3201
    assert summary["gpu_power_median_w"] == 695.0
    # energy from t=0.25 to t=1.75: 0.25 s × (420 + 690 + 695 + 700 + 698 + 690) W
    assert summary["gpu_energy_j"] == pytest.approx(973.25)
    assert summary["gpu_energy_power_w"] == pytest.approx(973.25 / 1.3)
    assert summary["energy_j_per_token"] == pytest.approx(973.25 / 40)
    assert summary["gpu_power_reliable"] is True  # 695 W is within 15 % of the counter's 749 W
    assert summary["gpu_temp_max_c"] == 61
    assert summary["throttle_reasons_seen"] == "sw_power_cap|hw_slowdown|sw_thermal_slowdown"
    assert summary["thermal_throttle_seen"] is True
    assert summary["cpu_freq_median_mhz"] == pytest.approx(2445.406)
    assert summary["telemetry_backends"] == "nvml|linux"
    for not_measured in ("dram_bw_util_median_pct", "sm_util_median_pct", "cpu_energy_j", "cpu_temp_max_c"):
        assert summary[not_measured] is None


def test_a_power_median_that_disagrees_with_the_energy_counter_is_unreliable() -> None:
    summary = summarize_shot(_gpu_samples(), t_start_s=0.3, t_end_s=0.6, output_tokens=3)
    assert summary["telemetry_samples"] == 1
    assert summary["gpu_power_median_w"] == 690.0
    assert summary["gpu_energy_j"] == pytest.approx(0.25 * (420 + 690))  # t=0.25 -> t=0.75
    assert summary["gpu_energy_power_w"] == pytest.approx(277.5 / 0.3)
    assert summary["gpu_power_reliable"] is False  # 690 W is 0.75 of the counter's 925 W
    assert summary["throttle_reasons_seen"] == "sw_power_cap"
    assert summary["thermal_throttle_seen"] is False


def test_summary_without_samples_or_brackets_is_none_not_zero() -> None:
    samples = _gpu_samples()
    empty = summarize_shot(samples, t_start_s=0.3, t_end_s=0.45, output_tokens=5)
    assert empty["telemetry_samples"] == 0
    assert {k for k, v in empty.items() if v is not None} == {
        "telemetry_samples",
        "gpu_energy_j",
        "gpu_energy_power_w",
        "energy_j_per_token",
        "energy_counter_updates",  # the counter moved between the readings around the window
    }
    nothing = summarize_shot([], t_start_s=0.0, t_end_s=1.0, output_tokens=5)
    assert nothing == {**dict.fromkeys(SUMMARY_COLUMNS), "telemetry_samples": 0}
    # No sample after the end: the energy delta would be a guess, so there is none.
    unbracketed = summarize_shot(samples, t_start_s=0.3, t_end_s=5.0, output_tokens=5)
    assert unbracketed["gpu_energy_j"] is None
    assert unbracketed["energy_j_per_token"] is None
    assert summarize_shot(samples, 0.3, 1.6, output_tokens=0)["energy_j_per_token"] is None


def test_counter_reset_gives_no_energy() -> None:
    samples = _gpu_samples()
    samples[7]["gpu_energy_j"] = 5.0  # driver reloaded: the counter restarted
    assert summarize_shot(samples, 0.3, 1.6, output_tokens=1)["gpu_energy_j"] is None


def _cpuinfo(root: Path, mhz: tuple[float, ...], hypervisor: bool) -> None:
    flags = "fpu tsc msr" + (" hypervisor" if hypervisor else "")
    cores = [f"processor\t: {n}\ncpu MHz\t\t: {v}\nflags\t\t: {flags}\n" for n, v in enumerate(mhz)]
    _write(root / "proc/cpuinfo", "\n".join(cores))


def test_a_nominal_cpuinfo_clock_is_not_measured_and_the_caveat_names_its_source(tmp_path: Path) -> None:
    """No cpufreq scaling_cur_freq: /proc/cpuinfo's 'cpu MHz' is the nominal clock (issue 32), so the
    clock gives no value, and the caveat says the nominal source and what it said."""
    _cpuinfo(tmp_path, (2596.136, 2596.136), hypervisor=True)
    _write(tmp_path / "sys/class/thermal/thermal_zone0/temp", "45000\n")  # another sensor keeps the backend
    backend, caveats = open_linux(tmp_path)
    reading = backend.read()
    backend.close()
    assert reading.values["cpu_freq_mhz"] is None and reading.values["cpu_freq_source"] is None
    assert reading.values["cpu_temp_c"] == pytest.approx(45.0)
    (clock,) = [c for c in caveats if c["sensor"] == "cpu_freq_mhz"]
    assert clock["id"] == "sensor_not_readable"
    reason = clock["reason"]
    assert "no cpu*/cpufreq/scaling_cur_freq" in reason and "2596 MHz; a hypervisor guest" in reason
    assert f"{SOURCE_PROC_CPUINFO} is nominal" in reason and reason.endswith("not measured")


def test_with_cpufreq_the_clock_is_measured_and_cpuinfo_is_not_read(tmp_path: Path) -> None:
    _cpuinfo(tmp_path, (9999.0,), hypervisor=False)
    _write(tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1800000\n")
    backend, caveats = open_linux(tmp_path)
    reading = backend.read()
    backend.close()
    assert reading.values["cpu_freq_mhz"] == pytest.approx(1800.0)
    assert reading.values["cpu_freq_source"] == SOURCE_SCALING_CUR_FREQ
    assert not [c for c in caveats if c["sensor"] == "cpu_freq_mhz"]
