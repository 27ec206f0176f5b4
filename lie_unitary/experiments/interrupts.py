"""Graceful stops: the first SIGINT/SIGTERM finishes the current chunk, the second aborts.

Training loops call `StopRequest.requested()` between chunks; after a stop is
requested they checkpoint and raise `Interrupted`, which the runner turns into one
line and a normal return. A second signal restores the default handlers' behaviour
(KeyboardInterrupt / termination) at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable
from typing import Iterator

__all__ = ["Interrupted", "StopRequest", "handle_signals"]


class Interrupted(Exception):
  """Raised by a training loop that stopped early on request, after checkpointing."""


class StopRequest:
  """A flag set by the first SIGINT/SIGTERM (or by `request()`)."""

  def __init__(self):
    self._event = threading.Event()
    self.signal_name = ""

  def request(self, why: str = "requested") -> None:
    self.signal_name = why
    self._event.set()

  def requested(self) -> bool:
    return self._event.is_set()


@contextlib.contextmanager
def handle_signals(stop: StopRequest, printer: Callable[[str], None] = print
                   ) -> Iterator[StopRequest]:
  """Within the block, the first SIGINT/SIGTERM sets `stop`; a second aborts.

  Outside the main thread (where Python cannot install handlers) it does nothing.
  """
  if threading.current_thread() is not threading.main_thread():
    yield stop
    return
  previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

  def handler(signum, frame):
    if stop.requested():  # the second: abort now
      for s, h in previous.items():
        signal.signal(s, h)
      if signum == signal.SIGINT:
        raise KeyboardInterrupt
      raise SystemExit(128 + signum)
    stop.request(signal.Signals(signum).name)
    printer(f"{stop.signal_name}: stopping after the current chunk (checkpointed); "
            "send it again to abort now.")

  for s in previous:
    signal.signal(s, handler)
  try:
    yield stop
  finally:
    for s, h in previous.items():
      signal.signal(s, h)
