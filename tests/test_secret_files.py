"""Secrets given as files (`NAME_FILE`, as Compose's secrets arrive in /run/secrets): the
model server's key, the access token, the Brave key and PostgreSQL's password, read from the
file the variable names, never both a value and a file."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from app import config
from tests.chat_client import done, new_conversation, send
from tests.conftest import chat_env, run_main, service_for
from tests.fakes.llm_server import Reply

TOKEN = "token-from-a-compose-secret-0123456789abcdef"
LLM_KEY = "sk-from-a-compose-secret"


@pytest.fixture
def from_files(request, llm, searxng, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "llm-api-key").write_text(LLM_KEY + "\n")
    (secrets / "auth-token").write_text(TOKEN + "\n")
    llm.clear()
    env = chat_env(
        llm,
        tmp_path,
        LLM_API_KEY_FILE=str(secrets / "llm-api-key"),
        AUTH_TOKEN_FILE=str(secrets / "auth-token"),
    )
    with service_for(request, env, searxng.url) as service:
        yield service


def test_the_token_and_the_model_key_are_read_from_their_files(from_files, llm):
    assert from_files.http.get("/api/conversations").status_code == 401
    signed = {"Authorization": f"Bearer {TOKEN}"}
    from_files.http.headers.update(signed)
    assert from_files.http.get("/api/conversations").status_code == 200
    llm.script(Reply(text="Hello."))
    conversation_id = new_conversation(from_files)
    assert done(send(from_files, conversation_id, "hi"))["status"] == "complete"
    assert llm.requests[-1].headers["authorization"] == f"Bearer {LLM_KEY}"


def test_a_value_and_a_file_both_set_or_an_unreadable_file_are_refused(tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-one")
    both = run_main("search", "x", searxng_url="", LLM_API_KEY="sk-two", LLM_API_KEY_FILE=str(key))
    assert both.returncode == 1
    assert "both LLM_API_KEY and LLM_API_KEY_FILE are set" in both.stderr
    missing = run_main("search", "x", searxng_url="", AUTH_TOKEN_FILE=str(tmp_path / "none"))
    assert missing.returncode == 1
    assert "AUTH_TOKEN_FILE: cannot read it" in missing.stderr


def test_the_brave_key_and_the_postgresql_password_are_read_from_their_files(tmp_path):
    (tmp_path / "brave").write_text("BSA-key\n")
    password = "p@ss/wörd:1"
    (tmp_path / "password").write_text(password + "\n")
    settings = config.load(
        {
            "BRAVE_API_KEY_FILE": str(tmp_path / "brave"),
            "DATABASE_URL": "postgresql://chat@postgres:5432/chat",
            "PGPASSWORD_FILE": str(tmp_path / "password"),
        }
    )
    assert settings.brave_api_key == "BSA-key"
    # What libpq is given: the user, host and database as they were, the file's password.
    given = conninfo_to_dict(settings.database_url)
    assert (given["user"], given["host"], given["port"], given["dbname"]) == (
        "chat",
        "postgres",
        "5432",
        "chat",
    )
    assert given["password"] == password
