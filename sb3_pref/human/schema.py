"""
The tables of a run's ``labels.sqlite`` and their migration: version 2 (several people, corrections,
page state) adds columns to the version-1 tables by ALTER TABLE and two new tables, so a run folder
written before keeps every query and answer and opens as it was.
"""

import sqlite3

SCHEMA = """
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
SCHEMA_VERSION = 2
ADDED_COLUMNS = {
    "answers": {"labeller": "TEXT", "used": "REAL", "corrected": "REAL"},
    "queries": {"load_seconds": "REAL"},
}
SCHEMA_2 = """
CREATE TABLE IF NOT EXISTS opinions (
    query_id INTEGER NOT NULL REFERENCES queries(id),
    labeller TEXT NOT NULL,
    choice TEXT NOT NULL CHECK (choice IN ('left', 'right', 'equal', 'skip')),
    answered REAL NOT NULL,
    PRIMARY KEY (query_id, labeller)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def create_or_migrate(db: sqlite3.Connection) -> None:
    """Create the tables of a new file, or bring an older file to the current version (idempotent)."""
    db.executescript(SCHEMA)
    for table, columns in ADDED_COLUMNS.items():
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns.items():
            if name not in present:
                try:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as error:  # another process (serve, training) added it first
                    if "duplicate column" not in str(error):
                        raise
    db.executescript(SCHEMA_2)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
