"""One typed settings model, read from the environment; no other module reads os.environ."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

OFFLINE_MODEL_NAME = "scripted-offline-model"
# The bundled examples: what a worker serves when AGENT_MODULES is not set.
DEFAULT_AGENT_MODULES = ",".join(
    f"durable_agents.examples.{name}"
    for name in (
        "invoice",
        "refund",
        "question",
        "large_result",
        "triage",
        "before_agents",
        "support_chat",
    )
)


class SubjectKeySetting(BaseModel):
    """One entry of AGENT_SUBJECT_KEYS, as the worker hands it to its runs (there checked
    as workflows.contracts.SubjectKey)."""

    model_config = ConfigDict(extra="forbid")

    public_key: str = Field(min_length=40, max_length=60)
    namespaces: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=1000
    )

    @field_validator("public_key")
    @classmethod
    def _raw_ed25519(cls, value: str) -> str:
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError("not base64") from None
        if len(raw) != 32:
            raise ValueError("not a raw Ed25519 public key (32 bytes, base64)")
        return value


class Settings(BaseSettings):
    """Where the stack lives and how to reach it. Env prefix AGENT_, plus the OPENAI_* trio."""

    # populate_by_name: `Settings(openai_base_url=...)` in code and tests, on every
    # pydantic-settings release we support (older ones read an aliased field by alias only).
    model_config = SettingsConfigDict(env_prefix="AGENT_", extra="ignore", populate_by_name=True)

    data_dir: Path = Path(".data")
    temporal_host: str = "127.0.0.1"
    temporal_port: int = Field(default=7233, ge=1, le=65535)
    temporal_ui_port: int = Field(default=8233, ge=1, le=65535)
    namespace: str = "default"
    # Reaching a real cluster or Temporal Cloud (runtime/connection.py): Temporal's own
    # TEMPORAL_* variables and profile file are read too; these win where they are set.
    temporal_profile: str | None = Field(default=None, min_length=1, max_length=200)
    temporal_api_key: SecretStr | None = Field(default=None, repr=False)
    temporal_tls: bool | None = None
    temporal_tls_ca_file: Path | None = None
    temporal_tls_cert_file: Path | None = None
    temporal_tls_key_file: Path | None = None
    temporal_tls_server_name: str | None = Field(default=None, min_length=1, max_length=253)
    # Goes into visibility queries: no quotes or backslashes.
    task_queue: str = Field(default="durable-agents", pattern=r"^[^'\"\\]{1,200}$")
    offline_model_port: int = Field(default=8765, ge=1, le=65535)

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "AGENT_OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "AGENT_OPENAI_BASE_URL")
    )
    # Send each model call's run label, run id and sequence number as headers to an
    # endpoint other than the offline model (which always gets them: it plays from them).
    model_run_headers: bool = False
    model_name: str | None = Field(
        default=None, validation_alias=AliasChoices("AGENT_MODEL", "AGENT_MODEL_NAME")
    )
    # How long Temporal keeps closed runs, and how old our own data of closed runs may get.
    retention_days: float = Field(default=7.0, gt=0, le=3650)
    # The embeddings model for memories searched by meaning (Memory(search="embeddings")),
    # on the model endpoint (the offline model's deterministic ones when none is set).
    embedding_model: str = "text-embedding-3-small"
    # What one recall may hand a model call at most, whatever an agent declares.
    memory_recall_limit: int = Field(default=10, ge=1, le=50)
    memory_recall_bytes: int = Field(default=8000, ge=100, le=100_000)
    # How long agents' memories are kept (workflows/memory.py); None: until forgotten.
    memory_retention_days: float | None = Field(default=None, gt=0, le=36500)
    prune_schedule_id: str = "durable-agents-prune"
    # Trusted keys (by key id) this deployment revoked: runs it starts refuse their
    # signatures, and `agentctl keys revoke` tells the open runs (AGENT_REVOKED_KEYS).
    revoked_keys: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=1000
    )
    # Keys that say who a run may be about, as JSON ({"ops": {"public_key": "...",
    # "namespaces": ["customer/*"]}}): set, a run's memory needs a grant signed by one
    # (workflows/subject_grants.py); unset, a run's subject is its starter's word.
    subject_keys: dict[str, SubjectKeySetting] = Field(default_factory=dict, max_length=100)
    # PostgreSQL for our stores (transcript, ledger); unset: SQLite under the data dir.
    database_url: str | None = None
    # A PostgreSQL schema for our tables: a plain identifier, as it goes into SQL and into
    # a connection option (letters, digits, underscores; not starting with a digit).
    database_schema: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$", max_length=63
    )
    # The modules whose agents and tools the worker serves (comma-separated import paths).
    modules: str = Field(default=DEFAULT_AGENT_MODULES, min_length=1)
    # The folder AGENT_MODULES are imported from, first on the import path as `python -m`
    # puts the current folder (AGENT_MODULES_PATH; default: the current folder).
    modules_path: Path | None = None
    # Fault hook for crash tests: kill the worker at a named instant of a tool call.
    crash_at: str | None = None
    # Headers for the agents' streamable-HTTP MCP servers, by server name, as JSON:
    # {"research": {"Authorization": "Bearer ..."}}. Read by the worker only; they never
    # reach a workflow input or the history (invariant 7).
    mcp_headers: dict[str, dict[str, str]] = Field(default_factory=dict, repr=False)
    price_input_per_mtok: float = Field(default=0.0, ge=0)
    price_output_per_mtok: float = Field(default=0.0, ge=0)

    # Payload and store encryption: "id=base64key[,id=base64key...]", the first encrypts,
    # all decrypt (rotation). From the environment or a file holding the same text.
    encryption_keys: SecretStr | None = None
    encryption_keys_file: Path | None = None
    # Holding the key is what lets a process act: a worker refuses every start, signal,
    # update, query and activity input not sealed with one of the keys (runtime/encryption.py).
    require_sealed_inputs: bool = False
    # Without keys a worker cannot tell the deployment's own hand-offs (a continuation's
    # carried state, a sub-agent's terms, a fork's edit) from anyone's who polls its task
    # queue, so it refuses to serve, unless this says in so many words that nobody else can
    # start workflows in, or poll, this namespace (docs/operations.md, "The trust model").
    namespace_is_ours_alone: bool = False
    # Signed decisions for every agent whose tools move money (a tool with an amount_field,
    # its own or a sub-agent's): the worker starts its runs with require_signed_decisions
    # on, trusting the keys of AGENT_TRUSTED_KEYS_FILE (JSON, as `agentctl signing console`
    # prints it), unless the agent's own policy already requires signatures
    # (workflows/signed_payments.py). Runs already started keep the policy they started with.
    require_signed_payments: bool = False
    trusted_keys_file: Path | None = None
    # The codec server the Web UI decrypts through; its bearer token.
    codec_host: str = "127.0.0.1"
    codec_port: int = Field(default=8234, ge=1, le=65535)
    codec_token: SecretStr | None = None
    # The Web UI's own token, in the path it calls (/ui/<token>/decode: it decodes only);
    # default: derived from codec_token. Set it where the UI's endpoint is configured by hand
    # (docker-compose.yml, the k8s manifests).
    codec_ui_token: SecretStr | None = None
    codec_cors_origins: list[str] = []

    # The console (console/): where it listens, and who its users are.
    console_host: str = "127.0.0.1"
    console_port: int = Field(default=8280, ge=1, le=65535)
    # "users": a local users file with hashed passwords (`agentctl users add`); "proxy": the
    # name a reverse proxy puts in console_proxy_header, from console_trusted_proxies only.
    console_auth: Literal["users", "proxy"] = "users"
    console_users_file: Path | None = None  # default: <data dir>/console-users.json
    console_proxy_header: str = "X-Forwarded-User"
    console_trusted_proxies: list[str] = []
    # The console's roles (JSON lists of user names). Every signed-in user views runs and,
    # unless a viewer only, decides and answers what each run's policy lets them; operators
    # also edit, pause, resume, cancel, fork and rewind (empty: nobody, from the console);
    # memory admins see and forget memories (empty: nobody; `agentctl memory` still can).
    console_viewers: list[str] = []
    console_operators: list[str] = []
    console_memory_admins: list[str] = []
    # Signs session cookies; default: a secret made once and kept in the data dir.
    console_secret: SecretStr | None = None
    console_session_hours: float = Field(default=12.0, gt=0, le=24 * 30)
    # Behind a TLS-terminating proxy the console sees plain HTTP: mark cookies Secure anyway.
    console_secure_cookies: bool = False
    # Sign-in attempts: per client address per minute, and failures per name per 15 min.
    console_signin_per_address_per_minute: int = Field(default=30, ge=1, le=100_000)
    console_signin_failures_per_name: int = Field(default=10, ge=1, le=100_000)
    # Live streams (run pages) one person may hold open at once.
    console_streams_per_user: int = Field(default=8, ge=1, le=10_000)
    # The key the console signs decisions with (policy trusted_keys name its public half);
    # default: made once and kept in the data dir (`agentctl keys console` prints it).
    console_signing_key_file: Path | None = None
    console_key_id: str = Field(default="console", min_length=1, max_length=100)
    # A person's own signing key for `agentctl approve/reject/answer` (`agentctl keys new`).
    signing_key_file: Path | None = None
    signing_key_id: str | None = Field(default=None, min_length=1, max_length=100)

    # Worker Versioning: workers are a Temporal worker deployment (default: named after the
    # task queue) and agent runs are pinned to the build that started them (default build
    # id: derived from the workflow code, `runtime.versioning.code_build_id`).
    worker_versioning: bool = True
    deployment: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,200}$")
    build_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.+-]{1,200}$")

    # Runs the worker keeps in memory between their events (Temporal's sticky cache); one
    # evicted replays its history on its next event. 0: no cache (every event replays).
    # Stream the replies a person waits on (a conversation's turns) to the live log; off:
    # every reply is completed whole, as before streaming (the history is the same).
    stream_replies: bool = True
    workflow_cache_size: int = Field(default=1000, ge=0, le=100_000)
    # "shared": the agent workflow's module is loaded once and shared by every run in the
    # cache (about 230 KB less per cached run, as measured by `make bench`); "strict":
    # Temporal's default, the module imported afresh inside each run's sandbox, so a
    # non-deterministic call in workflow code fails there (the test suite checks with it).
    workflow_sandbox: Literal["shared", "strict"] = "shared"

    # On SIGTERM/SIGINT, how long activities in flight may take to finish before they are
    # cancelled (and retried elsewhere). An orchestrator's grace period must be longer.
    graceful_shutdown_seconds: float = Field(default=10.0, ge=0, le=3600)

    # Prometheus endpoint of the worker (SDK and our own metrics); 0 turns it off.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    metrics_refresh_seconds: float = Field(default=15.0, gt=0)
    # Tracing: the standard OpenTelemetry variables, read by the SDK's exporters too.
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
    )
    otel_traces_exporter: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_TRACES_EXPORTER")
    )
    otel_service_name: str = Field(
        default="durable-agents", validation_alias=AliasChoices("OTEL_SERVICE_NAME")
    )

    @model_validator(mode="after")
    def _sealing_needs_keys(self) -> Settings:
        if self.require_sealed_inputs and not self.encryption_on:
            raise ValueError(
                "AGENT_REQUIRE_SEALED_INPUTS needs AGENT_ENCRYPTION_KEYS (or _FILE): "
                "inputs can only be sealed with a key"
            )
        return self

    @model_validator(mode="after")
    def _signing_needs_keys(self) -> Settings:
        if self.require_signed_payments and self.trusted_keys_file is None:
            raise ValueError(
                "AGENT_REQUIRE_SIGNED_PAYMENTS needs AGENT_TRUSTED_KEYS_FILE: "
                "a decision can only be signed by a key the runs trust"
            )
        return self

    @field_validator("task_queue")
    @classmethod
    def _not_a_whatif_queue(cls, value: str) -> str:
        # What-if queues (workflows/whatif.py) refuse every run but a what-if's shadow.
        if value.startswith("whatif-"):
            raise ValueError("a task queue named whatif-… is a what-if's own; choose another")
        return value

    @property
    def agent_modules(self) -> list[str]:
        return [name.strip() for name in self.modules.split(",") if name.strip()]

    def key_from_environment(self, variable: str) -> str | None:
        """An agent's own model key, named by the agent, read from the worker's environment
        (never from a workflow input: invariant 7)."""
        return os.environ.get(variable)

    @property
    def deployment_name(self) -> str:
        """The worker deployment: the setting, else the task queue ('.' is Temporal's
        separator between deployment and build, so it becomes '-')."""
        return self.deployment or self.task_queue.replace(".", "-")

    @property
    def temporal_address(self) -> str:
        return f"{self.temporal_host}:{self.temporal_port}"

    @property
    def uses_offline_model(self) -> bool:
        """With no endpoint configured, the scripted offline model answers."""
        return self.openai_base_url is None and self.openai_api_key is None

    @property
    def model_base_url(self) -> str:
        if self.openai_base_url:
            return self.openai_base_url
        if self.openai_api_key is not None:
            return "https://api.openai.com/v1"
        return f"http://127.0.0.1:{self.offline_model_port}/v1"

    @property
    def model_api_key(self) -> str:
        if self.openai_api_key is not None:
            return self.openai_api_key.get_secret_value()
        return "offline-no-key"

    @property
    def effective_model_name(self) -> str:
        if self.model_name:
            return self.model_name
        return OFFLINE_MODEL_NAME if self.uses_offline_model else "gpt-4o-mini"

    @property
    def database_path(self) -> Path:
        """Our own stores (transcript, model-call memo, effect ledger, demo tables)."""
        return self.data_dir / "agent.sqlite3"

    @property
    def trace_exporters(self) -> set[str]:
        """OTEL_TRACES_EXPORTER if set ("otlp", "console", "none", comma-separated), else
        OTLP when an endpoint is set, else none."""
        if self.otel_traces_exporter is not None:
            names = {n.strip().lower() for n in self.otel_traces_exporter.split(",")}
            return names - {"none", ""}
        return {"otlp"} if self.otel_exporter_otlp_endpoint else set()

    @property
    def encryption_key_text(self) -> str | None:
        """The key list from the environment, else from the keys file."""
        if self.encryption_keys is not None:
            return self.encryption_keys.get_secret_value()
        if self.effective_keys_file is not None:
            return self.effective_keys_file.read_text()
        return None

    @property
    def effective_keys_file(self) -> Path | None:
        """AGENT_ENCRYPTION_KEYS_FILE; with neither key setting set, the keys `agentctl up`
        made in the data dir (<data dir>/keys) if they are there, so that every process
        using the stack's data dir (the CLI beside it) holds the stack's keys."""
        if self.encryption_keys is not None or self.encryption_keys_file is not None:
            return self.encryption_keys_file
        made = self.data_dir / "keys"
        return made if made.is_file() else None

    @property
    def encryption_on(self) -> bool:
        return self.encryption_keys is not None or self.effective_keys_file is not None

    @property
    def codec_url(self) -> str:
        return f"http://{self.codec_host}:{self.codec_port}"

    @property
    def ui_origins(self) -> list[str]:
        """Where the Web UI is served from: the origins the codec server lets in."""
        if self.codec_cors_origins:
            return self.codec_cors_origins
        port = self.temporal_ui_port
        return [f"http://{host}:{port}" for host in {self.temporal_host, "127.0.0.1", "localhost"}]

    @property
    def console_url(self) -> str:
        return f"http://{self.console_host}:{self.console_port}"

    @property
    def console_users_path(self) -> Path:
        return self.console_users_file or self.data_dir / "console-users.json"

    @property
    def console_key_path(self) -> Path:
        return self.console_signing_key_file or self.data_dir / "console-signing.key"

    def web_ui_url(self, run_id: str | None = None) -> str:
        base = f"http://{self.temporal_host}:{self.temporal_ui_port}/namespaces/{self.namespace}"
        return f"{base}/workflows/{run_id}" if run_id else f"{base}/workflows"


SETTINGS_FILE_VARIABLE = "AGENT_SETTINGS_FILE"


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, then an optional file (KEY=value lines, named by
    AGENT_SETTINGS_FILE; the environment wins), with explicit overrides on top."""
    file = os.environ.get(SETTINGS_FILE_VARIABLE)
    if file and not Path(file).is_file():
        raise SettingsFileMissing(f"{SETTINGS_FILE_VARIABLE}={file}: no such file")
    try:
        return Settings(_env_file=file or None, **overrides)  # type: ignore[arg-type]
    except SettingsError as err:  # a list setting that is no JSON, say: one line, no trace
        raise SettingsInvalid(f'{err} (list settings are JSON, e.g. ["alice"])') from None
    except ValidationError as err:  # a setting out of bounds, or two that do not go together
        raise SettingsInvalid(settings_error(err)) from None


def settings_error(err: ValidationError) -> str:
    """A settings validation error in one line: each problem, with the setting it names."""
    said = []
    for problem in err.errors():
        where = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        said.append(f"{where.upper()}: {message}" if where else message)
    return "; ".join(said).replace("\n", " ")


class SettingsFileMissing(ValueError):
    pass


class SettingsInvalid(ValueError):
    """A setting the environment or the settings file gives that cannot be read."""
