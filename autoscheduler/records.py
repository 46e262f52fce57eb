"""The tuning database: every measured candidate schedule, kept in SQLite.

    db = TuningDB()                      # $PYHALIDE_CACHE_DIR/tuning.sqlite (or ~/.cache/pyhalide)
    db.add([record, ...])                # one transaction: a batch is all there or not at all
    db.best(key)                         # the fastest correct schedule for this key, or None

A record's key is what makes a measurement reusable: the algorithm's structural hash (the same for
a renamed copy, different for any change to a definition), the output regions and input shapes,
the machine's fingerprint (CPU, cores, vector width, caches and the thread count used), pyhalide's
version and the featurisation version. `best` only answers for a key equal in every field, so a
record measured on another machine or by another version (imported, or left by an upgrade) is kept
apart and never applied; it can still seed a search (`nearest`).

The database runs in WAL mode: a process killed in the middle of a batch loses that batch only,
and readers never block the writer. Schedules are stored as the JSON of `schedule_to_json` and go
through its schema validation when imported and when applied: nothing stored is ever executed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sqlite3
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from pyhalide.codegen.jit import cache_root
from pyhalide.schedule import validate_schedule_json

from .loop_nest import FEATURE_VERSION, Decision
from .measure import STATUSES

DB_NAME = "tuning.sqlite"
SCHEMA_VERSION = 1


def default_path() -> Path:
    return cache_root() / DB_NAME


def pyhalide_version() -> str:
    try:
        from importlib.metadata import version

        return version("pyhalide")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source checkout)
        return "0+unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_fingerprint(threads: int, hw=None) -> str:
    """A short, readable id of the machine a measurement is good for: CPU model, cores, the
    thread count of the runs, vector width and cache sizes, hashed."""
    from .api import hardware

    hw = hw or hardware(None, {})
    text = f"{_cpu_model()}|cpus={os.cpu_count()}|threads={threads}|vec={hw.vector_bits}|" \
           f"l1={hw.l1}|l2={hw.l2}|l3={hw.l3}"
    return f"{platform.machine()}-t{threads}-" + hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TuningKey:
    algorithm: str  # structural_hash of the outputs
    shapes: str  # canonical JSON: {"outputs": [[[min, extent], ...], ...], "inputs": {name: [...]}}
    machine: str  # machine_fingerprint
    pyhalide_version: str = field(default_factory=pyhalide_version)
    feature_version: int = FEATURE_VERSION

    @staticmethod
    def shapes_text(outputs: list, inputs: dict) -> str:
        return json.dumps({"outputs": [[list(map(int, d)) for d in o] for o in outputs],
                           "inputs": {k: [list(map(int, d)) for d in v] for k, v in sorted(inputs.items())}},
                          sort_keys=True, separators=(",", ":"))


@dataclass
class Record:
    key: TuningKey
    schedule: str  # schedule_to_json text
    status: str  # measure.STATUSES
    time_s: float | None = None
    decisions: dict | None = None  # Func -> Decision.describe(), where the search made it
    predicted_s: float | None = None
    error: str | None = None
    run_id: str = ""
    trial: int = 0
    created: float = field(default_factory=time.time)
    origin: str = "local"  # or "imported"
    id: int | None = None

    def to_json(self) -> str:
        d = asdict(self)
        d.pop("id")
        return json.dumps(d, sort_keys=True)  # parse_record marks it imported where it goes


_COLUMNS = ("algorithm", "shapes", "machine", "pyhalide_version", "feature_version", "schedule", "status",
            "time_s", "decisions", "predicted_s", "error", "run_id", "trial", "created", "origin")


class TuningDB:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30.0)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self.conn:
            self.conn.execute("""CREATE TABLE IF NOT EXISTS records (
                id INTEGER PRIMARY KEY, algorithm TEXT NOT NULL, shapes TEXT NOT NULL, machine TEXT NOT NULL,
                pyhalide_version TEXT NOT NULL, feature_version INTEGER NOT NULL, schedule TEXT NOT NULL,
                status TEXT NOT NULL, time_s REAL, decisions TEXT, predicted_s REAL, error TEXT,
                run_id TEXT NOT NULL, trial INTEGER NOT NULL, created REAL NOT NULL, origin TEXT NOT NULL)""")
            self.conn.execute("CREATE INDEX IF NOT EXISTS records_key ON records "
                              "(algorithm, machine, pyhalide_version, feature_version, shapes)")
            self.conn.execute("""CREATE TABLE IF NOT EXISTS runs (
                run_id TEXT PRIMARY KEY, algorithm TEXT NOT NULL, shapes TEXT NOT NULL, machine TEXT NOT NULL,
                pyhalide_version TEXT NOT NULL, feature_version INTEGER NOT NULL, started REAL NOT NULL,
                finished REAL)""")
            self.conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        found = self.conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()[0]
        if found != str(SCHEMA_VERSION):
            raise ValueError(f"{self.path}: tuning database schema {found}, this pyhalide reads {SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- writing
    def add(self, records: list[Record]) -> None:
        """Store a batch in one transaction."""
        rows = [_row(r) for r in records]
        with self.conn:
            self.conn.executemany(f"INSERT INTO records ({', '.join(_COLUMNS)}) VALUES "
                                  f"({', '.join('?' * len(_COLUMNS))})", rows)

    def start_run(self, key: TuningKey) -> str:
        """A new tuning run of `key` (its id), or the id of the one an interrupted process left
        unfinished: its records are already here, and it goes on from them."""
        row = self.conn.execute("SELECT run_id FROM runs WHERE algorithm = ? AND shapes = ? AND machine = ? AND "
                                "pyhalide_version = ? AND feature_version = ? AND finished IS NULL "
                                "ORDER BY started DESC", _key_args(key)).fetchone()
        if row:
            return row[0]
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
        with self.conn:
            self.conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                              (run_id, *_key_args(key), time.time()))
        return run_id

    def finish_run(self, run_id: str) -> None:
        with self.conn:
            self.conn.execute("UPDATE runs SET finished = ? WHERE run_id = ?", (time.time(), run_id))

    def tuned(self, key: TuningKey) -> bool:
        """Whether a tuning run of exactly this key finished."""
        return self.conn.execute("SELECT 1 FROM runs WHERE algorithm = ? AND shapes = ? AND machine = ? AND "
                                 "pyhalide_version = ? AND feature_version = ? AND finished IS NOT NULL",
                                 _key_args(key)).fetchone() is not None

    def prune(self, keep: int = 10, algorithm: str | None = None) -> int:
        """Keep the `keep` fastest correct records of every key (and no failures); returns how
        many records were deleted."""
        where, args = ("WHERE algorithm = ?", (algorithm,)) if algorithm else ("", ())
        with self.conn:
            before = self.conn.total_changes
            self.conn.execute(f"""DELETE FROM records WHERE id IN (
                SELECT id FROM (SELECT id, status, ROW_NUMBER() OVER (
                    PARTITION BY algorithm, shapes, machine, pyhalide_version, feature_version
                    ORDER BY (status = 'ok') DESC, time_s) AS n FROM records {where})
                WHERE status != 'ok' OR n > ?)""", (*args, keep))
            return self.conn.total_changes - before

    # ---- reading
    def records(self, key: TuningKey | None = None, algorithm: str | None = None, status: str | None = None,
                limit: int | None = None) -> list[Record]:
        """Records, fastest first (failures last): of one key, or one algorithm, or all."""
        where, args = [], []
        if key is not None:
            where.append("algorithm = ? AND shapes = ? AND machine = ? AND pyhalide_version = ? "
                         "AND feature_version = ?")
            args += _key_args(key)
        if algorithm is not None:
            where.append("algorithm LIKE ?")
            args.append(algorithm + "%")
        if status is not None:
            where.append("status = ?")
            args.append(status)
        sql = f"SELECT id, {', '.join(_COLUMNS)} FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY (status = 'ok') DESC, time_s, id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_record(row) for row in self.conn.execute(sql, args)]

    def best(self, key: TuningKey) -> Record | None:
        """The record of the fastest schedule measured here for exactly this key, by the median
        of its measurements (the tuner re-times its best in every batch); a schedule that ever
        failed is never the best."""
        return _fastest([r for r in self.records(key) if r.origin == "local"])

    def get(self, record_id: int) -> Record | None:
        row = self.conn.execute(f"SELECT id, {', '.join(_COLUMNS)} FROM records WHERE id = ?",
                                (int(record_id),)).fetchone()
        return _record(row) if row else None

    def nearest(self, key: TuningKey, n: int = 4) -> list[Record]:
        """Good schedules of the same algorithm for other shapes (nearest first by the log of
        the output sizes), or from other machines or versions: starting points to measure, never
        applied as they are."""
        groups: dict = {}
        for row in self.conn.execute(f"SELECT id, {', '.join(_COLUMNS)} FROM records WHERE algorithm = ?",
                                     (key.algorithm,)):
            r = _record(row)
            if r.key != key:
                groups.setdefault(r.key, []).append(r)
        best = [b for rs in groups.values() for b in [_fastest(rs)] if b is not None]
        return sorted(best, key=lambda r: (_shape_distance(key.shapes, r.key.shapes), r.key.machine != key.machine,
                                           r.time_s))[:n]

    def summary(self) -> list[tuple]:
        """One row per key: (algorithm, shapes, machine, versions, measurements, of how many
        schedules, how many ok, the fastest single time)."""
        return self.conn.execute("""SELECT algorithm, shapes, machine, pyhalide_version, feature_version,
            COUNT(*), COUNT(DISTINCT schedule), SUM(status = 'ok'),
            MIN(CASE WHEN status = 'ok' THEN time_s END) FROM records
            GROUP BY algorithm, shapes, machine, pyhalide_version, feature_version
            ORDER BY algorithm, shapes""").fetchall()

    def integrity_check(self) -> str:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0]

    # ---- exchange
    def export(self, path: str | Path, algorithm: str | None = None) -> int:
        rs = self.records(algorithm=algorithm)
        with open(path, "w") as f:
            for r in rs:
                f.write(r.to_json() + "\n")
        return len(rs)

    def import_(self, path: str | Path) -> tuple[int, list[str]]:
        """Add the records of a JSON-lines file, each validated (fields, types, statuses, the
        schedule against its schema, the decisions parsed); they are stored as imported, so they
        are never applied without being measured here. Returns (added, reasons for refusals)."""
        good, refused = [], []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    good.append(parse_record(line, origin="imported"))
                except ValueError as e:
                    refused.append(f"line {n}: {e}")
        self.add(good)
        return len(good), refused


def _fastest(records: list[Record]) -> Record | None:
    """The first record of the schedule with the lowest median time (its time set to that
    median) among records of one key; schedules that ever failed are left out."""
    times: dict[str, list[float]] = {}
    first: dict[str, Record] = {}
    failed = set()
    for r in records:
        if r.status != "ok":
            failed.add(r.schedule)
            continue
        times.setdefault(r.schedule, []).append(r.time_s)
        first.setdefault(r.schedule, r)
    ranked = sorted((statistics.median(ts), first[s].id or 0, s) for s, ts in times.items() if s not in failed)
    if not ranked:
        return None
    median, _, schedule = ranked[0]
    rec = first[schedule]
    rec.time_s = median
    return rec


def _key_args(key: TuningKey) -> tuple:
    return key.algorithm, key.shapes, key.machine, key.pyhalide_version, int(key.feature_version)


def _shape_distance(a: str, b: str) -> float:
    try:
        oa, ob = json.loads(a)["outputs"], json.loads(b)["outputs"]
        return sum(abs(math.log(max(1, ea[1])) - math.log(max(1, eb[1])))
                   for xa, xb in zip(oa, ob) for ea, eb in zip(xa, xb)) + 100 * (len(oa) != len(ob))
    except (ValueError, KeyError, TypeError, IndexError):
        return math.inf


def _row(r: Record) -> tuple:
    k = r.key
    return (k.algorithm, k.shapes, k.machine, k.pyhalide_version, int(k.feature_version), r.schedule, r.status,
            r.time_s, json.dumps(r.decisions) if r.decisions is not None else None, r.predicted_s, r.error,
            r.run_id, int(r.trial), float(r.created), r.origin)


def _record(row) -> Record:
    (rid, algorithm, shapes, machine, version, fversion, schedule, status, time_s, decisions, predicted_s,
     error, run_id, trial, created, origin) = row
    return Record(TuningKey(algorithm, shapes, machine, version, fversion), schedule, status, time_s,
                  json.loads(decisions) if decisions else None, predicted_s, error, run_id, trial, created,
                  origin, rid)


_TEXT_FIELDS = ("algorithm", "shapes", "machine", "pyhalide_version")


def parse_record(text: str, origin: str = "imported") -> Record:
    """A Record from the JSON of Record.to_json, checked field by field (ValueError says what is
    wrong). Nothing in it is executed: the schedule is validated as data."""
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"not JSON ({type(e).__name__})") from None
    expected = {f.name for f in fields(Record)} - {"id"}
    if not isinstance(d, dict) or set(d) != expected:
        raise ValueError("a record must have exactly the fields " + ", ".join(sorted(expected)))
    k = d["key"]
    if not isinstance(k, dict) or set(k) != {f.name for f in fields(TuningKey)}:
        raise ValueError("a malformed key")
    for name in _TEXT_FIELDS:
        if not isinstance(k[name], str) or not 0 < len(k[name]) <= 100_000:
            raise ValueError(f"key field {name} must be a non-empty string")
    if not isinstance(k["feature_version"], int) or isinstance(k["feature_version"], bool):
        raise ValueError("feature_version must be an integer")
    try:
        json.loads(k["shapes"])
    except ValueError:
        raise ValueError("shapes must be JSON") from None
    if d["status"] not in STATUSES:
        raise ValueError(f"status {str(d['status'])[:20]!r} is not one of {', '.join(STATUSES)}")
    for name in ("time_s", "predicted_s"):
        v = d[name]
        if v is not None and (not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v < math.inf):
            raise ValueError(f"{name} must be a non-negative number or null")
    if d["status"] == "ok" and d["time_s"] is None:
        raise ValueError("an ok record needs its time")
    if not isinstance(d["trial"], int) or not isinstance(d["created"], int | float):
        raise ValueError("trial and created must be numbers")
    for name in ("run_id", "origin"):
        if not isinstance(d[name], str) or len(d[name]) > 200:
            raise ValueError(f"{name} must be a short string")
    if d["error"] is not None and (not isinstance(d["error"], str) or len(d["error"]) > 10_000):
        raise ValueError("error must be a string or null")
    try:
        validate_schedule_json(d["schedule"])
    except Exception as e:  # noqa: BLE001 - a CompileError naming what the schema refused
        raise ValueError(f"schedule refused: {e}") from None
    decisions = d["decisions"]
    if decisions is not None:
        if not isinstance(decisions, dict):
            raise ValueError("decisions must map Func names to decision text")
        for name, text in decisions.items():
            try:
                Decision.parse(text)
            except (ValueError, IndexError, AttributeError, TypeError):
                raise ValueError(f"decision of {str(name)[:40]} is not a decision") from None
    return Record(TuningKey(**k), d["schedule"], d["status"], d["time_s"], decisions, d["predicted_s"],
                  d["error"], d["run_id"], d["trial"], float(d["created"]), origin)
