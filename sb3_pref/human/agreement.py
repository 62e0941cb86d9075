"""
How far a run's answers agree, and who gave them: a person's answers against the reference answers
of a scripted teacher, people against each other (with the pairs shown to a person for a second
opinion, which measure it), and the answers per person.

Separate from :mod:`sb3_pref.human.store` because these are read-only analyses over the whole record,
while the store's own code is the bookkeeping of queries and answers (issuing, committing, correcting,
handing them to the learner). :class:`AgreementMixin` is a base of ``LabelStore`` only: its queries use
the store's connection and lock, declared below for type checkers.
"""

import math
import sqlite3
import threading
from typing import Any, Optional


class AgreementMixin:
    """The agreement and labeller queries of :class:`~sb3_pref.human.store.LabelStore`."""

    # For type checkers: LabelStore.__init__ sets these.
    _db: sqlite3.Connection
    _lock: threading.RLock

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

    def people_agreement(self) -> dict[str, float]:
        """
        How often a second person's answer to a pair matches the first person's (the standing label),
        over pairs where neither skipped: the agreement between people labelling one run.

        :return: ``{"n", "agree", "rate" (NaN if n == 0), "people": distinct names that answered}``
        """
        with self._lock:
            n, agree = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(o.choice = a.choice), 0) FROM opinions o JOIN answers a "
                "ON a.query_id = o.query_id WHERE o.choice != 'skip' AND a.choice != 'skip'"
            ).fetchone()
            (people,) = self._db.execute(
                "SELECT COUNT(*) FROM (SELECT labeller FROM answers WHERE labeller IS NOT NULL "
                "UNION SELECT labeller FROM opinions)"
            ).fetchone()
        return {"n": float(n), "agree": float(agree), "rate": agree / n if n else math.nan, "people": float(people)}

    def check_pairs(self, labeller: str, limit: int = 1, query_id: Optional[int] = None) -> list[dict[str, Any]]:
        """
        Pairs another named person answered that ``labeller`` has not judged: shown to ``labeller`` for a
        second opinion (agreement between people) when no pending pair is free. Newest answers first.

        :param query_id: only this query (to check that it still needs ``labeller``'s opinion)
        :return: rows ``id, round, created, video_0, video_1, labeller`` (the first answer's name)
        """
        extra, params = (
            ("AND q.id = ?", [labeller, labeller, int(query_id)]) if query_id is not None else ("", [labeller, labeller])
        )
        with self._lock:
            rows = self._db.execute(
                "SELECT q.id, q.round, q.created, q.video_0, q.video_1, a.labeller FROM queries q JOIN answers a "
                "ON a.query_id = q.id WHERE a.labeller IS NOT NULL AND a.labeller != ? AND a.choice != 'skip' AND NOT EXISTS "
                f"(SELECT 1 FROM opinions o WHERE o.query_id = q.id AND o.labeller = ?) {extra} "
                "ORDER BY a.answered DESC LIMIT ?",
                [*params, int(limit)],
            ).fetchall()
        return [dict(zip(("id", "round", "created", "video_0", "video_1", "labeller"), row)) for row in rows]

    def labellers(self) -> dict[str, int]:
        """:return: ``{name: standing answers given}`` (unnamed answers under ``""``)"""
        with self._lock:
            rows = self._db.execute("SELECT COALESCE(labeller, ''), COUNT(*) FROM answers GROUP BY 1").fetchall()
        return {name: int(count) for name, count in rows}
