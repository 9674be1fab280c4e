"""The sampling thread: reads every backend on a fixed monotonic schedule and keeps the samples."""

import bisect
import math
import threading
import time
from collections.abc import Callable, Sequence

from whichshot.telemetry.base import COUNTER_COLUMNS, SAMPLE_COLUMNS, Backend, Sample, error_text

Sink = Callable[[Sample], None]
GapKey = tuple[str, str]

STOP_TIMEOUT_S = 5.0
MARK_TIMEOUT_S = 1.0
# samples_around looks this many samples past each edge for a counter reading (a minute at 4 Hz).
MAX_BRACKET_ROWS = 240


class _MarkRequest:
    """A caller waiting in mark() for the sampler to take a full sample."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.t_mono_s: float | None = None


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
        columns = {column for backend in self._backends for column in backend.columns}
        self._counter_slots = [SAMPLE_COLUMNS.index(c) for c in COUNTER_COLUMNS if c in columns]
        self._lock = threading.Lock()
        self._times_s: list[float] = []
        self._rows: list[tuple] = []  # tuples in SAMPLE_COLUMNS order: far smaller than dicts
        self._gaps: list[dict] = []
        self._failing: set[GapKey] = set()
        self._wake = threading.Event()  # set by stop() and mark()
        self._stopping = False
        self._mark_requests: list[_MarkRequest] = []
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
        self._stopping = True
        self._wake.set()
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._record_gap(("recorder", "*"), time.monotonic(), "sampler did not stop in time")

    def __enter__(self) -> "TelemetryRecorder":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def mark(self) -> float | None:
        """Take a full sample now (slow sensors too) and return its t_mono_s once stored.

        Call it just before a shot's start time is taken and just after its end time, so the
        energy counters are read right at the shot's edges instead of up to a second away.
        """
        thread = self._thread
        if thread is None or not thread.is_alive() or self._stopping:
            return self.sample_once(full=True)["t_mono_s"]
        request = _MarkRequest()
        with self._lock:
            self._mark_requests.append(request)
        self._wake.set()
        request.done.wait(MARK_TIMEOUT_S)
        return request.t_mono_s

    def mark_soon(self) -> None:
        """Ask for a full sample now without waiting for it: called as a shot's first token
        arrives, so the energy counter is read at the split between prefill and decode (the
        reading lands a moment later; the split interpolates to the token's own time)."""
        if self._thread is None or self._stopping:
            return
        with self._lock:
            self._mark_requests.append(_MarkRequest())
        self._wake.set()

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
        """Samples in [t0, t1] plus, on each side, those out to a reading of every energy
        counter (they are not read every tick): what summarize_shot needs."""
        with self._lock:
            before = bisect.bisect_right(self._times_s, t0_mono_s) - 1
            after = bisect.bisect_left(self._times_s, t1_mono_s)
            lo = self._bracket_edge(before, -1)
            hi = self._bracket_edge(after, +1)
            rows = self._rows[lo : hi + 1]
        return [dict(zip(SAMPLE_COLUMNS, row, strict=True)) for row in rows]

    def _bracket_edge(self, index: int, step: int) -> int:
        """Row index reached walking from index by step until every counter has a reading."""
        last = len(self._rows) - 1
        if not 0 <= index <= last:
            return min(max(index, 0), last)
        missing = set(self._counter_slots)
        for _ in range(MAX_BRACKET_ROWS):
            missing = {slot for slot in missing if self._rows[index][slot] is None}
            if not missing or not 0 <= index + step <= last:
                break
            index += step
        return index

    def _run(self) -> None:
        cpu0_s = time.thread_time()
        try:
            self._loop()
        finally:
            self.sampler_cpu_s = time.thread_time() - cpu0_s
            self._answer(self._take_mark_requests(), None)

    def _loop(self) -> None:
        """Deadline-scheduled ticks, so lateness never accumulates; woken early only by
        mark() and stop()."""
        next_s = time.monotonic()
        while True:
            woken = self._wake.wait(max(0.0, next_s - time.monotonic()))
            if self._stopping:
                return
            if woken:
                self._wake.clear()
                # Only requests made before this sample starts get it: a mark() that comes
                # later needs a sample taken after it, and its own set() wakes us again.
                requests = self._take_mark_requests()
                self._answer(requests, self.sample_once(full=True)["t_mono_s"])
                continue
            t_mono_s = time.monotonic()
            self.sample_once(t_mono_s, lateness_s=t_mono_s - next_s)
            next_s = self._next_deadline_s(next_s)

    def _next_deadline_s(self, deadline_s: float) -> float:
        """The next tick after deadline_s; ticks already missed are skipped and counted."""
        next_s = deadline_s + self._interval_s
        behind_s = time.monotonic() - next_s
        if behind_s > 0:
            skipped = math.ceil(behind_s / self._interval_s)
            self.missed_ticks += skipped
            next_s += skipped * self._interval_s
        return next_s

    def _take_mark_requests(self) -> list[_MarkRequest]:
        with self._lock:
            requests, self._mark_requests = self._mark_requests, []
        return requests

    @staticmethod
    def _answer(requests: list[_MarkRequest], t_mono_s: float | None) -> None:
        for request in requests:
            request.t_mono_s = t_mono_s
            request.done.set()

    def sample_once(
        self, t_mono_s: float | None = None, lateness_s: float | None = None, full: bool = False
    ) -> Sample:
        """Read every backend now, store the sample, hand it to the sink and return it.

        lateness_s stays None for samples that were not scheduled ticks (mark(), tests).
        """
        t_mono_s = time.monotonic() if t_mono_s is None else t_mono_s
        sample: Sample = dict.fromkeys(SAMPLE_COLUMNS)
        sample.update(t_mono_s=t_mono_s, lateness_s=lateness_s, telemetry_backends=self._backends_label)
        for backend in self._backends:
            self._read_backend(backend, sample, t_mono_s, full)
        with self._lock:
            # A mark sample may land between ticks; keep rows sorted for bisect.
            at = bisect.bisect_right(self._times_s, t_mono_s)
            self._times_s.insert(at, t_mono_s)
            self._rows.insert(at, tuple(sample.values()))
        self._deliver(sample, t_mono_s)
        return sample

    def _read_backend(self, backend: Backend, sample: Sample, t_mono_s: float, full: bool) -> None:
        """Merge one backend's reading into sample and track which sensors fail or recover."""
        try:
            reading = backend.read(full=full)
        except Exception as exc:  # a backend must never stop the sampler
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
        except Exception as exc:  # a failing sink must not stop sampling
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
