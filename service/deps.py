"""FastAPI dependencies, as ``Annotated`` aliases routes declare as parameter types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

from service.auth import API_KEY_HEADER, tenant_for_key
from service.settings import Settings
from worker.job_kinds import JobKind
from worker.job_store import JobStore

__all__ = ["SettingsDep", "StoreDep", "CeleryDep", "KindsDep", "TenantDep"]

_api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False)


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _store(request: Request) -> JobStore:
    return request.app.state.store


def _celery(request: Request) -> Celery:
    return request.app.state.celery


def _kinds(request: Request) -> Mapping[str, JobKind]:
    return request.app.state.kinds


SettingsDep = Annotated[Settings, Depends(_settings)]
StoreDep = Annotated[JobStore, Depends(_store)]
CeleryDep = Annotated[Celery, Depends(_celery)]
KindsDep = Annotated[Mapping[str, JobKind], Depends(_kinds)]


def _tenant(settings: SettingsDep, api_key: Annotated[str | None, Security(_api_key_header)]) -> str:
    return tenant_for_key(settings, api_key)


TenantDep = Annotated[str, Depends(_tenant)]
