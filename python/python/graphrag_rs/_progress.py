"""How a build's progress is shown when no ``progress`` callback is given:
a tqdm bar over the steps when tqdm is installed (``tqdm.auto``: a widget in
Jupyter, a text bar in a terminal), else one ``graphrag_rs`` log line per
step."""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable, Optional

Progress = Callable[[str, int, int, Optional[str]], None]

logger = logging.getLogger("graphrag_rs")


def log_step(step: str, index: int, total: int, status: Optional[str]) -> None:
    """A progress callback that logs each step's start and end."""
    if status is None:
        logger.info("step %d/%d %s", index + 1, total, step)
    else:
        logger.info("step %d/%d %s: %s", index + 1, total, step, status)


class _StepBar:
    """A tqdm bar advanced as each step ends, naming the steps running."""

    def __init__(self, tqdm: Any) -> None:
        self._tqdm = tqdm
        self._bar: Any = None
        self._running: list[str] = []

    def __call__(self, step: str, index: int, total: int, status: Optional[str]) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, desc="graphrag-rs", unit="step")
        if status is None:
            self._running.append(step)
        else:
            if step in self._running:
                self._running.remove(step)
            self._bar.update(1)
            if status == "failed":
                logger.warning("step %s failed", step)
        self._bar.set_postfix_str(", ".join(self._running))
        if self._bar.n >= total:
            self._bar.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def default() -> Progress:
    """The progress display for a build: a tqdm bar if tqdm is installed,
    else log lines."""
    try:
        auto: Any = importlib.import_module("tqdm.auto")
    except ImportError:
        return log_step
    return _StepBar(auto.tqdm)
