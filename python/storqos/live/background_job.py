"""A gateway's background job scheduled by its day model (seed 002, Xue et al., ICAC'14,
§3.3 Fig. 8, the prediction-based policy): a scrub (a sequential read of one export,
wrapping) that runs while the users are Low and their Low is predicted to last longer
than the warm-up time, stops before the predicted High and warms the fast tier (a
sequential read of the users' export, through the tiered export's LRU), and falls back
to the feedback action when High comes before its predicted time.

The decisions are those of :func:`storqos.planning.warming.policies.evaluate`'s
``prediction`` policy, minute by minute, on the gateway's own clock: the detector
(:func:`~storqos.planning.warming.intensity.detect_states`), the day model
(:class:`~storqos.planning.warming.daymodel.DayModel`) and the planned residual Low time
(:func:`~storqos.planning.warming.policies.planned_residual`). A "minute" is the job's
``interval`` (1 min by default; shorter compresses days, as the tests do).

The model is loaded from ``storqos warm --save`` or learned from the users' requests the
gateway counts each interval (every completed day re-learns it); the counts are kept in
a state file across restarts, the job's days starting when it first started. Until a
model exists the job runs on feedback alone, once an hour of counts gives a threshold.
The job reads through the gateway itself, over NBD on its own export, so the policy
schedules it as the tenant of that export; it reports its state to the gateway
(``storqos ctl stats``, ``storqos_background_*`` metrics).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from storqos.base.errors import InputError
from storqos.live.control_client import command
from storqos.live.replay import nbd_module
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.intensity import DAY_MIN, DETECT_MIN, HIGH, SMOOTH_MIN, Intensity, detect_states, learn_threshold
from storqos.planning.warming.policies import PLAN_QUANTILE, low_pools, planned_residual
from storqos.planning.warming.predict import Predictor

#: What a state file says it is.
STATE_FORMAT = "storqos-background-state"
#: Counts needed before the feedback detector has a threshold (minutes).
LEARN_MIN = 2 * SMOOTH_MIN
#: Lead before a predicted High (intervals) of a job with no warm-up to time it by.
DEFAULT_T_FAST = 30.0


@dataclass
class JobSettings:
    """A ``[background]`` table, checked: exports by name, tenants by id."""

    export: str
    users: list[int]
    rate_iops: float
    interval_s: float
    t_fast_min: float
    block: int
    model_path: Path | None = None
    state_path: Path | None = None
    warm_export: str | None = None
    warm_bytes: int = 0


@dataclass
class BackgroundJob:
    """The job of one gateway: :meth:`start` once it listens, :meth:`stop` at its end."""

    settings: JobSettings
    control: str
    log: Any = None
    model: DayModel | None = None
    series: list[float] = field(default_factory=list)
    origin_s: float = 0.0
    running: bool = False
    warming: bool = False
    high: bool = False
    next_change_min: float = -1.0
    done: int = 0
    warmed: int = 0
    #: passes over the job's export completed, and the next read's offset in it
    passes: int = 0
    offset: int = 0
    #: the job's export's size in whole blocks, in bytes (0 until the job has opened it)
    export_bytes: int = 0
    #: the High/Low threshold in use (requests per interval), None before one exists
    threshold: float | None = None
    #: days the model was learned from (0 for a loaded model)
    model_days: int = 0
    _ops: int | None = None
    _period: tuple[int, int] = (-1, 0)
    _pools: list[list[float]] | None = None
    #: where the current Low began, as the pools were drawn for it (minutes)
    _began: int = 0
    _warm_left: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _uris: tuple[str, str | None] = ("", None)

    def __post_init__(self) -> None:
        if self.log is None:
            self.log = lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush())
        s = self.settings
        if s.model_path is not None:
            from storqos.planning.warming.model_file import load_model

            self.model = load_model(s.model_path, "[background] model")
        self.origin_s = time.time()
        if s.state_path is not None and s.state_path.exists():
            self._read_state(s.state_path)

    # -- the state file ---------------------------------------------------------------

    def _read_state(self, path: Path) -> None:
        where = "[background] state"
        try:
            doc = json.loads(path.read_text())
            if doc.get("format") != STATE_FORMAT:
                raise ValueError("not a background job's state file")
            if not math.isclose(float(doc["interval_s"]), self.settings.interval_s):
                raise InputError(f"{path}: kept at an interval of {doc['interval_s']} s, the job's is "
                                 f"{self.settings.interval_s:g} s (remove the file to start again)", where)
            series = [float(x) for x in doc["per_min"]]
            if any(not (math.isfinite(x) and x >= 0) for x in series):
                raise ValueError("counts must be >= 0")
            self.series, self.origin_s = series, float(doc["origin_unix_s"])
        except InputError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}: {e}", where) from None

    def _write_state(self) -> None:
        path = self.settings.state_path
        if path is None:
            return
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps({"format": STATE_FORMAT, "interval_s": self.settings.interval_s,
                                       "origin_unix_s": self.origin_s, "per_min": self.series}))
            tmp.replace(path)
        except OSError as e:
            self.log(f"background: cannot keep the state file {path}: {e.strerror or e}")

    # -- deciding ---------------------------------------------------------------------

    def tick(self, users_done: int) -> None:
        """One interval closed with the users' completed requests at ``users_done`` (a
        running count): record it, re-learn at a day's end, decide and report."""
        minute = int((time.time() - self.origin_s) / self.settings.interval_s)
        if self._ops is not None:
            n = float(max(0, users_done - self._ops))
            if minute < len(self.series):  # a late tick caught up within the same interval
                self.series[-1] += n
            else:  # intervals no tick saw count nothing; this one counts all since the last
                self.series.extend([0.0] * (minute - len(self.series)))
                self.series.append(n)
        self._ops = users_done
        if self.settings.model_path is None and len(self.series) % DAY_MIN == 0 and len(self.series) >= DAY_MIN:
            days = len(self.series) // DAY_MIN
            self.model = DayModel.fit(Intensity(np.asarray(self.series[:days * DAY_MIN])), range(days))
            self.model_days = days
            self._pools = None
            self.log(f"background: day model learned from {days} day(s): {self.model.k} class(es), "
                     f"threshold {self.model.threshold:.3g} requests per interval")
        self._write_state()
        self.decide()

    def decide(self) -> None:
        """Run, stop or warm, by the prediction policy (or feedback without a model)."""
        x = np.asarray(self.series, dtype=float)
        t = len(x) - 1
        thr = self.model.threshold if self.model is not None else (
            learn_threshold(x) if len(x) >= LEARN_MIN else None)
        self.threshold = thr
        if thr is None or t < 0:
            self._set(False, False, False, -1.0)
            return
        detected = detect_states(x, thr, DETECT_MIN)
        st = int(detected[-1])
        if st != self._period[0] or self._pools is None:
            changes = np.flatnonzero(detected != st)
            start = int(changes[-1]) + 1 if changes.size else 0  # where the current period began
            if (st, start) != self._period:
                self._period, self._pools = (st, start), None
        if st == HIGH:  # prediction or not: no system work in High, warm if not warm yet
            self._set(False, self._warm_left > 0, True, -1.0)
            return
        if self.model is None:  # feedback: run whenever Low
            self._set(True, False, False, -1.0)
            return
        if self._pools is None:  # once per period (and per model): where it began, what follows
            start = self._period[1]
            if start == 0:  # the job started inside this Low: when it began is the model's guess
                start = self.model.began(st, 0, self._day_class(x, 0), self._day_class(x, -1)) or 0
            day = start // DAY_MIN
            self._pools = low_pools(self.model, self._day_class(x, day), self._day_class(x, day + 1), start % DAY_MIN)
            self._began = start
        resid = planned_residual(self._pools, t - self._began, PLAN_QUANTILE)
        run = resid > self.settings.t_fast_min
        self._set(run, not run and self._warm_left > 0, False, resid)

    def _day_class(self, x: np.ndarray, day: int) -> int:
        """The class of the job's day ``day``: a learned model's own for the days it
        learned from (and its prediction beyond); with a loaded model, whose days are
        not the job's, the class of the same weekday (day 0 a Monday), else its most
        frequent class."""
        assert self.model is not None
        if self.settings.model_path is None:
            return Predictor(self.model, Intensity(x)).day_class(max(day, 0))
        c = self.model.class_of_weekday(day % 7)
        return c if c is not None else max(range(self.model.k), key=self.model.labels.count)

    def _set(self, running: bool, warming: bool, high: bool, next_change: float) -> None:
        if running and not self.running:
            self._warm_left = self.settings.warm_bytes  # the next stop warms again
            self.log(f"background: {self.settings.export} runs"
                     + (f" (Low predicted for {next_change:.0f} more intervals)" if next_change >= 0 else ""))
        elif self.running and not running:
            why = "High detected" if high else f"High predicted within {self.settings.t_fast_min:g} intervals"
            self.log(f"background: {self.settings.export} stops ({why})" + (": warming" if warming else ""))
        self.running, self.warming, self.high, self.next_change_min = running, warming, high, next_change

    def state(self) -> dict[str, Any]:
        """The job's state as the gateway's ``background`` command takes it (its fields:
        the gateway's ``BackgroundState``)."""
        s, m = self.settings, self.model
        with self._lock:
            done, offset, passes = self.done, self.offset, self.passes
        return {
            "running": self.running, "warming": self.warming, "high": self.high,
            "next_change_min": self.next_change_min, "model": m is not None, "done": done,
            "warmed": self.warmed,
            "model_source": "" if m is None else str(s.model_path) if s.model_path is not None else "learned",
            "model_days": self.model_days, "model_classes": 0 if m is None else int(m.k),
            "threshold": -1.0 if self.threshold is None else float(self.threshold), "interval_s": s.interval_s,
            "intervals": len(self.series), "passes": passes, "lead": s.t_fast_min,
            "progress": offset / self.export_bytes if self.export_bytes else 0.0}

    def report(self) -> None:
        """Tell the gateway the job's state."""
        command(self.control, {"cmd": "background", "state": self.state()})

    # -- running ----------------------------------------------------------------------

    def start(self, uri_of: Any) -> None:
        """Start the clock (a tick every interval) and the worker (the reads), which
        opens ``uri_of(export)`` (the gateway's own NBD URI of an export)."""
        s = self.settings
        self._uris = (uri_of(s.export), None if s.warm_export is None else uri_of(s.warm_export))
        for target, name in ((self._clock, "storqos-background-clock"), (self._work, "storqos-background-job")):
            th = threading.Thread(target=target, name=name, daemon=True)
            th.start()
            self._threads.append(th)

    def _users_done(self) -> int:
        st = command(self.control, {"cmd": "stats"})
        users = set(self.settings.users)
        return sum(int(x["ops"]) for x in st.get("tenants") or [] if int(x["tenant"]) in users)

    def _clock(self) -> None:
        w = self.settings.interval_s
        next_at = self.origin_s + (len(self.series) + 1) * w
        while not self._stop.is_set():
            if self._stop.wait(max(0.0, next_at - time.time())):
                return
            next_at += w
            try:
                self.tick(self._users_done())
                self.report()
            except InputError as e:
                if self._stop.is_set():
                    return
                self.log(f"background: {e}")

    def _work(self) -> None:
        nbd = nbd_module()
        s = self.settings
        uri, warm_uri = self._uris
        try:
            job = nbd.NBD()
            job.connect_uri(uri)
            warm = None
            if warm_uri is not None:
                warm = nbd.NBD()
                warm.connect_uri(warm_uri)
        except nbd.Error as e:
            self.log(f"background: cannot open {uri}: {e}")
            return
        size = job.get_size()
        end = size - size % s.block
        self.export_bytes = end
        warm_at = 0
        gap = 1.0 / s.rate_iops
        due = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if not (self.running or (self.warming and warm is not None and self._warm_left > 0)):
                    due = now
                    self._stop.wait(min(0.01, s.interval_s / 4))
                    continue
                if now < due:
                    self._stop.wait(due - now)
                    continue
                due = max(due + gap, now - gap)
                if self.running:
                    job.pread(s.block, self.offset)
                    with self._lock:  # state() reads the three together
                        self.done += 1
                        if self.offset + s.block < end:
                            self.offset += s.block
                        else:
                            self.offset, self.passes = 0, self.passes + 1
                elif warm is not None:
                    warm.pread(s.block, warm_at)
                    self.warmed += 1
                    warm_at = (warm_at + s.block) % max(s.block, s.warm_bytes)
                    self._warm_left = max(0, self._warm_left - s.block)
        except nbd.Error as e:
            # A gateway that stops closes the job's connection before the job is stopped.
            if not self._stop.wait(2.0):
                self.log(f"background: {s.export}: {e}")
        finally:
            for h in (job, warm):
                if h is not None:
                    try:
                        h.shutdown()
                    except nbd.Error:
                        pass

    def stop(self) -> None:
        """Stop the job and its clock; the state file holds the counts."""
        self._stop.set()
        for th in self._threads:
            th.join(timeout=5)
        self._write_state()


def job_settings(table: Any, cfg: dict[str, Any], base: Path) -> JobSettings:
    """A config file's ``[background]`` table (paths relative to ``base``, the file's
    folder) against the exports of ``cfg``; a name that is no export is an error."""
    exports = {e["name"]: e for e in cfg["exports"]}
    names = {int(k): str(v) for k, v in (cfg.get("tenant_names") or {}).items()}

    def export(name: str, key: str) -> dict[str, Any]:
        if name not in exports:
            raise InputError(f"no export named {name!r} (exports: {', '.join(sorted(exports))})", f"[background] {key}")
        return exports[name]

    job = export(table.export, "export")
    warm = None if table.warm_export is None else export(table.warm_export, "warm_export")
    if table.users is None:
        users = sorted({int(e["tenant"]) for e in cfg["exports"]} - {int(job["tenant"])})
    else:
        by_name = {v: k for k, v in names.items()}
        users = []
        for u in table.users:
            if isinstance(u, int) or str(u).isdigit():
                users.append(int(u))
            elif u in by_name:
                users.append(by_name[u])
            else:
                raise InputError(f"no tenant named {u!r}", "[background] users")
    if int(job["tenant"]) in users:
        raise InputError(f"the job's own tenant ({job['tenant']}) cannot be one of the users it makes room for",
                         "[background] users")
    if not users:
        raise InputError("no users: the job's day is the other tenants' requests, and there are none",
                         "[background] users")
    warm_bytes = 0
    if warm is not None:
        warm_bytes = table.warm_bytes if table.warm_bytes is not None else Path(warm["path"]).stat().st_size
    interval_s = table.interval / 1e9
    if table.t_fast is not None:
        t_fast = float(table.t_fast)
    elif warm_bytes:  # the warm-up's own time (seed 002's T_fast = C / F), in intervals
        t_fast = math.ceil(warm_bytes / table.block) / float(table.rate) / interval_s
    else:
        t_fast = DEFAULT_T_FAST

    def path(p: str | None) -> Path | None:
        return None if p is None else (base / p if not Path(p).is_absolute() else Path(p))

    return JobSettings(export=table.export, users=users, rate_iops=float(table.rate), interval_s=interval_s,
                       t_fast_min=t_fast, block=int(table.block), model_path=path(table.model),
                       state_path=path(table.state), warm_export=table.warm_export, warm_bytes=int(warm_bytes))


__all__ = ["STATE_FORMAT", "BackgroundJob", "JobSettings", "job_settings"]
