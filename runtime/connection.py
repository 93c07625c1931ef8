"""How every process reaches Temporal: the way Temporal's own tools do.

Temporal's environment configuration comes first (`temporalio.envconfig`: the
`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS_*` variables
and the profile named by `TEMPORAL_PROFILE` in its TOML file), so a worker, `agentctl`
and the console connect with the same settings as the `temporal` CLI. Our own settings
(AGENT_TEMPORAL_HOST/PORT, AGENT_NAMESPACE, AGENT_TEMPORAL_API_KEY, AGENT_TEMPORAL_TLS_*)
win where they are set. A setting that cannot be used (a missing certificate file, a
certificate without its key, a profile that does not exist) is refused in one line.

A credential is never sent without TLS, on loopback too: an API key, and gRPC metadata
that carries one (`TEMPORAL_GRPC_META_*`, a profile's `grpc_meta`; `bearer_metadata`).
An API key turns TLS on by itself, as Temporal's tools do; such metadata does not (those
tools send it as configured, plaintext too), so it is refused until TLS is on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.envconfig import ClientConfigProfile
from temporalio.service import TLSConfig

from durable_agents.runtime.settings import Settings


class ConnectionSettingsError(ValueError):
    """The settings for reaching Temporal cannot be used; the message says why."""


@dataclass(frozen=True)
class Connection:
    address: str
    namespace: str
    tls: bool | TLSConfig
    api_key: str | None = field(default=None, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        """What `agentctl doctor` says: plaintext, TLS or mTLS, and an API key."""
        if self.tls is False:
            kind = "plaintext"
        elif isinstance(self.tls, TLSConfig) and self.tls.client_cert is not None:
            kind = "mTLS (client certificate)"
        else:
            kind = "TLS"
        return f"{kind} with an API key" if self.api_key else kind

    @property
    def plaintext_to_remote(self) -> bool:
        """Plaintext to an address that is not this machine: anyone on the path reads it."""
        return self.tls is False and not is_loopback(self.address.rpartition(":")[0])


# Metadata names that carry a credential whatever their value, compared in lower case
# (gRPC metadata names are case-insensitive).
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
# HTTP authentication schemes whose value is a credential under any name a gateway reads
# (`x-gateway-auth: Bearer …`). Anything else is the sender's business: a name like
# `x-token` may hold a trace id, and refusing it would be a guess.
CREDENTIAL_SCHEMES = ("bearer ", "basic ")


def bearer_metadata(metadata: Mapping[str, str]) -> list[str]:
    """The names of the metadata entries that carry a credential, sorted."""
    return sorted(
        name
        for name, value in metadata.items()
        if name.lower() in CREDENTIAL_HEADERS
        or value.strip().lower().startswith(CREDENTIAL_SCHEMES)
    )


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connection(settings: Settings) -> Connection:
    """Where and how to reach Temporal, from Temporal's configuration and ours."""
    try:
        profile = ClientConfigProfile.load(profile=settings.temporal_profile)
    except Exception as err:  # the SDK's ConfigError, from its native code
        raise ConnectionSettingsError(f"Temporal client configuration: {_line(err)}") from None
    given = settings.model_fields_set
    address = profile.address or settings.temporal_address
    if given & {"temporal_host", "temporal_port"}:
        address = settings.temporal_address
    namespace = profile.namespace or settings.namespace
    if "namespace" in given:
        namespace = settings.namespace
    api_key = profile.api_key
    if settings.temporal_api_key is not None:
        api_key = settings.temporal_api_key.get_secret_value()
    if api_key is not None and not api_key.strip():
        raise ConnectionSettingsError("the Temporal API key is empty")
    tls = _tls(settings, profile, api_key)
    if api_key is not None and tls is False:
        raise ConnectionSettingsError(
            "a Temporal API key is never sent without TLS: turn TLS on, or drop the key"
        )
    metadata = dict(profile.grpc_meta)
    carrying = bearer_metadata(metadata)
    if carrying and tls is False:
        raise ConnectionSettingsError(
            f"bearer metadata ({', '.join(carrying)}) is never sent without TLS: "
            "turn TLS on, or drop the header"
        )
    return Connection(
        address=address,
        namespace=namespace,
        tls=tls,
        api_key=api_key,
        rpc_metadata=metadata,
    )


def _tls(settings: Settings, profile: ClientConfigProfile, api_key: str | None) -> bool | TLSConfig:
    ours = (
        settings.temporal_tls_ca_file,
        settings.temporal_tls_cert_file,
        settings.temporal_tls_key_file,
        settings.temporal_tls_server_name,
    )
    if settings.temporal_tls is False:
        if any(value is not None for value in ours):
            raise ConnectionSettingsError(
                "AGENT_TEMPORAL_TLS=false, yet TLS files or a server name are set"
            )
        return False
    if any(value is not None for value in ours) or settings.temporal_tls:
        cert, key = settings.temporal_tls_cert_file, settings.temporal_tls_key_file
        if (cert is None) != (key is None):
            raise ConnectionSettingsError(
                "mTLS needs both AGENT_TEMPORAL_TLS_CERT_FILE and AGENT_TEMPORAL_TLS_KEY_FILE"
            )
        return TLSConfig(
            server_root_ca_cert=_read(settings.temporal_tls_ca_file, "server CA"),
            domain=settings.temporal_tls_server_name,
            client_cert=_read(cert, "client certificate"),
            client_private_key=_read(key, "client key"),
        )
    if profile.tls is not None:
        try:
            return profile.tls.to_connect_tls_config()
        except OSError as err:
            raise ConnectionSettingsError(
                f"Temporal TLS configuration: {err.filename}: {err.strerror}"
            ) from None
    return api_key is not None  # an API key goes over TLS, as Temporal's tools do


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as err:
        raise ConnectionSettingsError(f"the {what} file {path}: {err.strerror}") from None


def _line(err: Exception) -> str:
    return " ".join(str(err).split())[:300]
