"""Database engines and sessions (sync for Celery workers and the learner, async for the aiohttp apps).

One driver, psycopg 3, serves both. Callers open sessions with ``session_scope()`` / ``async_session_scope()``:
commit on success, rollback on any error, so a failed handler never half-writes state.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from sqlalchemy import create_engine, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session, sessionmaker


def _psycopg(url: str) -> str:
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The URL as libpq (a bare ``psycopg.connect``) reads it: no SQLAlchemy driver suffix."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def make_engine(url: str, **kw: object) -> Engine:
    return create_engine(_psycopg(url), pool_pre_ping=True, future=True, **kw)  # type: ignore[arg-type]


def make_async_engine(url: str, **kw: object) -> AsyncEngine:
    return create_async_engine(_psycopg(url), pool_pre_ping=True, **kw)  # type: ignore[arg-type]


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def async_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@contextlib.contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    with factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


@contextlib.asynccontextmanager
async def async_session_scope(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    async with factory() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise
