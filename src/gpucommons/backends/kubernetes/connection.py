"""A connection to one API server: the kubeconfig read by the official client, REST calls, clear errors.

The `kubernetes` package is an optional extra (`gpucommons[kubernetes]`), so it is imported inside
`connect` only: `commons k8s render`, the embedded mode and the tests of the pure modules work without
it. We use the client for what is hard to get right (kubeconfig contexts, TLS, exec and OIDC auth
plugins, in-cluster service accounts) and its REST layer for the calls; responses stay plain JSON
dicts, because the manifests we send are plain dicts too.

Every failure becomes a `KubeError` whose message says what is wrong and what to do, so the CLI can
print it and exit 1 without a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Seconds to connect, seconds to wait for an answer.
DEFAULT_TIMEOUT = (5.0, 60.0)
INSTALL_HINT = "pip install 'gpucommons[kubernetes]'"


class KubeError(Exception):
    """Anything that stops a call to the cluster; `str()` is the message for the user."""


class ClientMissing(KubeError):
    pass


class KubeconfigError(KubeError):
    pass


class Unreachable(KubeError):
    pass


class StreamBroken(KubeError):
    """A watch stream that broke off mid-way (connection reset, a proxy's timeout)."""


class ApiStatus(KubeError):
    """A non-2xx answer, with the fields of the API server's `Status` object (when it sent one)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(f"{method} {path}: {code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.method = method
        self.path = path


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: dict[str, Any]


def parse_status(code: int, raw: bytes, method: str, path: str) -> ApiStatus:
    """The API server answers errors with a `Status` (kind: Status); proxies may send plain text."""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict) or body.get("kind") != "Status":
        text = raw.decode("utf-8", "replace").strip()[:200]
        return ApiStatus(code, "", text or "no details", {}, method, path)
    return ApiStatus(
        code,
        str(body.get("reason", "")),
        str(body.get("message", "")),
        body.get("details") or {},
        method,
        path,
    )


class KubeApi:
    """REST calls through the official client's `ApiClient` (auth headers, TLS, proxies)."""

    def __init__(self, api_client: Any, description: str, timeout: tuple[float, float] = DEFAULT_TIMEOUT):
        self._api = api_client
        self.description = description
        self._timeout = timeout

    @property
    def server(self) -> str:
        host: str = self._api.configuration.host
        return host

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response:
        """One call; raises `Unreachable` or `ApiStatus` (for any status ≥ 400)."""
        raw, status = self._send(method, path, query, body, content_type, stream=False)
        if status >= 400:
            raise parse_status(status, raw, method, path)
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise KubeError(
                f"{method} {path}: the server answered {status} with a body that is not JSON"
            ) from exc
        return Response(status, parsed if isinstance(parsed, dict) else {})

    def stream(self, path: str, query: Sequence[tuple[str, str]]) -> Any:
        """A GET whose body is read line by line (watch streams); the caller closes it."""
        response, status = self._send("GET", path, query, None, "application/json", stream=True)
        if status >= 400:
            raw = response.read()
            response.release_conn()
            raise parse_status(status, raw, "GET", path)
        return response

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        stream: bool,
    ) -> tuple[Any, int]:
        import urllib3  # comes with the kubernetes client

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._api.param_serialize(
            method,
            path,
            query_params=list(query) or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        timeout = (self._timeout[0], None) if stream else self._timeout
        try:
            answer = self._api.call_api(*request, _request_timeout=timeout)
            if stream:
                return answer.response, answer.status
            answer.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(
                f"cannot reach the Kubernetes API server at {self.server} ({self.description}): "
                f"{_root_cause(exc)}. Is the cluster up, and is this the right context?"
            ) from None
        return answer.data, int(answer.status)


def stream_lines(response: Any) -> Iterator[bytes]:
    """The lines of a `KubeApi.stream` response; a connection that breaks raises `StreamBroken`."""
    import urllib3

    try:
        yield from response
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise StreamBroken(f"the watch stream broke off: {_root_cause(exc)}") from None


def _root_cause(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    while isinstance(reason, BaseException) and getattr(reason, "reason", None) is not None:
        reason = getattr(reason, "reason", None)
    text = str(reason or exc)
    # urllib3 wraps "Connection refused" in the pool's repr; keep the part a person recognises.
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if marker in text:
            return marker.lower()
    return text


def connect(
    kubeconfig: Path | None = None, context: str | None = None, timeout: tuple[float, float] = DEFAULT_TIMEOUT
) -> KubeApi:
    """Read the kubeconfig (`--kubeconfig`, else $KUBECONFIG, else ~/.kube/config; in a pod with no
    kubeconfig, the pod's service account) and return a connection. Nothing is sent yet."""
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise ClientMissing(f"the Kubernetes client is not installed: {INSTALL_HINT}") from None

    configuration = client.Configuration()
    source = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG") or "~/.kube/config"
    if kubeconfig is not None and not kubeconfig.is_file():
        raise KubeconfigError(f"{kubeconfig}: no such kubeconfig file")
    default = Path(os.path.expanduser("~/.kube/config"))
    in_cluster = (
        kubeconfig is None
        and not os.environ.get("KUBECONFIG")
        and not default.is_file()
        and "KUBERNETES_SERVICE_HOST" in os.environ
    )
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            source = "the pod's service account"
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
            )
    except ConfigException as exc:
        raise KubeconfigError(_kubeconfig_message(source, context, exc)) from None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise KubeconfigError(f"{source}: cannot read the kubeconfig: {exc}") from None
    # One retry at most: a dead cluster should fail in seconds, not after urllib3's default three.
    configuration.retries = 1
    where = f"context {context!r} of {source}" if context else source
    return KubeApi(client.ApiClient(configuration), where, timeout)


def _kubeconfig_message(source: str, context: str | None, exc: Exception) -> str:
    text = str(exc)
    if "No configuration found" in text or "does not exist" in text:
        return (
            f"no kubeconfig found ({source}): pass --kubeconfig FILE, set KUBECONFIG, "
            "or run this where kubectl works"
        )
    if context and context in text:
        return f"{source}: context {context!r} not found in the kubeconfig ({text})"
    return f"{source}: unusable kubeconfig: {text}"
