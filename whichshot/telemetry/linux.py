"""Linux CPU telemetry from sysfs and procfs: frequency, RAPL package energy, thermal zones.

Files are opened once and re-read with pread at offset 0, which makes sysfs and procfs
regenerate their contents: one syscall per file per tick, no open/close.
"""

import os
import re
from collections.abc import Callable
from pathlib import Path

from whichshot.telemetry.base import (
    LINUX_COLUMNS,
    Reading,
    SensorValue,
    error_text,
    not_readable,
)

BACKEND = "linux"
SOURCE_SCALING_CUR_FREQ = "sysfs_scaling_cur_freq"
SOURCE_PROC_CPUINFO = "proc_cpuinfo"

_CPU_DIR_RE = re.compile(r"cpu\d+$")
_RAPL_ZONE_RE = re.compile(r"intel-rapl:\d+$")  # top-level zones; intel-rapl:0:0 is inside 0
# The kernel names a CPU package's zone package-N (package-N-die-M on multi-die parts), on Intel
# and AMD alike. A top-level psys zone is the whole platform, packages included: never added in.
_RAPL_PACKAGE_NAME_RE = re.compile(r"package-\d+(-die-\d+)?$")
_CPUINFO_MHZ_RE = re.compile(rb"^cpu MHz\s*:\s*([0-9.]+)", re.MULTILINE)
_CHUNK_BYTES = 65536


def _read_fd(fd: int) -> bytes:
    """Whole contents of an open sysfs/procfs file, regenerated from offset 0."""
    chunks = [os.pread(fd, _CHUNK_BYTES, 0)]
    while len(chunks[-1]) == _CHUNK_BYTES:
        chunks.append(os.pread(fd, _CHUNK_BYTES, _CHUNK_BYTES * len(chunks)))
    return b"".join(chunks)


def _open_and_read(path: Path) -> tuple[int, bytes]:
    """Open path for reading and read it once, so an unreadable file fails here."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return fd, _read_fd(fd)
    except OSError:
        os.close(fd)
        raise


def _read_int(fd: int) -> int:
    return int(_read_fd(fd))


def unwrap_delta_uj(prev_uj: int, cur_uj: int, max_range_uj: int) -> int:
    """Energy between two reads of a RAPL counter that wraps to 0 after max_energy_range_uj."""
    delta_uj = cur_uj - prev_uj
    return delta_uj + max_range_uj if delta_uj < 0 else delta_uj


class RaplCounter:
    """One RAPL package counter, unwrapped into a running total in joules."""

    def __init__(self, fd: int, first_uj: int, max_range_uj: int) -> None:
        self.fd = fd
        self._prev_uj = first_uj
        self._max_range_uj = max_range_uj
        self._total_uj = first_uj

    def update(self, cur_uj: int) -> float:
        """Fold in a new reading; return the unwrapped total in joules."""
        self._total_uj += unwrap_delta_uj(self._prev_uj, cur_uj, self._max_range_uj)
        self._prev_uj = cur_uj
        return self._total_uj / 1e6

    def read_j(self) -> float:
        """Read the counter now; unwrapped total in joules."""
        return self.update(_read_int(self.fd))


class CpuFreq:
    """Mean current CPU frequency from per-core scaling_cur_freq (/proc/cpuinfo is only nominal)."""

    def __init__(self, fds: list[int], source: str) -> None:
        self.fds = fds
        self.source = source

    def read_mhz(self) -> float:
        """Mean over cores, in MHz."""
        khz = [_read_int(fd) for fd in self.fds]
        return sum(khz) / len(khz) / 1000.0


def mean_cpuinfo_mhz(cpuinfo: bytes) -> float:
    """Mean of the 'cpu MHz' lines of /proc/cpuinfo; ValueError if there are none."""
    values = [float(m) for m in _CPUINFO_MHZ_RE.findall(cpuinfo)]
    if not values:
        raise ValueError("no 'cpu MHz' line in /proc/cpuinfo")
    return sum(values) / len(values)


class LinuxCpuBackend:
    """CPU frequency, package energy and max thermal-zone temperature of this Linux machine."""

    name = BACKEND
    columns = LINUX_COLUMNS

    def __init__(self, freq: CpuFreq | None, rapl: list[RaplCounter], thermal_fds: list[int]) -> None:
        self._freq = freq
        self._rapl = rapl
        self._thermal_fds = thermal_fds

    def read(self, full: bool = False) -> Reading:
        """One read of every sensor found readable at open (all are cheap: full changes nothing)."""
        values: dict[str, SensorValue] = dict.fromkeys(LINUX_COLUMNS)
        errors: dict[str, str] = {}
        if self._freq is not None:
            _read_into(values, errors, "cpu_freq_mhz", self._freq.read_mhz)
            if values["cpu_freq_mhz"] is not None:
                values["cpu_freq_source"] = self._freq.source
        if self._rapl:
            _read_into(values, errors, "cpu_energy_j", self._read_energy_j)
        if self._thermal_fds:
            _read_into(values, errors, "cpu_temp_c", self._read_temp_c)
        return Reading(values, errors)

    def _read_energy_j(self) -> float:
        return sum(counter.read_j() for counter in self._rapl)

    def _read_temp_c(self) -> float:
        return max(_read_int(fd) for fd in self._thermal_fds) / 1000.0

    def close(self) -> None:
        """Close every file kept open."""
        fds = list(self._thermal_fds) + [counter.fd for counter in self._rapl]
        fds += self._freq.fds if self._freq else []
        for fd in fds:
            os.close(fd)
        self._freq, self._rapl, self._thermal_fds = None, [], []


def _read_into(
    values: dict[str, SensorValue], errors: dict[str, str], column: str, read: Callable[[], float]
) -> None:
    """values[column] = read(), or the error under errors[column]."""
    try:
        values[column] = read()
    except (OSError, ValueError) as exc:
        errors[column] = error_text(exc)


def _open_all(paths: list[Path]) -> list[tuple[int, bytes]]:
    """Open and read every path; on the first failure close what was opened and raise."""
    opened: list[tuple[int, bytes]] = []
    try:
        for path in paths:
            opened.append(_open_and_read(path))
    except OSError:
        for fd, _ in opened:
            os.close(fd)
        raise
    return opened


def _open_freq(root: Path) -> tuple[CpuFreq | None, list[dict[str, str]]]:
    """Per-core scaling_cur_freq of the cores that have one, else not measured (cpuinfo is nominal)."""
    cpu_dir = root / "sys/devices/system/cpu"
    cpus = sorted(p for p in cpu_dir.glob("cpu*") if _CPU_DIR_RE.match(p.name))
    paths = [cpu / "cpufreq/scaling_cur_freq" for cpu in cpus]
    paths = [p for p in paths if p.exists()]
    sysfs_error = "no cpu*/cpufreq/scaling_cur_freq in sysfs"
    if paths:
        try:
            opened = _open_all(paths)
            for _, text in opened:
                int(text)
            return CpuFreq([fd for fd, _ in opened], SOURCE_SCALING_CUR_FREQ), []
        except (OSError, ValueError) as exc:
            sysfs_error = f"cpufreq scaling_cur_freq not readable: {error_text(exc)}"
    return _open_cpuinfo(root, sysfs_error)


def _open_cpuinfo(root: Path, sysfs_error: str) -> tuple[CpuFreq | None, list[dict[str, str]]]:
    """No frequency sensor without cpufreq: /proc/cpuinfo's 'cpu MHz' is then the nominal clock (a
    VM's constant, or the base clock without a cpufreq driver), not the running one, so the clock is
    not measured; the caveat names the nominal source and what it said."""
    try:
        text = (root / "proc/cpuinfo").read_bytes()
    except OSError as exc:
        reason = f"{sysfs_error}; /proc/cpuinfo not readable: {error_text(exc)}"
        return None, not_readable(("cpu_freq_mhz",), BACKEND, reason)
    try:
        nominal_mhz = mean_cpuinfo_mhz(text)
    except ValueError as exc:
        return None, not_readable(("cpu_freq_mhz",), BACKEND, f"{sysfs_error}; {exc}")
    guest = "; a hypervisor guest" if re.search(rb"^flags\s*:.*\bhypervisor\b", text, re.MULTILINE) else ""
    reason = (
        f"{sysfs_error}; /proc/cpuinfo 'cpu MHz' ({nominal_mhz:.0f} MHz{guest}) is only the nominal clock "
        f"without cpufreq ({SOURCE_PROC_CPUINFO} is nominal), not the running one: not measured"
    )
    return None, not_readable(("cpu_freq_mhz",), BACKEND, reason)


def _rapl_packages(root: Path) -> tuple[list[Path], str | None]:
    """The top-level powercap RAPL zones that are CPU packages (by their name file), or why none
    are counted: a zone whose name cannot be read may be a package, so then none is."""
    candidates = (root / "sys/class/powercap").glob("intel-rapl:*")
    zones = sorted(p for p in candidates if _RAPL_ZONE_RE.match(p.name))
    if not zones:
        return [], "no powercap intel-rapl domain in sysfs"
    names = {}
    for zone in zones:
        try:
            names[zone] = (zone / "name").read_text().strip()
        except OSError as exc:
            return [], f"powercap {zone.name}/name not readable (package or not?): {error_text(exc)}"
    packages = [zone for zone in zones if _RAPL_PACKAGE_NAME_RE.match(names[zone])]
    if packages:
        return packages, None
    found = ", ".join(f"{zone.name}={name}" for zone, name in names.items())
    reason = f"no RAPL package domain in powercap ({found})"
    if "psys" in names.values():
        reason += "; psys is the whole platform's energy (packages and more), not the CPU's"
    return [], reason


def _open_rapl(root: Path) -> tuple[list[RaplCounter], list[dict[str, str]]]:
    """A counter for each powercap RAPL package domain, if all are readable."""
    domains, reason = _rapl_packages(root)
    if reason:
        return [], not_readable(("cpu_energy_j",), BACKEND, reason)
    try:
        opened = _open_all([d / "energy_uj" for d in domains])
    except OSError as exc:
        # energy_uj is root-only on kernels patched for CVE-2020-8694 (Platypus).
        reason = f"powercap energy_uj not readable: {error_text(exc)}"
        return [], not_readable(("cpu_energy_j",), BACKEND, reason)
    try:
        ranges_uj = [int((d / "max_energy_range_uj").read_text()) for d in domains]
        counters = [
            RaplCounter(fd, int(text), max_uj) for (fd, text), max_uj in zip(opened, ranges_uj, strict=True)
        ]
    except (OSError, ValueError) as exc:
        for fd, _ in opened:
            os.close(fd)
        reason = f"powercap max_energy_range_uj not readable: {error_text(exc)}"
        return [], not_readable(("cpu_energy_j",), BACKEND, reason)
    return counters, []


def _open_thermal(root: Path) -> tuple[list[int], list[dict[str, str]]]:
    """Every thermal zone whose temp reads as an integer now (others often give ENODATA)."""
    fds: list[int] = []
    for path in sorted((root / "sys/class/thermal").glob("thermal_zone*/temp")):
        try:
            fd, text = _open_and_read(path)
        except OSError:
            continue
        try:
            int(text)
            fds.append(fd)
        except ValueError:
            os.close(fd)
    if not fds:
        return [], not_readable(("cpu_temp_c",), BACKEND, "no readable thermal_zone*/temp in sysfs")
    return fds, []


def open_linux(root: str | Path = "/") -> tuple[LinuxCpuBackend | None, list[dict[str, str]]]:
    """Open the Linux CPU backend over the tree at root; None if no sensor is readable."""
    root = Path(root)
    freq, caveats = _open_freq(root)
    rapl, rapl_caveats = _open_rapl(root)
    thermal_fds, thermal_caveats = _open_thermal(root)
    caveats += rapl_caveats + thermal_caveats
    if freq is None and not rapl and not thermal_fds:
        return None, caveats
    return LinuxCpuBackend(freq, rapl, thermal_fds), caveats
