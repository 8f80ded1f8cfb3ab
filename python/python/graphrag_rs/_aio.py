"""The async twins: every public function and ``Index`` method has an
``a``-prefixed coroutine made here by ``twin``, not written out by hand, so
that all of them cancel the same way.

A twin runs its function on a worker thread (the event loop is never
blocked). Cancelling the awaiting task cancels the function's
``CancelToken`` (a build or update stops cleanly, a query's model calls
end) and then *waits for the worker to end* before ``CancelledError``
reaches the caller: when it does, the work has stopped and the project's
writer lock is free, so an immediate ``build_index(root, resume=True)``
or ``update_index(root)`` succeeds."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from typing import Any, Callable, Coroutine, Optional, ParamSpec, Tuple, TypeVar

from ._native import CancelToken

P = ParamSpec("P")
R = TypeVar("R")


def _outcome(run: Callable[..., R], *args: Any) -> Tuple[bool, Any]:
    """``(True, result)`` or ``(False, exception)``: the worker never raises
    into the executor's future, where a KeyboardInterrupt (how an
    interrupted run ends) would escape the event loop itself."""
    try:
        return True, run(*args)
    except BaseException as e:  # handed to the awaiting coroutine
        return False, e


async def run_stoppable(work: Callable[[CancelToken], R], token: Optional[CancelToken] = None) -> R:
    """``work(token)`` on a worker thread. If the awaiting task is cancelled,
    ``token`` is cancelled and the worker awaited to its end before
    ``CancelledError`` propagates (its outcome, usually the interruption,
    is dropped: the caller asked for none)."""
    token = token if token is not None else CancelToken()
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(None, _outcome, context.run, work, token)
    try:
        ok, value = await asyncio.shield(future)
    except asyncio.CancelledError:
        token.cancel()
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue  # cancelled again while stopping: still wait for the worker
        raise
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def twin(fn: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The coroutine twin of ``fn`` (a function, or a method: the twin binds
    as one), named ``a<name>``, with ``fn``'s parameters. When ``fn`` takes
    ``cancel``, the task's cancellation is wired to it (a ``cancel=`` token
    given by the caller is used and cancelled too); otherwise cancelling
    waits for the (short) call to return."""
    takes_cancel = "cancel" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        given = kwargs.get("cancel") if takes_cancel else None

        def work(token: CancelToken) -> R:
            if takes_cancel:
                kwargs["cancel"] = token
            return fn(*args, **kwargs)

        return await run_stoppable(work, given)  # type: ignore[arg-type]

    run.__name__ = "a" + fn.__name__
    run.__qualname__ = fn.__qualname__[: -len(fn.__name__)] + run.__name__
    run.__doc__ = (
        f"``{fn.__name__}`` from asyncio, on a worker thread; cancelling the task stops it and returns "
        f"once it has stopped (see graphrag_rs._aio).\n\n{fn.__doc__ or ''}"
    )
    return run
