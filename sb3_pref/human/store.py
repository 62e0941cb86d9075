"""
The durable record of human feedback: one SQLite file per run holding every query that was shown
(with the segments it was made of) and every answer, each committed the moment it is given.

Why SQLite: a committed transaction in WAL mode with ``synchronous=FULL`` survives a crash or a
``kill -9`` of the process (and a power cut), and the answers table is keyed by query id, so a
re-delivered answer (double click, retried request) can never be stored twice.
"""

import io
import math
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from sb3_pref.common.preferences import PreferenceDataset
from sb3_pref.common.segments import SegmentBatch

#: What a person can answer, and the label each answer becomes (1.0 = the right clip, ``seg_1``, preferred).
CHOICE_LABELS: dict[str, float] = {"left": 0.0, "right": 1.0, "equal": 0.5, "skip": math.nan}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    round INTEGER NOT NULL,
    asked REAL NOT NULL,
    created REAL NOT NULL,
    video_0 TEXT NOT NULL UNIQUE,
    video_1 TEXT NOT NULL UNIQUE,
    reference TEXT CHECK (reference IN ('left', 'right', 'equal', 'skip')),
    shown REAL,
    pair BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS answers (
    query_id INTEGER PRIMARY KEY REFERENCES queries(id),
    choice TEXT NOT NULL CHECK (choice IN ('left', 'right', 'equal', 'skip')),
    answered REAL NOT NULL
);
"""


class UnknownQueryError(KeyError):
    """An answer names a query this store never issued."""


class AnswerConflictError(ValueError):
    """A query already has a different answer (the first answer stands)."""


def label_to_choice(label: float) -> str:
    """:return: the answer a label stands for (``NaN`` is ``"skip"``)"""
    if math.isnan(label):
        return "skip"
    for choice, value in CHOICE_LABELS.items():
        if value == label:
            return choice
    raise ValueError(f"label {label} is not one of 0.0 (left), 1.0 (right), 0.5 (equal) or NaN (skip)")


def _pack_pair(seg_0: SegmentBatch, seg_1: SegmentBatch, index: int) -> bytes:
    """Pair ``index`` of two batches as ``.npz`` bytes (numpy arrays only: loading never unpickles)."""
    arrays: dict[str, np.ndarray] = {}
    for side, segments in enumerate((seg_0, seg_1)):
        arrays[f"obs_{side}"] = segments.obs[index]
        arrays[f"actions_{side}"] = segments.actions[index]
        arrays[f"rewards_{side}"] = segments.rewards[index]
        arrays[f"env_index_{side}"] = np.asarray(segments.env_index[index])
        arrays[f"start_{side}"] = np.asarray(segments.start[index])
        for name, values in segments.extras.items():
            arrays[f"extra_{side}_{name}"] = values[index]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle only
    return buffer.getvalue()


def _unpack_pairs(blobs: Sequence[bytes]) -> tuple[SegmentBatch, SegmentBatch]:
    """Inverse of :func:`_pack_pair` for several pairs, stacked into two batches."""
    pairs = []
    for blob in blobs:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            pairs.append({name: archive[name] for name in archive.files})
    batches = []
    for side in (0, 1):
        prefix = f"extra_{side}_"
        extra_names = [name[len(prefix) :] for name in pairs[0] if name.startswith(prefix)]
        batches.append(
            SegmentBatch(
                obs=np.stack([pair[f"obs_{side}"] for pair in pairs]),
                actions=np.stack([pair[f"actions_{side}"] for pair in pairs]),
                rewards=np.stack([pair[f"rewards_{side}"] for pair in pairs]),
                env_index=np.array([pair[f"env_index_{side}"] for pair in pairs], dtype=np.int64),
                start=np.array([pair[f"start_{side}"] for pair in pairs], dtype=np.int64),
                extras={name: np.stack([pair[prefix + name] for pair in pairs]) for name in extra_names},
            )
        )
    return batches[0], batches[1]


class LabelStore:
    """
    Queries and answers of one run, in one SQLite file. Safe to share between threads (one
    connection behind a lock); several processes may read it, one should write queries.

    :param path: the database file (created with its folder if missing)
    """

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: every statement commits on its own, so an answer is on disk when record_answer returns.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "LabelStore":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    # ---------------------------------------------------------------- writing
    def add_query(
        self,
        seg_0: SegmentBatch,
        seg_1: SegmentBatch,
        index: int,
        videos: tuple[str, str],
        round_index: int,
        reference: Optional[str] = None,
        asked: Optional[float] = None,
    ) -> int:
        """
        Register pair ``index`` of two segment batches as a query shown with two video files.

        :param videos: file names (inside the run's media folder) of the left (``seg_0``) and right clip
        :param round_index: the query round that asked it
        :param reference: another teacher's answer to the same pair (kept to report agreement), or None
        :param asked: when the learner asked for this pair (``time.time()``); None means now
        :return: the new query id, never reused within this file
        """
        if reference is not None and reference not in CHOICE_LABELS:
            raise ValueError(f"reference must be one of {sorted(CHOICE_LABELS)} or None, got {reference!r}")
        blob = _pack_pair(seg_0, seg_1, index)
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO queries (round, asked, created, video_0, video_1, reference, pair) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    int(round_index),
                    time.time() if asked is None else asked,
                    time.time(),
                    videos[0],
                    videos[1],
                    reference,
                    blob,
                ),
            )
            return int(cursor.lastrowid)  # type: ignore[arg-type]  # set after an INSERT

    def record_answer(self, query_id: int, choice: str) -> bool:
        """
        Store an answer durably (committed before this returns).

        :param query_id: a query issued by this store
        :param choice: ``left``, ``right``, ``equal`` or ``skip`` (can't tell)
        :return: True if the answer is new, False if the same answer was already stored
        :raises UnknownQueryError: the query does not exist
        :raises AnswerConflictError: the query already has a different answer
        """
        if choice not in CHOICE_LABELS:
            raise ValueError(f"choice must be one of {sorted(CHOICE_LABELS)}, got {choice!r}")
        with self._lock:
            if self._db.execute("SELECT 1 FROM queries WHERE id = ?", (int(query_id),)).fetchone() is None:
                raise UnknownQueryError(query_id)
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO answers (query_id, choice, answered) VALUES (?, ?, ?)",
                (int(query_id), choice, time.time()),
            )
            if cursor.rowcount == 1:
                return True
            (stored,) = self._db.execute("SELECT choice FROM answers WHERE query_id = ?", (int(query_id),)).fetchone()
        if stored != choice:
            raise AnswerConflictError(f"query {query_id} was already answered {stored!r}")
        return False

    def mark_shown(self, query_id: int) -> bool:
        """Record when a query's clips first played on screen. :return: False if the query does not exist"""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE queries SET shown = COALESCE(shown, ?) WHERE id = ?", (time.time(), int(query_id))
            )
            return cursor.rowcount == 1

    # ---------------------------------------------------------------- reading
    def pending(self, limit: int = 2) -> list[dict[str, Any]]:
        """:return: the oldest unanswered queries: ``id, round, created, video_0, video_1``"""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, round, created, video_0, video_1 FROM queries WHERE id NOT IN (SELECT query_id FROM answers) "
                "ORDER BY id LIMIT ?",
                (int(limit),),
            ).fetchall()
        return [dict(zip(("id", "round", "created", "video_0", "video_1"), row)) for row in rows]

    def answers(self, query_ids: Optional[Sequence[int]] = None) -> dict[int, str]:
        """:return: ``{query_id: choice}`` of every answer (or of those among ``query_ids``)"""
        with self._lock:
            rows = self._db.execute("SELECT query_id, choice FROM answers ORDER BY query_id").fetchall()
        answers = {int(query_id): choice for query_id, choice in rows}
        if query_ids is None:
            return answers
        return {int(query_id): answers[int(query_id)] for query_id in query_ids if int(query_id) in answers}

    def counts(self) -> dict[str, int]:
        """:return: ``queries, answered, pending, skipped`` over the whole file"""
        with self._lock:
            n_queries = self._db.execute("SELECT COUNT(*) FROM queries").fetchone()[0]
            n_answered, n_skipped = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(choice = 'skip'), 0) FROM answers"
            ).fetchone()
        return {"queries": n_queries, "answered": n_answered, "pending": n_queries - n_answered, "skipped": n_skipped}

    def query_info(self, query_id: int) -> Optional[dict[str, Any]]:
        """
        :return: ``id, round, asked, created, shown, answered, choice, reference`` of one query (None if
            unknown); the times are ``time.time()`` stamps: asked by the learner, clips ready, first
            playing on the page, answered
        """
        with self._lock:
            row = self._db.execute(
                "SELECT q.id, q.round, q.asked, q.created, q.shown, a.answered, a.choice, q.reference "
                "FROM queries q LEFT JOIN answers a ON a.query_id = q.id WHERE q.id = ?",
                (int(query_id),),
            ).fetchone()
        keys = ("id", "round", "asked", "created", "shown", "answered", "choice", "reference")
        return None if row is None else dict(zip(keys, row))

    def is_media(self, name: str) -> bool:
        """:return: True if ``name`` is the video file of a query of this store"""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM queries WHERE video_0 = ? OR video_1 = ? LIMIT 1", (name, name)).fetchone()
        return row is not None

    def load_pairs(self, query_ids: Sequence[int]) -> tuple[SegmentBatch, SegmentBatch]:
        """:return: the two segment batches of these queries, in the order given"""
        if len(query_ids) == 0:
            raise ValueError("query_ids is empty")
        ids = [int(query_id) for query_id in query_ids]
        blobs: dict[int, bytes] = {}
        with self._lock:
            # In chunks: SQLite limits the number of parameters of one statement.
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows = self._db.execute(f"SELECT id, pair FROM queries WHERE id IN ({','.join('?' * len(chunk))})", chunk)
                blobs.update(rows.fetchall())
        missing = [query_id for query_id in ids if query_id not in blobs]
        if missing:
            raise UnknownQueryError(missing)
        return _unpack_pairs([blobs[query_id] for query_id in ids])

    def agreement(self) -> dict[str, float]:
        """
        How often the person's answer matches the reference (scripted) answer of the same pair, over
        pairs where neither skipped.

        :return: ``{"n": pairs compared, "agree": matching answers, "rate": agree / n (NaN if n == 0)}``
        """
        with self._lock:
            n, agree = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(a.choice = q.reference), 0) FROM answers a JOIN queries q ON q.id = a.query_id "
                "WHERE q.reference IS NOT NULL AND q.reference != 'skip' AND a.choice != 'skip'"
            ).fetchone()
        return {"n": float(n), "agree": float(agree), "rate": agree / n if n else math.nan}

    def to_dataset(self, capacity: Optional[int] = None) -> PreferenceDataset:
        """
        Every answered pair as a :class:`PreferenceDataset` (skipped answers left out), oldest first,
        for offline reward learning or ``.save(path)`` to ``.npz``.

        :param capacity: capacity of the dataset; by default the number of answers
        """
        answers = {query_id: choice for query_id, choice in self.answers().items() if choice != "skip"}
        dataset = PreferenceDataset(capacity=capacity or max(1, len(answers)))
        if answers:
            seg_0, seg_1 = self.load_pairs(list(answers))
            dataset.add(seg_0, seg_1, np.array([CHOICE_LABELS[choice] for choice in answers.values()]))
        return dataset

    def export_npz(self, path: Union[str, os.PathLike]) -> int:
        """
        Write every answered pair to a ``.npz`` preference dataset (``PreferenceDataset.load`` reads it).

        :return: the number of labelled pairs written
        """
        dataset = self.to_dataset()
        dataset.save(path)
        return len(dataset)
