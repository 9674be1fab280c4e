"""The sampling thread: reads every backend on a fixed monotonic schedule and keeps the samples."""

import bisect
import math
import threading
import time
from collections.abc import Callable, Sequence

from whichshot.telemetry.base import SAMPLE_COLUMNS, Backend, Sample, error_text

Sink = Callable[[Sample], None]
GapKey = tuple[str, str]

STOP_TIMEOUT_S = 5.0


class TelemetryRecorder:
    """Samples backends every interval_s on a sleeping thread; samples on time.monotonic()."""

    def __init__(
        self, backends: Sequence[Backend], interval_s: float = 0.25, sink: Sink | None = None
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self._backends = list(backends)
        self._interval_s = interval_s
        self._sink = sink
        self._backends_label = "|".join(backend.name for backend in self._backends)
        self._lock = threading.Lock()
        self._times_s: list[float] = []
        self._rows: list[tuple] = []  # tuples in SAMPLE_COLUMNS order: a third of a dict's size
        self._gaps: list[dict] = []
        self._failing: set[GapKey] = set()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.missed_ticks = 0
        self.sampler_cpu_s: float | None = None  # CPU time the sampler thread used, once stopped

    def start(self) -> None:
        """Start the sampler thread; the first sample is taken at once."""
        if self._thread is not None:
            raise RuntimeError("TelemetryRecorder already started")
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Wake the sampler and join it (it only waits out a read already in progress)."""
        if self._thread is None:
            return
        self._stop_event.set()
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._record_gap(("recorder", "*"), time.monotonic(), "sampler did not stop in time")

    def __enter__(self) -> "TelemetryRecorder":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def gaps(self) -> list[dict]:
        """Sensor failures mid-run: {backend, sensor, t_mono_s, error}, one per failure onset."""
        with self._lock:
            return list(self._gaps)

    def samples_between(self, t0_mono_s: float, t1_mono_s: float) -> list[Sample]:
        """Samples whose t_mono_s lies in [t0_mono_s, t1_mono_s]."""
        with self._lock:
            lo = bisect.bisect_left(self._times_s, t0_mono_s)
            hi = bisect.bisect_right(self._times_s, t1_mono_s)
            rows = self._rows[lo:hi]
        return [dict(zip(SAMPLE_COLUMNS, row, strict=True)) for row in rows]

    def samples_around(self, t0_mono_s: float, t1_mono_s: float) -> list[Sample]:
        """Samples in [t0, t1] plus the one before and the one after: what summarize_shot needs."""
        with self._lock:
            lo = max(bisect.bisect_right(self._times_s, t0_mono_s) - 1, 0)
            hi = bisect.bisect_left(self._times_s, t1_mono_s) + 1
            rows = self._rows[lo:hi]
        return [dict(zip(SAMPLE_COLUMNS, row, strict=True)) for row in rows]

    def _run(self) -> None:
        """Deadline-scheduled loop: lateness never accumulates; missed ticks are skipped."""
        cpu0_s = time.thread_time()
        try:
            self._loop()
        finally:
            self.sampler_cpu_s = time.thread_time() - cpu0_s

    def _loop(self) -> None:
        next_s = time.monotonic()
        while not self._stop_event.wait(max(0.0, next_s - time.monotonic())):
            t_mono_s = time.monotonic()
            self.sample_once(t_mono_s, lateness_s=t_mono_s - next_s)
            next_s += self._interval_s
            behind_s = time.monotonic() - next_s
            if behind_s > 0:
                skipped = math.ceil(behind_s / self._interval_s)
                self.missed_ticks += skipped
                next_s += skipped * self._interval_s

    def sample_once(self, t_mono_s: float | None = None, lateness_s: float | None = None) -> Sample:
        """Read every backend now, store the sample, hand it to the sink and return it."""
        t_mono_s = time.monotonic() if t_mono_s is None else t_mono_s
        sample: Sample = dict.fromkeys(SAMPLE_COLUMNS)
        sample.update(t_mono_s=t_mono_s, lateness_s=lateness_s, telemetry_backends=self._backends_label)
        for backend in self._backends:
            self._read_backend(backend, sample, t_mono_s)
        with self._lock:
            self._times_s.append(t_mono_s)
            self._rows.append(tuple(sample.values()))
        self._deliver(sample, t_mono_s)
        return sample

    def _read_backend(self, backend: Backend, sample: Sample, t_mono_s: float) -> None:
        """Merge one backend's reading into sample and track which sensors fail or recover."""
        try:
            reading = backend.read()
        except Exception as exc:  # noqa: BLE001 - a backend must never stop the sampler
            for column in backend.columns:
                self._record_gap((backend.name, column), t_mono_s, error_text(exc))
            return
        for column in backend.columns:
            value = reading.values.get(column)
            sample[column] = value
            key = (backend.name, column)
            if column in reading.errors:
                self._record_gap(key, t_mono_s, reading.errors[column])
            elif value is not None:
                self._failing.discard(key)

    def _deliver(self, sample: Sample, t_mono_s: float) -> None:
        if self._sink is None:
            return
        try:
            self._sink(sample)
            self._failing.discard(("sink", "sink"))
        except Exception as exc:  # noqa: BLE001 - a failing sink must not stop sampling
            self._record_gap(("sink", "sink"), t_mono_s, error_text(exc))

    def _record_gap(self, key: GapKey, t_mono_s: float, error: str) -> None:
        """Record a failure once when it starts; it is recorded again only after a recovery."""
        if key in self._failing:
            return
        self._failing.add(key)
        backend, sensor = key
        gap = {"backend": backend, "sensor": sensor, "t_mono_s": t_mono_s, "error": error}
        with self._lock:
            self._gaps.append(gap)
