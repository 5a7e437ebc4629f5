"""API keys and tenants.

``FIBERTENSOR_API_KEYS`` maps keys to tenants. When it is empty the service has one tenant
and no authentication (the embedded default binds to 127.0.0.1 for that reason).
"""

from __future__ import annotations

import hmac

from service.problems import Problem
from service.settings import Settings

__all__ = ["API_KEY_HEADER", "DEFAULT_TENANT", "tenant_for_key"]

API_KEY_HEADER = "X-API-Key"
DEFAULT_TENANT = "default"


def tenant_for_key(settings: Settings, api_key: str | None) -> str:
    """The tenant an API key belongs to; raises a 401 :class:`Problem` for a missing or
    unknown key. Every configured key is compared, in constant time, so the answer's timing
    says nothing about which key (or how much of one) matched."""
    if not settings.api_keys:
        return DEFAULT_TENANT
    challenge = {"WWW-Authenticate": API_KEY_HEADER}
    if not api_key:
        raise Problem(
            401,
            f"this server requires an API key: send it in the {API_KEY_HEADER} header "
            "(the CLI takes --api-key or FIBERTENSOR_API_KEY)",
            headers=challenge,
        )
    offered = api_key.encode()
    tenant = None
    for key, name in settings.api_keys.items():
        if hmac.compare_digest(key.encode(), offered):
            tenant = name
    if tenant is None:
        raise Problem(
            401,
            f"the API key in {API_KEY_HEADER} is not known to this server; check it with "
            "the server's operator",
            headers=challenge,
        )
    return tenant
