"""The synthetic source as a PySpark streaming data source, format ``armd-synthetic``.

The daemon's synthetic statistics source (``armd.adapters.synthetic``) draws
Poisson arrivals per whole second from a generator seeded by (seed, stream,
second). This module feeds exactly those arrivals to real Spark queries, so
that what armd predicts from the schedule and what Spark measures come from
the same elements, and so that runs can be replayed.

Offsets are event time: ``{"stream": NAME, "event_ms": N}``, N milliseconds
after the ``start`` option (the origin). A micro-batch over [a, b) reads the
arrivals with a <= t < b; because rows are drawn per second from seeded
generators, two queries that read from the same offset see identical rows
(this is what GenMig needs to position a new query at an old one's offset).
The latest offset follows the wall clock: ``(now - start) * speed`` seconds.

Rows: ``event_time`` (timestamp, UTC), ``key`` (bigint, 0 ≤ key < keys,
uniform or Zipf-distributed), ``value`` (double in [0, 1)), and with
``element_bytes`` > 0 a ``payload`` string of that many characters.

Options (all strings, as Spark passes them):

====================== ======== ==================================================================
option                 default  meaning
====================== ======== ==================================================================
stream                 required stream name (as in ``[source.streams.NAME]``)
start                  required event-time origin: ISO-8601 with timezone, or epoch seconds
schedule               required JSON ``{"rate_per_second": r, "steps": [[at, r]], "bursts": [[at, dur, f]]}``
seed                   42       seed of the arrivals (the daemon's ``source.seed``)
all_streams            stream   comma-separated names of every stream of the daemon's synthetic
                                source; the draws of a stream depend on its position among them
keys                   1        number of distinct keys
key_distribution       uniform  ``uniform`` or ``zipf``
zipf_exponent          1.0      s > 0: P(key = k) ∝ 1 / (k + 1)^s
element_bytes          0        > 0 adds a ``payload`` column of that many characters
speed                  1.0      event-time seconds per wall-clock second (> 0; large in tests)
starting_seconds       0        where a new query starts reading (seconds after start, or ``latest``)
end_seconds            none     the stream ends here (latest offset never passes it)
max_seconds_per_batch  none     a micro-batch covers at most this much event time (a simulated trigger)
catch_up_seconds       none     rows up to here (seconds after start) are already there: a batch that
                                begins before it reads up to it at once, whatever max_seconds_per_batch
                                says (a replaying run's backlog, which a real trigger reads in one batch)
partitions             1        Spark partitions per micro-batch
====================== ======== ==================================================================
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from armd.adapters.synthetic import Schedule, SyntheticSource

FORMAT = "armd-synthetic"
KEY_DISTRIBUTIONS = ("uniform", "zipf")
OPTIONS = (
    "stream", "start", "schedule", "seed", "all_streams", "keys", "key_distribution", "zipf_exponent",
    "element_bytes", "speed", "starting_seconds", "end_seconds", "max_seconds_per_batch", "catch_up_seconds",
    "partitions",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class SourceOptionError(ValueError):
    """A bad option of the ``armd-synthetic`` source; the message names the option and what is allowed."""


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one ``armd-synthetic`` stream."""

    stream: str
    start: float
    """Origin of event time, epoch seconds."""
    schedule: Schedule
    seed: int = 42
    all_streams: tuple[str, ...] = ()
    keys: int = 1
    key_distribution: str = "uniform"
    zipf_exponent: float = 1.0
    element_bytes: int = 0
    speed: float = 1.0
    starting_seconds: float | None = 0.0
    """None: start at the latest offset."""
    end_seconds: float | None = None
    max_seconds_per_batch: float | None = None
    catch_up_seconds: float | None = None
    """Rows before it are a backlog a batch reads at once (``max_seconds_per_batch`` paces live rows only)."""
    partitions: int = 1

    @property
    def stream_index(self) -> int:
        """The stream's position among ``all_streams``, as ``SyntheticSource`` numbers its streams."""
        return sorted(self.all_streams).index(self.stream)

    @property
    def schema(self) -> str:
        payload = ", payload string" if self.element_bytes > 0 else ""
        return f"event_time timestamp, key bigint, value double{payload}"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SourceOptions":
        """Validate Spark's option map (keys are case-insensitive there)."""
        raw = {str(k).lower(): v for k, v in options.items() if str(k).lower() != "path"}
        unknown = sorted(set(raw) - set(OPTIONS))
        if unknown:
            raise SourceOptionError(f"{FORMAT}: unknown option(s) {unknown}; allowed: {', '.join(OPTIONS)}")
        for required in ("stream", "start", "schedule"):
            if not str(raw.get(required, "")).strip():
                raise SourceOptionError(f"{FORMAT}: option {required!r} is required ({_HELP[required]})")
        stream = str(raw["stream"]).strip()
        all_streams = tuple(s.strip() for s in str(raw.get("all_streams", stream)).split(",") if s.strip())
        if stream not in all_streams:
            raise SourceOptionError(f"{FORMAT}: option 'all_streams' must include the stream {stream!r}, got {all_streams}")
        distribution = str(raw.get("key_distribution", "uniform")).strip().lower()
        if distribution not in KEY_DISTRIBUTIONS:
            raise SourceOptionError(
                f"{FORMAT}: option 'key_distribution' must be one of {', '.join(KEY_DISTRIBUTIONS)}, got {distribution!r}"
            )
        starting = str(raw.get("starting_seconds", "0")).strip().lower()
        return cls(
            stream=stream,
            start=_parse_start(raw["start"]),
            schedule=parse_schedule(raw["schedule"]),
            seed=_integer(raw, "seed", 42, 0),
            all_streams=all_streams,
            keys=_integer(raw, "keys", 1, 1),
            key_distribution=distribution,
            zipf_exponent=_number(raw, "zipf_exponent", 1.0, positive=True),
            element_bytes=_integer(raw, "element_bytes", 0, 0),
            speed=_number(raw, "speed", 1.0, positive=True),
            starting_seconds=None if starting == "latest" else _number(raw, "starting_seconds", 0.0),
            end_seconds=_optional_number(raw, "end_seconds"),
            max_seconds_per_batch=_optional_number(raw, "max_seconds_per_batch", positive=True),
            catch_up_seconds=_optional_number(raw, "catch_up_seconds"),
            partitions=_integer(raw, "partitions", 1, 1),
        )

    def as_options(self) -> dict[str, str]:
        """The Spark option map that parses back to these options."""
        out = {
            "stream": self.stream,
            "start": repr(self.start),
            "schedule": json.dumps(schedule_json(self.schedule)),
            "seed": str(self.seed),
            "all_streams": ",".join(self.all_streams or (self.stream,)),
            "keys": str(self.keys),
            "key_distribution": self.key_distribution,
            "zipf_exponent": repr(self.zipf_exponent),
            "element_bytes": str(self.element_bytes),
            "speed": repr(self.speed),
            "starting_seconds": "latest" if self.starting_seconds is None else repr(self.starting_seconds),
            "partitions": str(self.partitions),
        }
        if self.end_seconds is not None:
            out["end_seconds"] = repr(self.end_seconds)
        if self.max_seconds_per_batch is not None:
            out["max_seconds_per_batch"] = repr(self.max_seconds_per_batch)
        if self.catch_up_seconds is not None:
            out["catch_up_seconds"] = repr(self.catch_up_seconds)
        return out


_HELP = {
    "stream": "the stream's name",
    "start": "the event-time origin as ISO-8601 with timezone or epoch seconds; give queries that must see "
    "the same rows the same value",
    "schedule": 'JSON like {"rate_per_second": 50, "steps": [[60, 100]], "bursts": [[20, 15, 4]]}',
}


def _number(raw: Mapping[str, Any], name: str, default: float, *, positive: bool = False) -> float:
    text = raw.get(name)
    if text is None or str(text).strip() == "":
        return default
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise SourceOptionError(f"{FORMAT}: option {name!r} must be a finite number {bound}, got {text!r}")
    return value


def _optional_number(raw: Mapping[str, Any], name: str, *, positive: bool = False) -> float | None:
    if raw.get(name) is None or str(raw[name]).strip() == "":
        return None
    return _number(raw, name, 0.0, positive=positive)


def _integer(raw: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    text = raw.get(name)
    if text is None or str(text).strip() == "":
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise SourceOptionError(f"{FORMAT}: option {name!r} must be a whole number >= {minimum}, got {text!r}")
    return value


def _parse_start(text: Any) -> float:
    value = str(text).strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise SourceOptionError(
            f"{FORMAT}: option 'start' must be epoch seconds or ISO-8601 with a timezone (e.g. 2026-01-01T00:00:00Z), got {text!r}"
        )
    return (moment - _EPOCH).total_seconds()


def parse_schedule(text: str | Mapping[str, Any]) -> Schedule:
    """A ``Schedule`` from its JSON form (the keys of ``[source.streams.NAME]``: rate_per_second, steps, bursts)."""
    where = f"{FORMAT}: option 'schedule'"
    try:
        doc = json.loads(text) if isinstance(text, str) else dict(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"{where} is not valid JSON ({exc.msg}); expected {_HELP['schedule']}") from None
    if not isinstance(doc, Mapping):
        raise SourceOptionError(f"{where} must be a JSON object; expected {_HELP['schedule']}")
    unknown = sorted(set(doc) - {"rate_per_second", "steps", "bursts"})
    if unknown:
        raise SourceOptionError(f"{where}: unknown key(s) {unknown}; allowed: rate_per_second, steps, bursts")
    try:
        rate = float(doc["rate_per_second"])
        steps = tuple((float(at), float(r)) for at, r in doc.get("steps", ()))
        bursts = tuple((float(at), float(dur), float(f)) for at, dur, f in doc.get("bursts", ()))
    except (KeyError, TypeError, ValueError):
        raise SourceOptionError(
            f"{where}: needs rate_per_second (a number), steps as [at_seconds, rate] pairs and bursts as "
            f"[at_seconds, duration_seconds, factor] triples; got {text!r}"
        ) from None
    values = [rate, *(r for _, r in steps), *(f for *_, f in bursts), *(d for _, d, _ in bursts)]
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise SourceOptionError(f"{where}: rates, durations and factors must be finite and >= 0, got {text!r}")
    return Schedule(rate, steps, bursts)


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "rate_per_second": schedule.rate_per_second,
        "steps": [list(s) for s in schedule.steps],
        "bursts": [list(b) for b in schedule.bursts],
    }


class Arrivals:
    """The rows of one stream, drawn second by second through ``SyntheticSource`` (the same arrival times)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        streams = options.all_streams or (options.stream,)
        origin = datetime.fromtimestamp(options.start, tz=timezone.utc)
        # Only this stream's schedule is read; the others are named so that the stream keeps the
        # position among all streams that its seeded draws depend on.
        self.source = SyntheticSource({name: options.schedule for name in streams}, options.seed, 1.0, origin)
        if options.key_distribution == "zipf":
            weights = 1.0 / np.arange(1, options.keys + 1, dtype=float) ** options.zipf_exponent
            self._p: np.ndarray | None = weights / weights.sum()
        else:
            self._p = None

    def second(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times in seconds since start, keys, values) of the arrivals in second k, ascending in time."""
        times = self.source.arrivals(self.options.stream, float(k), float(k + 1))
        # Keys and values come from a second generator seeded like the arrivals, plus a marker.
        rng = np.random.default_rng([self.options.seed, self.options.stream_index, k, 1])
        n = len(times)
        if self._p is None:
            keys = rng.integers(0, self.options.keys, n)
        else:
            keys = rng.choice(self.options.keys, size=n, p=self._p)
        return times, keys.astype(np.int64), rng.random(n)

    def between(self, start_ms: int, end_ms: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per whole second, the arrivals with start_ms <= 1000 t < end_ms."""
        for k in range(max(0, start_ms // 1000), -(-end_ms // 1000)):
            times, keys, values = self.second(k)
            ms = times * 1000.0
            inside = (ms >= start_ms) & (ms < end_ms)
            if inside.any():
                yield times[inside], keys[inside], values[inside]

    def count(self, start_seconds: float, end_seconds: float) -> int:
        """How many rows a query reading event time [start, end) gets."""
        return sum(len(t) for t, _, _ in self.between(_ms(start_seconds), _ms(end_seconds)))


def _ms(seconds: float) -> int:
    return int(math.floor(seconds * 1000.0 + 1e-6))


def _offset(stream: str, event_ms: int) -> dict:
    return {"stream": stream, "event_ms": int(event_ms)}


def _synthetic_offset(offset: Mapping[str, Any] | str | None) -> Mapping[str, Any] | None:
    """An ``armd-synthetic`` offset (dict or its JSON) as a dict, or None for other sources' offsets."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except json.JSONDecodeError:
            return None
    return offset if isinstance(offset, Mapping) and "event_ms" in offset and "stream" in offset else None


def offset_seconds(offset: Mapping[str, Any] | str | None) -> float | None:
    """Event seconds of an ``armd-synthetic`` offset (dict or its JSON), or None for other sources' offsets."""
    parsed = _synthetic_offset(offset)
    return int(parsed["event_ms"]) / 1000.0 if parsed is not None else None


def offset_stream(offset: Mapping[str, Any] | str | None) -> str | None:
    """The stream name an ``armd-synthetic`` offset carries, or None."""
    parsed = _synthetic_offset(offset)
    return str(parsed["stream"]) if parsed is not None else None


# --- the PySpark data source ---------------------------------------------------------------------


class _Range(InputPartition):
    def __init__(self, start_ms: int, end_ms: int) -> None:
        self.start_ms, self.end_ms = start_ms, end_ms


class SyntheticStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are event time; the latest offset follows the wall clock from ``start`` at ``speed``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target_ms: int | None = None

    def _now_ms(self) -> int:
        o = self.options
        now = max(0.0, (time.time() - o.start) * o.speed)
        if o.end_seconds is not None:
            now = min(now, o.end_seconds)
        return _ms(now)

    def initialOffset(self) -> dict:
        o = self.options
        first = self._now_ms() if o.starting_seconds is None else _ms(o.starting_seconds)
        return _offset(o.stream, first)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        # ``limit`` (Spark's ReadLimit) is ignored: the only limit is max_seconds_per_batch, a simulated
        # trigger interval in event time that must hold for every kind of trigger.
        o = self.options
        latest = self._now_ms() if self._target_ms is None else self._target_ms
        if start is not None:
            begin = int(start["event_ms"])
            latest = max(latest, begin)
            if o.max_seconds_per_batch is not None:
                backlog = _ms(o.catch_up_seconds) if o.catch_up_seconds is not None else begin
                latest = min(latest, max(begin + _ms(o.max_seconds_per_batch), backlog))
        return _offset(o.stream, latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target_ms = self._now_ms()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        a, b = int(start["event_ms"]), int(end["event_ms"])
        if b <= a:
            return []
        n = max(1, min(self.options.partitions, (b - a + 999) // 1000))
        cuts = [a + (b - a) * i // n for i in range(n + 1)]
        return [_Range(x, y) for x, y in zip(cuts, cuts[1:]) if y > x]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        o = self.options
        arrivals = Arrivals(o)
        origin_us = int(round(o.start * 1e6))
        for times, keys, values in arrivals.between(partition.start_ms, partition.end_ms):  # type: ignore[attr-defined]
            columns = {
                "event_time": pa.array(origin_us + np.round(times * 1e6).astype(np.int64), pa.timestamp("us", tz="UTC")),
                "key": pa.array(keys, pa.int64()),
                "value": pa.array(values, pa.float64()),
            }
            if o.element_bytes > 0:
                columns["payload"] = pa.array(["x" * o.element_bytes] * len(times), pa.string())
            yield pa.RecordBatch.from_pydict(columns)

    def commit(self, end: dict) -> None:
        pass


class SyntheticDataSource(DataSource):
    """``spark.readStream.format("armd-synthetic")``: Poisson arrivals on a rate schedule, replayable by offset."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(dict(options))

    def schema(self) -> str:
        return self.parsed.schema

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return SyntheticStreamReader(self.parsed)


def register(spark: Any) -> None:
    """Make ``format("armd-synthetic")`` available in this session."""
    spark.dataSource.register(SyntheticDataSource)


def read_synthetic(
    spark: Any,
    stream: str,
    schedule: Schedule,
    *,
    start: float | datetime | None = None,
    **options: Any,
) -> Any:
    """A streaming DataFrame over one synthetic stream; ``options`` are the source's other options.

    ``start`` defaults to now (epoch seconds, read once here), so that every
    partition and restart of this DataFrame shares one origin.
    """
    if start is None:
        start = math.floor(time.time())
    elif isinstance(start, datetime):
        start = (start - _EPOCH).total_seconds()
    parsed = SourceOptions.parse(
        {"stream": stream, "start": repr(float(start)), "schedule": json.dumps(schedule_json(schedule)),
         **{k: str(v) for k, v in options.items() if v is not None}}
    )
    return spark.readStream.format(FORMAT).options(**parsed.as_options()).load()
