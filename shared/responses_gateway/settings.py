"""The environment settings of a served gateway, every one checked before it serves.

Owns the list of the variables the gateway reads (:data:`SETTINGS`: the README's configuration
table is checked against it) and :func:`check_environment`, which ``serve`` runs at startup so
that a typo in any of them is a startup error naming the variable, never a 500 on the first
request. Each check calls the reader that owns the variable (the configuration, the store
selection, tenancy, sealing, limits, the MCP policy): nothing here parses a value itself except
the few variables whose readers fall back to a default in silence.

Must not: open a store, start a server or read a file the readers do not already read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from responses_gateway.config import ConfigError

__all__ = ["OTHER_VARIABLES", "SETTINGS", "Setting", "check_environment", "setting_names"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Setting:
    """Environment variables read together, and the check that runs their reader."""

    names: tuple[str, ...]
    check: Callable[[Mapping[str, str]], object]
    """Raises ``ConfigError`` or ``ValueError`` (the message names the variable)."""


def _config(env: Mapping[str, str]) -> object:
    from responses_gateway.config import load_config

    return load_config(env)


def _store(env: Mapping[str, str]) -> object:
    from responses_gateway.store.dynamo import retention_days_from_env
    from responses_gateway.store.select import STORE_ENV

    kind = (env.get(STORE_ENV) or "").strip().lower()
    if kind and kind not in ("sqlite", "dynamodb", "moto"):
        raise ConfigError(f"{STORE_ENV} must be one of sqlite, dynamodb, moto, got {kind!r}")
    return retention_days_from_env(env)


def _dynamodb(env: Mapping[str, str]) -> object:
    kind = (env.get("DYNAMODB_CLIENT") or "http").strip().lower()
    if kind not in ("http", "boto3"):
        raise ConfigError(f"DYNAMODB_CLIENT must be http or boto3, got {kind!r}")
    return _positive("DYNAMODB_MAX_ATTEMPTS", "DYNAMODB_READ_TIMEOUT")(env)


def _tenancy(env: Mapping[str, str]) -> object:
    from responses_gateway.tenancy import TRUST_ENV, TenancyPolicy

    _flag(TRUST_ENV)(env)
    return TenancyPolicy.from_env(env)


def _flag(name: str) -> Callable[[Mapping[str, str]], object]:
    def check(env: Mapping[str, str]) -> object:
        value = env.get(name, "").strip().lower()
        if value not in _TRUE + _FALSE:
            raise ConfigError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {value!r}")
        return value in _TRUE

    return check


def _tenants(name: str) -> Callable[[Mapping[str, str]], object]:
    def check(env: Mapping[str, str]) -> object:
        from responses_gateway.tenancy import valid_tenant

        for tenant in (t.strip() for t in env.get(name, "").split(",")):
            if tenant and not valid_tenant(tenant):
                raise ConfigError(
                    f"{name}: tenant {tenant!r} must be 1-128 of A-Z a-z 0-9 . _ @ - "
                    "(tenants are separated by commas)"
                )
        return None

    return check


def _positive(*names: str) -> Callable[[Mapping[str, str]], object]:
    def check(env: Mapping[str, str]) -> object:
        for name in names:
            raw = env.get(name, "").strip()
            if raw and not (raw.isdigit() and int(raw) > 0):
                raise ConfigError(f"{name} must be a positive whole number, got {raw!r}")
        return None

    return check


def _seconds(*names: str) -> Callable[[Mapping[str, str]], object]:
    def check(env: Mapping[str, str]) -> object:
        for name in names:
            raw = env.get(name, "").strip()
            if not raw:
                continue
            try:
                value = float(raw)
            except ValueError:
                value = 0.0
            if not 0 < value < float("inf"):
                raise ConfigError(f"{name} must be a positive number of seconds, got {raw!r}")
        return None

    return check


def _limits(env: Mapping[str, str]) -> object:
    from responses_gateway.api.limits import Limits

    return Limits.from_env(env)


def _mcp(env: Mapping[str, str]) -> object:
    from responses_gateway.mcp.security import McpPolicy

    return McpPolicy.from_env(env)


def _sealing(env: Mapping[str, str]) -> object:
    """Installs the process's keyring: the warning about an ephemeral key comes now."""
    from responses_gateway import sealing

    try:
        return sealing.configure(env)
    except sealing.SealingConfigError as exc:
        message = str(exc)
        if message.startswith("cannot read"):
            raise ConfigError(message) from None
        if env.get(sealing.KEYS_ENV, "").strip():
            raise ConfigError(f"{sealing.KEYS_ENV}: {message}") from None
        path = env.get(sealing.KEYS_FILE_ENV, "").strip()
        if path:
            raise ConfigError(f"{sealing.KEYS_FILE_ENV} {path}: {message}") from None
        raise ConfigError(message) from None


def _any(env: Mapping[str, str]) -> object:
    return None


SETTINGS: tuple[Setting, ...] = (
    Setting(
        (
            "UPSTREAM_BASE_URL",
            "UPSTREAM_API_KEY",
            "UPSTREAM_API",
            "UPSTREAM_HOSTED_TOOLS",
            "UPSTREAM_STREAMING",
            "GATEWAY_CONFIG",
            "BEDROCK_MODELS",
        ),
        _config,
    ),
    Setting(("GATEWAY_STORE", "GATEWAY_DB_PATH", "RETENTION_DAYS"), _store),
    Setting(
        (
            "DYNAMODB_TABLE",
            "DYNAMODB_ENDPOINT_URL",
            "AWS_REGION",
            "DYNAMODB_MAX_ATTEMPTS",
            "DYNAMODB_READ_TIMEOUT",
            "DYNAMODB_CLIENT",
        ),
        _dynamodb,
    ),
    Setting(
        ("GATEWAY_API_KEYS", "GATEWAY_API_KEYS_FILE", "GATEWAY_TRUST_LAMBDA_CONTEXT"), _tenancy
    ),
    Setting(("GATEWAY_ENFORCE_BUDGETS",), _flag("GATEWAY_ENFORCE_BUDGETS")),
    Setting(("GATEWAY_OPERATOR_TENANTS",), _tenants("GATEWAY_OPERATOR_TENANTS")),
    Setting(("GATEWAY_LOG_CONTENT_TENANTS",), _tenants("GATEWAY_LOG_CONTENT_TENANTS")),
    Setting(("GATEWAY_KEYS_STACK", "GATEWAY_CONFIG_PARAMETER"), _any),
    Setting(("MCP_ALLOW_HTTP", "MCP_ALLOW_LOOPBACK", "MCP_ALLOWED_HOSTS"), _mcp),
    Setting(
        (
            "GATEWAY_MAX_BODY_BYTES",
            "GATEWAY_MAX_INPUT_ITEMS",
            "GATEWAY_MAX_TOOLS",
            "GATEWAY_MAX_JSON_DEPTH",
            "GATEWAY_MAX_STRING_CHARS",
            "GATEWAY_STREAM_BUFFER_BYTES",
            "GATEWAY_STREAM_STALL_SECONDS",
        ),
        _limits,
    ),
    Setting(
        ("GATEWAY_MAX_UPSTREAM_EVENT_BYTES", "GATEWAY_MAX_UPSTREAM_STREAM_BYTES"),
        _positive("GATEWAY_MAX_UPSTREAM_EVENT_BYTES", "GATEWAY_MAX_UPSTREAM_STREAM_BYTES"),
    ),
    Setting(("GATEWAY_WS_MAX_SECONDS",), _seconds("GATEWAY_WS_MAX_SECONDS")),
    Setting(("GATEWAY_RUN_LEASE_SECONDS",), _seconds("GATEWAY_RUN_LEASE_SECONDS")),
    Setting(("GATEWAY_WS_MAX_MESSAGE_BYTES",), _positive("GATEWAY_WS_MAX_MESSAGE_BYTES")),
    Setting(("BACKGROUND_MAX_SECONDS",), _seconds("BACKGROUND_MAX_SECONDS")),
    Setting(
        (
            "GATEWAY_SEALING_KEYS",
            "GATEWAY_SEALING_KEYS_FILE",
            "GATEWAY_SEALING_KEYS_PARAMETER",
            "GATEWAY_SEALING_KEYS_SECRET",
        ),
        _sealing,
    ),
)
"""Every variable a served gateway reads, in the README's order, with its check. The sealing
keys come last: their check installs the process's keyring."""

OTHER_VARIABLES: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "AWS credentials, read as the AWS SDKs read them",
    "AWS_SECRET_ACCESS_KEY": "AWS credentials",
    "AWS_SESSION_TOKEN": "AWS credentials",
    "AWS_SECURITY_TOKEN": "AWS credentials (the older name)",
    "AWS_CREDENTIAL_EXPIRATION": "AWS credentials",
    "AWS_CA_BUNDLE": "AWS SDK setting",
    "AWS_DEFAULT_REGION": "AWS SDK setting (AWS_REGION wins)",
    "AWS_ENDPOINT_URL": "AWS SDK setting",
    "AWS_ENDPOINT_URL_DYNAMODB": "AWS SDK setting",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "AWS SDK setting",
    "AWS_USE_DUALSTACK_ENDPOINT": "AWS SDK setting",
    "AWS_USE_FIPS_ENDPOINT": "AWS SDK setting",
    "XDG_DATA_HOME": "the user's data directory (the default SQLite file)",
    "AWS_LAMBDA_FUNCTION_NAME": "set by Lambda",
    "AWS_LAMBDA_FUNCTION_VERSION": "set by Lambda",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "set by Lambda",
    "AWS_LAMBDA_LOG_GROUP_NAME": "set by Lambda",
    "AWS_LAMBDA_LOG_STREAM_NAME": "set by Lambda",
    "AWS_LAMBDA_RUNTIME_API": "set by Lambda (the Runtime API)",
    "POWERTOOLS_SERVICE_NAME": "deployed: set by the template",
    "POWERTOOLS_METRICS_NAMESPACE": "deployed: set by the template",
    "POWERTOOLS_TRACE_DISABLED": "deployed: Powertools tracing",
    "UPSTREAM_API_KEY_PARAMETER": "deployed: set by the template (docs/deploy.md)",
    "UPSTREAM_API_KEY_SECRET": "deployed: set by the template (docs/deploy.md)",
    "BACKGROUND_STATE_MACHINE_ARN": "deployed: set by the template (docs/background.md)",
    "SOCKET_MANAGEMENT_ENDPOINT": "deployed: the WebSocket API's management endpoint",
    "WORKER_MARGIN_SECONDS": "deployed: the background worker's margin before its deadline",
    "HANDOVER_MARGIN_SECONDS": "deployed: a foreground loop's margin before its deadline",
    "STEPFUNCTIONS_ENDPOINT_URL": "tests: a Step Functions endpoint other than AWS",
    "GATEWAY_SPEC_DIR": "tests: where the spec oracles' fixtures are",
}
"""Variables the package reads that are not a served gateway's settings, and whose they are
(a test checks that every variable the code reads is in one of the two tables)."""


def setting_names() -> tuple[str, ...]:
    """The variables of :data:`SETTINGS`, in order."""
    return tuple(name for setting in SETTINGS for name in setting.names)


def check_environment(env: Mapping[str, str]) -> None:
    """Run every setting's check on ``env``.

    Raises:
        ConfigError: the first variable (or configuration file) that is wrong, by name.
    """
    for setting in SETTINGS:
        try:
            setting.check(env)
        except ConfigError:
            raise
        except ValueError as exc:  # the readers' own errors (TenancyConfigError, ...)
            raise ConfigError(str(exc)) from None
