"""The schema: the migrations that build it step by step, each said for SQLite and for
PostgreSQL where they differ (the schema version says where a database stands), and fold(),
which the search indexes apply (docs/architecture.md, "Two backends")."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import overload

# Letters with no decomposition, which unicode61's remove_diacritics leaves as they are.
FOLDED = str.maketrans(
    dict(zip("łŁøØđĐðÐħĦıŀĿ", "lLoOdDdDhHilL", strict=True))
    | {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "þ": "th", "Þ": "TH"}
)


@overload
def fold(text: str) -> str: ...
@overload
def fold(text: None) -> None: ...
def fold(text: str | None) -> str | None:
    """Text as the search index holds it; SQL's fold() in the index's triggers."""
    return text.translate(FOLDED) if text is not None else None


def folded_sql(text: str) -> str:
    """PostgreSQL's fold(unaccent(lower(text))), built from FOLDED: what search_text() (its
    indexes' function) does before splitting text into words."""
    singles = {chr(k): v for k, v in FOLDED.items() if len(v) == 1}
    expression = (
        f"translate(public.unaccent('public.unaccent'::regdictionary, lower({text})), "
        f"'{''.join(singles)}', '{''.join(singles.values())}')"
    )
    for letter, letters in FOLDED.items():
        if len(letters) > 1:
            expression = f"replace({expression}, '{chr(letter)}', '{letters}')"
    return expression


INDEXED_CHARS = 500_000
"""PostgreSQL indexes a message's first this many characters (a tsvector is at most 1 MB)."""
FOLDED_SQL = folded_sql(f"left($1, {INDEXED_CHARS})")


@dataclass(frozen=True)
class MigrationStep:
    """One migration: SQLite's script (statements split by `split_script`), PostgreSQL's
    (sent whole)."""

    sqlite: str
    postgresql: str


def both(script: str) -> MigrationStep:
    """A step written the same for both."""
    return MigrationStep(script, script)


# Each migration takes the schema from its index to the next; the schema version says
# where a database stands. Append, never edit: a database out there is at some step.
MIGRATIONS = [
    MigrationStep(
        sqlite="""
    CREATE TABLE conversations (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        title_from_message INTEGER NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        updated TEXT NOT NULL,
        settings TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        summarized INTEGER NOT NULL DEFAULT 0,
        totals TEXT,
        usage TEXT,
        budget TEXT
    );
    CREATE INDEX conversations_updated ON conversations (updated);
    CREATE TABLE messages (
        rowid INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        details TEXT NOT NULL,
        UNIQUE (conversation, position)
    );
    CREATE TABLE models (position INTEGER PRIMARY KEY, id TEXT NOT NULL);
    CREATE TABLE leases (
        conversation TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires REAL NOT NULL
    );
    CREATE VIRTUAL TABLE message_words USING fts5 (
        content, content='messages', content_rowid='rowid',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE title_words USING fts5 (
        title, content='conversations', content_rowid='rowid',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, old.content);
    END;
    CREATE TRIGGER messages_changed AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, old.content);
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TRIGGER conversations_added AFTER INSERT ON conversations BEGIN
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, new.title);
    END;
    CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title) VALUES ('delete', old.rowid, old.title);
    END;
    CREATE TRIGGER conversations_renamed AFTER UPDATE OF title ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title) VALUES ('delete', old.rowid, old.title);
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, new.title);
    END;
    """,
        postgresql=f"""
    CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;
    CREATE FUNCTION search_text(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT regexp_replace({FOLDED_SQL}, '[^[:alnum:]]+', ' ', 'g') $$;
    CREATE FUNCTION json_valid(text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN PERFORM $1::json; RETURN true; EXCEPTION WHEN others THEN RETURN false; END $$;
    CREATE FUNCTION json_extract(text, text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN json_valid($1) THEN $1::jsonb #>> string_to_array(substr($2, 3), '.') END $$;
    CREATE TABLE schema_version (version integer NOT NULL);
    INSERT INTO schema_version VALUES (0);
    CREATE TABLE conversations (
        rowid bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        title text NOT NULL,
        title_from_message integer NOT NULL DEFAULT 0,
        created text NOT NULL,
        updated text NOT NULL,
        settings text NOT NULL,
        summary text NOT NULL DEFAULT '',
        summarized integer NOT NULL DEFAULT 0,
        totals text,
        usage text,
        budget text
    );
    CREATE INDEX conversations_updated ON conversations (updated);
    CREATE TABLE messages (
        rowid bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        conversation bigint NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position integer NOT NULL,
        role text NOT NULL,
        content text NOT NULL,
        details text NOT NULL,
        UNIQUE (conversation, position)
    );
    CREATE TABLE models (position integer PRIMARY KEY, id text NOT NULL);
    CREATE TABLE leases (
        conversation text PRIMARY KEY,
        owner text NOT NULL,
        expires double precision NOT NULL
    );
    CREATE INDEX message_words ON messages
        USING gin (to_tsvector('simple', search_text(content)));
    CREATE INDEX title_words ON conversations
        USING gin (to_tsvector('simple', search_text(title)));
    """,
    ),
    both(
        """
    CREATE TABLE tool_refusals (
        model TEXT PRIMARY KEY,
        at TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    """
    ),
    # Search folds the letters unicode61 keeps (ł, ø, đ, ß...): "lodz" finds "Łódź".
    MigrationStep(
        sqlite="""
    DROP TRIGGER messages_added;
    DROP TRIGGER messages_removed;
    DROP TRIGGER messages_changed;
    DROP TRIGGER conversations_added;
    DROP TRIGGER conversations_removed;
    DROP TRIGGER conversations_renamed;
    CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, fold(new.content));
    END;
    CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, fold(old.content));
    END;
    CREATE TRIGGER messages_changed AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO message_words (message_words, rowid, content)
        VALUES ('delete', old.rowid, fold(old.content));
        INSERT INTO message_words (rowid, content) VALUES (new.rowid, fold(new.content));
    END;
    CREATE TRIGGER conversations_added AFTER INSERT ON conversations BEGIN
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, fold(new.title));
    END;
    CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title)
        VALUES ('delete', old.rowid, fold(old.title));
    END;
    CREATE TRIGGER conversations_renamed AFTER UPDATE OF title ON conversations BEGIN
        INSERT INTO title_words (title_words, rowid, title)
        VALUES ('delete', old.rowid, fold(old.title));
        INSERT INTO title_words (rowid, title) VALUES (new.rowid, fold(new.title));
    END;
    INSERT INTO message_words (message_words) VALUES ('delete-all');
    INSERT INTO message_words (rowid, content) SELECT rowid, fold(content) FROM messages;
    INSERT INTO title_words (title_words) VALUES ('delete-all');
    INSERT INTO title_words (rowid, title) SELECT rowid, fold(title) FROM conversations;
    """,
        postgresql="""
    SELECT 1;  -- the indexes were folded from the start (search_text)
    """,
    ),
    # An answer's digest of its sources in a column: every turn reads the recent ones, and
    # picking them out of the details' JSON cost more than the rest of the load.
    MigrationStep(
        sqlite="""
    ALTER TABLE messages ADD COLUMN digest TEXT;
    UPDATE messages
    SET digest = json_extract(details, '$.digest'), details = json_remove(details, '$.digest')
    WHERE json_valid(details) AND json_type(details, '$.digest') = 'text';
    """,
        postgresql="""
    ALTER TABLE messages ADD COLUMN digest text;  -- no JSON had one to move
    """,
    ),
    # Answer versions: a turn's tail (its user message and what follows) set aside when a
    # regenerate or an edit replaced it, as JSON (a TailSnapshot). `slot` is its place
    # among the turn's versions; the shown version's slot is the one no row holds.
    MigrationStep(
        sqlite="""
    CREATE TABLE turn_versions (
        rowid INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        tail TEXT NOT NULL,
        UNIQUE (conversation, position, slot)
    );
    """,
        postgresql="""
    CREATE TABLE turn_versions (
        rowid bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        conversation bigint NOT NULL REFERENCES conversations (rowid) ON DELETE CASCADE,
        position integer NOT NULL,
        slot integer NOT NULL,
        tail text NOT NULL,
        UNIQUE (conversation, position, slot)
    );
    """,
    ),
    # The searches sent towards the Brave plan, per UTC day (app/store/searches.py).
    both(
        """
    CREATE TABLE search_queries (
        day TEXT PRIMARY KEY,
        queries INTEGER NOT NULL
    );
    """
    ),
    # The search cache (app/store/search_cache.py): a search's response by its key, so a
    # Regenerate or the same question again spends no query; `used` orders them from the
    # least recently used.
    MigrationStep(
        sqlite="""
    CREATE TABLE search_cache (
        key TEXT PRIMARY KEY,
        response TEXT NOT NULL,
        stored_at REAL NOT NULL,
        used INTEGER NOT NULL
    );
    CREATE INDEX search_cache_used ON search_cache (used);
    """,
        postgresql="""
    CREATE TABLE search_cache (
        key text PRIMARY KEY,
        response text NOT NULL,
        stored_at double precision NOT NULL,
        used integer NOT NULL
    );
    CREATE INDEX search_cache_used ON search_cache (used);
    """,
    ),
    # The search plan's turn, shared by every replica of the database (app/store/
    # search_pace.py): who holds it and until when, when the next search may start, by the
    # database's clock; and the replicas waiting for it, first come first served.
    MigrationStep(
        sqlite="""
    CREATE TABLE search_turn (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        owner TEXT,
        expires REAL NOT NULL,
        next_at REAL NOT NULL
    );
    INSERT INTO search_turn (id, owner, expires, next_at) VALUES (1, NULL, 0, 0);
    CREATE TABLE search_waiters (
        owner TEXT PRIMARY KEY,
        asked REAL NOT NULL,
        expires REAL NOT NULL
    );
    """,
        postgresql="""
    CREATE TABLE search_turn (
        id integer PRIMARY KEY CHECK (id = 1),
        owner text,
        expires double precision NOT NULL,
        next_at double precision NOT NULL
    );
    INSERT INTO search_turn (id, owner, expires, next_at) VALUES (1, NULL, 0, 0);
    CREATE TABLE search_waiters (
        owner text PRIMARY KEY,
        asked double precision NOT NULL,
        expires double precision NOT NULL
    );
    """,
    ),
    # The page's sign-in sessions (sessions.py): a digest of each cookie and its expiry.
    MigrationStep(
        sqlite="""
    CREATE TABLE sessions (key TEXT PRIMARY KEY, expires REAL NOT NULL);
    """,
        postgresql="""
    CREATE TABLE sessions (key text PRIMARY KEY, expires double precision NOT NULL);
    """,
    ),
    # Turns detached from the page's connection (app/store/turn_events.py): a running or
    # ended turn per conversation (its owner, a Stop asked from any replica, when it ended)
    # and its events kept for a reattaching client, each row the ids (first, last].
    MigrationStep(
        sqlite="""
    CREATE TABLE turn_runs (
        conversation TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        stop INTEGER NOT NULL DEFAULT 0,
        ended REAL
    );
    CREATE TABLE turn_events (
        conversation TEXT NOT NULL,
        first INTEGER NOT NULL,
        last INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (conversation, first)
    );
    """,
        postgresql="""
    CREATE TABLE turn_runs (
        conversation text PRIMARY KEY,
        owner text NOT NULL,
        stop integer NOT NULL DEFAULT 0,
        ended double precision
    );
    CREATE TABLE turn_events (
        conversation text NOT NULL,
        first bigint NOT NULL,
        last bigint NOT NULL,
        event text NOT NULL,
        PRIMARY KEY (conversation, first)
    );
    """,
    ),
    # A research turn's plan waiting for Start (app/api/research_turn.py), which may come
    # through any replica: whether the turn's plan waits, and the sub-questions a Start gave.
    MigrationStep(
        sqlite="""
    ALTER TABLE turn_runs ADD COLUMN plan_waits INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE turn_runs ADD COLUMN plan TEXT;
    """,
        postgresql="""
    ALTER TABLE turn_runs ADD COLUMN plan_waits integer NOT NULL DEFAULT 0;
    ALTER TABLE turn_runs ADD COLUMN plan text;
    """,
    ),
    # The household (app/store/users.py): one row a person, by a unique name; the password
    # only as its Argon2id hash, and none for a person who signs in through a proxy.
    MigrationStep(
        sqlite="""
    CREATE TABLE users (
        rowid INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        display_name TEXT,
        email TEXT,
        admin INTEGER NOT NULL DEFAULT 0,
        disabled INTEGER NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        password TEXT
    );
    """,
        postgresql="""
    CREATE TABLE users (
        rowid bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name text NOT NULL UNIQUE,
        display_name text,
        email text,
        admin integer NOT NULL DEFAULT 0,
        disabled integer NOT NULL DEFAULT 0,
        created text NOT NULL,
        password text
    );
    """,
    ),
    # Household mode (docs/household.md): a conversation's owner and a session's person
    # (users.rowid); NULL for the single-user modes' conversations and token sessions.
    both(
        """
    ALTER TABLE conversations ADD COLUMN owner INTEGER;
    CREATE INDEX conversations_owner ON conversations (owner);
    ALTER TABLE sessions ADD COLUMN person INTEGER;
    """
    ),
    # Personal API tokens (sessions.py): a SHA-256 digest of each, never the token, whose
    # it is (users.rowid), the label its person gave it, and when it was made and last used.
    both(
        """
    CREATE TABLE api_tokens (
        key TEXT PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        person INTEGER NOT NULL,
        label TEXT NOT NULL,
        created TEXT NOT NULL,
        last_used TEXT
    );
    CREATE INDEX api_tokens_person ON api_tokens (person);
    """
    ),
    # Each person's share of the Brave plan (app/store/search_shares.py): their own limits
    # (NULL: the settings' default; -1: no limit) and the queries they spent each UTC day
    # (one row a person and day, its id both: the transfer copies tables by one key column).
    both(
        """
    CREATE TABLE search_limits (
        person INTEGER PRIMARY KEY,
        daily INTEGER,
        monthly INTEGER
    );
    CREATE TABLE search_spent (
        id TEXT PRIMARY KEY,
        person INTEGER NOT NULL,
        day TEXT NOT NULL,
        queries INTEGER NOT NULL
    );
    CREATE INDEX search_spent_person ON search_spent (person, day);
    """
    ),
    # The models each person added to the picker (app/store/picker.py), in their order:
    # NULL for the single-user modes' list, which the first admin adopts. Its id, person
    # and position both, is the one key column the transfer copies tables by.
    both(
        """
    CREATE TABLE added_models (
        id TEXT PRIMARY KEY,
        person INTEGER,
        position INTEGER NOT NULL,
        model TEXT NOT NULL
    );
    INSERT INTO added_models (id, person, position, model)
        SELECT 'single:' || position, NULL, position, id FROM models;
    DROP TABLE models;
    CREATE INDEX added_models_person ON added_models (person, position);
    """
    ),
    # When each session was last used (sessions.py), as a token's is: a person tells the
    # browser they use from one left signed in somewhere.
    both(
        """
    ALTER TABLE sessions ADD COLUMN last_used TEXT;
    """
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)


def split_script(script: str) -> list[str]:
    """Statements of a migration, triggers kept whole (their bodies hold semicolons)."""
    statements: list[str] = []
    current = ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
