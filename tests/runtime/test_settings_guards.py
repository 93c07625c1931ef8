"""Settings that reach SQL or a log are checked or redacted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agents.activities.sql import PostgresDatabase
from durable_agents.runtime.settings import Settings


@pytest.mark.parametrize("schema", ['x"; DROP TABLE effects; --', "1abc", "a b", "a-b", "x" * 64])
def test_a_database_schema_must_be_an_identifier(schema):
    with pytest.raises(ValidationError, match="database_schema"):
        Settings(database_schema=schema)


def test_a_plain_schema_name_is_taken():
    assert Settings(database_schema="agents_prod").database_schema == "agents_prod"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://agent:s3cret-pw@db.internal:5432/agents",
        "postgresql://db.internal:5432/agents?user=agent&password=s3cret-pw",
        "postgresql://agent:s3cret@pw@db.internal:5432/agents",
    ],
)
def test_the_database_url_is_shown_without_its_user_or_password(url):
    db = PostgresDatabase(url)
    assert db.where == "postgresql://db.internal:5432/agents"
    assert "s3cret" not in db.where and "user=" not in db.where and "agent:" not in db.where


def test_an_api_key_is_never_sent_without_tls(monkeypatch, tmp_path):
    """Plaintext would hand the key to anyone on the path: refused in one line, before any
    connection; with TLS on (or left to follow the key) it is taken."""
    from durable_agents.runtime.connection import ConnectionSettingsError, connection

    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))
    keyed = Settings(temporal_api_key="key-0123456789", temporal_tls=False)
    with pytest.raises(ConnectionSettingsError) as refused:
        connection(keyed)
    assert str(refused.value) == (
        "a Temporal API key is never sent without TLS: turn TLS on, or drop the key"
    )
    assert connection(Settings(temporal_api_key="key-0123456789")).tls is True
    assert connection(Settings(temporal_tls=False)).tls is False  # no key: plaintext is fine
