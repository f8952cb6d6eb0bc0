"""What fell back to PyTorch's own ops, and why: counted per (op, reason), each reason logged once.

An op whose inputs the engine's kernels do not support (a device or dtype without kernels, a layout,
HIPDIFFUSION_DISABLE=1) runs PyTorch's op instead; that is never an error and never silent.
"""

import collections
import logging
import os
import threading

_log = logging.getLogger("hipdiffusion")
_lock = threading.Lock()
_counts: "collections.Counter[tuple[str, str]]" = collections.Counter()


# HIPDIFFUSION_DISABLE=1 (read at import) turns every op into its fallback; set_enabled() at run time.
# A module flag, not an environment read per call: os.environ.get cost 2 us a call here.
_disabled = os.environ.get("HIPDIFFUSION_DISABLE", "") not in ("", "0")


def disabled() -> bool:
    return _disabled


def set_enabled(enabled: bool) -> None:
    """False sends every op to PyTorch's own (as HIPDIFFUSION_DISABLE=1 does from the start); True
    gives the engine's kernels back."""
    global _disabled
    _disabled = not enabled


def record(op: str, reason: str) -> None:
    """Counts one fallback of `op`; the first time a reason is seen it is logged as a warning."""
    with _lock:
        first = (op, reason) not in _counts
        _counts[(op, reason)] += 1
    if first:
        _log.warning("hipdiffusion.%s falls back to PyTorch: %s", op, reason)


def fallback_report() -> list[dict]:
    """Every (op, reason) that fell back since the start (or the last reset), most frequent first."""
    with _lock:
        items = _counts.most_common()
    return [{"op": op, "reason": reason, "count": count} for (op, reason), count in items]


def reset_fallback_report() -> None:
    with _lock:
        _counts.clear()
