"""Storage: the conversations in SQLite (DATA_DIR/chat.db) or PostgreSQL (DATABASE_URL),
memory.md and the access token.

storage.py is what the service awaits (Storage, one thread running every query in order);
database.py is every query (Database), built from connection.py, leases.py, versions.py,
conversations.py, turns.py, picker.py and legacy.py; rows.py the data they read and write;
migrations.py the schema; dialect.py what differs between the two backends
(postgres.py PostgreSQL's side); files.py the plain files; errors.py what the store refuses;
export.py a conversation as Markdown. See docs/architecture.md.
"""
