"""Settings: the offline model when nothing is configured, the configured endpoint otherwise."""

from __future__ import annotations

from durable_agents.runtime.settings import OFFLINE_MODEL_NAME, Settings


def test_offline_model_when_nothing_is_configured(monkeypatch):
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT_MODEL"):
        monkeypatch.delenv(key, raising=False)
    settings = Settings(offline_model_port=9999)
    assert settings.uses_offline_model
    assert settings.model_base_url == "http://127.0.0.1:9999/v1"
    assert settings.effective_model_name == OFFLINE_MODEL_NAME


def test_configured_endpoint_is_used(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AGENT_MODEL", "llama3")
    settings = Settings()
    assert not settings.uses_offline_model
    assert settings.model_base_url == "http://localhost:11434/v1"
    assert settings.model_api_key == "sk-test"
    assert "sk-test" not in repr(settings)  # a secret never shows in logs
    assert settings.effective_model_name == "llama3"
