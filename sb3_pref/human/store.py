"""
The durable record of human feedback: one SQLite file per run holding every query that was shown
(with the segments it was made of) and every answer, each committed the moment it is given.

Why SQLite: a committed transaction in WAL mode with ``synchronous=FULL`` survives a crash or a
``kill -9`` of the process (and a power cut), and the answers table is keyed by query id, so a
re-delivered answer (double click, retried request) can never be stored twice.

The analyses over the whole record (agreement, answers per person) are a base of :class:`LabelStore`
in :mod:`sb3_pref.human.agreement`; what can be answered, and the label of each answer, is in
:mod:`sb3_pref.human.choices` (``CHOICE_LABELS`` stays importable from here).
"""

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Optional, Union

import numpy as np

from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.segments import SegmentBatch
from sb3_pref.human.agreement import AgreementMixin
from sb3_pref.human.choices import CHOICE_LABELS
from sb3_pref.human.packing import pack_pair, unpack_pairs
from sb3_pref.human.schema import create_or_migrate


class UnknownQueryError(KeyError):
    """An answer names a query this store never issued."""


class AnswerConflictError(ValueError):
    """A query already has a different answer (the first answer stands)."""


def _same_person(first: Optional[str], second: Optional[str]) -> bool:
    # Without names the answers may be one person's: only two different names are two people.
    return not first or not second or first == second


def _id_chunks(ids: Sequence[int]) -> Iterator[tuple[list[int], str]]:
    """``ids`` in chunks of 500 with their ``?`` placeholders: SQLite limits the parameters of one statement."""
    for start in range(0, len(ids), 500):
        chunk = [int(query_id) for query_id in ids[start : start + 500]]
        yield chunk, ",".join("?" * len(chunk))


class LabelStore(AgreementMixin):
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
        with self._lock:
            create_or_migrate(self._db)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once: a check and its write cannot interleave with another process's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

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
        blob = pack_pair(seg_0, seg_1, index)
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

    def submit(self, query_id: int, choice: str, labeller: Optional[str] = None) -> dict[str, Any]:
        """
        Store an answer durably (committed before this returns); the first answer of a query is its label.

        :param query_id: a query issued by this store
        :param choice: ``left``, ``right``, ``equal`` or ``skip`` (can't tell)
        :param labeller: the name of the person answering (None: not given)
        :return: ``{"status", "choice", "labeller"}``, the last two of the standing answer. Status
            ``new``: stored as the label; ``repeat``: the same person gave it already; ``second_opinion``:
            another person (a different name) answered first, this answer is kept to measure agreement;
            ``conflict``: the same person (or no names) answered differently before, the first stands
        :raises UnknownQueryError: the query does not exist
        """
        if choice not in CHOICE_LABELS:
            raise ValueError(f"choice must be one of {sorted(CHOICE_LABELS)}, got {choice!r}")
        labeller = labeller or None
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM queries WHERE id = ?", (int(query_id),)).fetchone() is None:
                raise UnknownQueryError(query_id)
            cursor = db.execute(
                "INSERT OR IGNORE INTO answers (query_id, choice, answered, labeller) VALUES (?, ?, ?, ?)",
                (int(query_id), choice, time.time(), labeller),
            )
            if cursor.rowcount == 1:
                return {"status": "new", "choice": choice, "labeller": labeller}
            stored, by = db.execute("SELECT choice, labeller FROM answers WHERE query_id = ?", (int(query_id),)).fetchone()
            if not _same_person(by, labeller):
                db.execute(
                    "INSERT OR REPLACE INTO opinions (query_id, labeller, choice, answered) VALUES (?, ?, ?, ?)",
                    (int(query_id), labeller, choice, time.time()),
                )
                status = "second_opinion"
            else:
                status = "repeat" if stored == choice else "conflict"
        return {"status": status, "choice": stored, "labeller": by}

    def record_answer(self, query_id: int, choice: str, labeller: Optional[str] = None) -> bool:
        """
        :meth:`submit` for a caller that only needs to know whether the answer is new.

        :return: True if the answer is new, False if the same answer was already stored
        :raises UnknownQueryError: the query does not exist
        :raises AnswerConflictError: the query already has a different answer (or another person's)
        """
        result = self.submit(query_id, choice, labeller)
        if result["status"] in ("conflict", "second_opinion"):
            raise AnswerConflictError(f"query {query_id} was already answered {result['choice']!r}")
        return result["status"] == "new"

    def correct_answer(self, query_id: int, choice: str, labeller: Optional[str] = None) -> str:
        """
        Change an answer that the learner has not received yet (see :meth:`take_answers`).

        :return: ``corrected``, ``used`` (already handed to training: unchanged), ``not_yours``
            (another person's answer: unchanged) or ``unanswered``
        """
        if choice not in CHOICE_LABELS:
            raise ValueError(f"choice must be one of {sorted(CHOICE_LABELS)}, got {choice!r}")
        with self._transaction() as db:
            row = db.execute("SELECT labeller, used FROM answers WHERE query_id = ?", (int(query_id),)).fetchone()
            if row is None:
                return "unanswered"
            if row[1] is not None:
                return "used"
            if (row[0] or None) != (labeller or None):
                return "not_yours"
            db.execute("UPDATE answers SET choice = ?, corrected = ? WHERE query_id = ?", (choice, time.time(), int(query_id)))
        return "corrected"

    def take_answers(self, query_ids: Optional[Sequence[int]] = None) -> dict[int, str]:
        """
        Read answers for the learner and mark them used, in one transaction: from then on they can no
        longer be corrected, so what training learned from is what the store holds.

        :param query_ids: only these queries (those answered); None: every answer
        :return: ``{query_id: choice}``
        """
        with self._transaction() as db:
            rows = db.execute("SELECT query_id, choice FROM answers ORDER BY query_id").fetchall()
            answers = {int(query_id): choice for query_id, choice in rows}
            if query_ids is not None:
                answers = {int(q): answers[int(q)] for q in query_ids if int(q) in answers}
            ids = list(answers)
            for chunk, marks in _id_chunks(ids):
                db.execute(f"UPDATE answers SET used = ? WHERE used IS NULL AND query_id IN ({marks})", [time.time(), *chunk])
        return answers

    def last_answer_time(self, query_ids: Sequence[int]) -> Optional[float]:
        """:return: when the newest answer (or correction) to these queries was given (epoch seconds; None: no answer)"""
        latest: Optional[float] = None
        with self._lock:
            for chunk, marks in _id_chunks(query_ids):
                row = self._db.execute(
                    f"SELECT MAX(MAX(answered, COALESCE(corrected, 0))) FROM answers WHERE query_id IN ({marks})", chunk
                ).fetchone()
                if row[0] is not None:
                    latest = row[0] if latest is None else max(latest, row[0])
        return latest

    def answer_info(self, query_id: int) -> Optional[dict[str, Any]]:
        """:return: ``choice, labeller, used`` of a query's standing answer (None if unanswered)"""
        with self._lock:
            row = self._db.execute(
                "SELECT choice, labeller, used FROM answers WHERE query_id = ?", (int(query_id),)
            ).fetchone()
        return None if row is None else {"choice": row[0], "labeller": row[1], "used": row[2] is not None}

    def set_meta(self, key: str, value: Any) -> None:
        """Keep a JSON-able value about the run (instruction, final result...) in the run folder."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        """:return: the value :meth:`set_meta` stored under ``key``, or ``default``"""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def mark_shown(self, query_id: int, load_seconds: Optional[float] = None) -> bool:
        """
        Record when a query's clips first played on screen.

        :param load_seconds: how long the page waited for both clips to play (from putting them on screen)
        :return: False if the query does not exist
        """
        with self._lock:
            cursor = self._db.execute(
                "UPDATE queries SET shown = COALESCE(shown, ?), load_seconds = COALESCE(load_seconds, ?) WHERE id = ?",
                (time.time(), load_seconds, int(query_id)),
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
        :return: ``id, round, asked, created, shown, answered, choice, reference, load_seconds, labeller``
            of one query (None if unknown); the times are ``time.time()`` stamps: asked by the learner,
            clips ready, first playing on the page, answered; ``load_seconds`` is the page's wait for
            both clips to play
        """
        with self._lock:
            row = self._db.execute(
                "SELECT q.id, q.round, q.asked, q.created, q.shown, a.answered, a.choice, q.reference, q.load_seconds, "
                "a.labeller FROM queries q LEFT JOIN answers a ON a.query_id = q.id WHERE q.id = ?",
                (int(query_id),),
            ).fetchone()
        keys = ("id", "round", "asked", "created", "shown", "answered", "choice", "reference", "load_seconds", "labeller")
        return None if row is None else dict(zip(keys, row))

    def last_round(self) -> int:
        """:return: the highest query round stored (0 if none)"""
        with self._lock:
            return int(self._db.execute("SELECT COALESCE(MAX(round), 0) FROM queries").fetchone()[0])

    def queries_after_round(self, round_index: int) -> list[int]:
        """:return: the ids of the queries asked in rounds after ``round_index``, oldest first"""
        with self._lock:
            rows = self._db.execute("SELECT id FROM queries WHERE round > ? ORDER BY id", (int(round_index),)).fetchall()
        return [int(row[0]) for row in rows]

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
            for chunk, marks in _id_chunks(ids):
                blobs.update(self._db.execute(f"SELECT id, pair FROM queries WHERE id IN ({marks})", chunk).fetchall())
        missing = [query_id for query_id in ids if query_id not in blobs]
        if missing:
            raise UnknownQueryError(missing)
        return unpack_pairs([blobs[query_id] for query_id in ids])

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
