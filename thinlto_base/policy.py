"""The backend cache's limits, in lld's --thinlto-cache-policy syntax (LLVM's CachePruning policy strings).

`prune_interval=20m:prune_after=1w:cache_size=10%:cache_size_bytes=40g:cache_size_files=100000`, keys in any
order, each optional: prune_interval / prune_after take a number with s, m or h (LLVM's units; also d and w
here, so that lld's one-week default can be written); cache_size is a percentage of the space the cache
could use (its own size plus the free space of its file system); cache_size_bytes a number with an
optional k, m or g (binary units, as LLVM's); cache_size_files a count. 0 turns a limit off. Defaults are
LLVM's: prune every 20 minutes at most, entries unused for a week expire, 75% of the space, no byte limit,
a million files. Standard library only: the backend step imports it.
"""

from __future__ import annotations

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class PolicyError(ValueError):
    """A policy string that does not parse; the message names the key and the bad part."""


class CachePolicy:
    """Parsed limits (immutable by convention); seconds and bytes, 0 = no limit."""

    __slots__ = ("expiration_s", "interval_s", "max_bytes", "max_files", "percent")
    _FIELDS = ("interval_s", "expiration_s", "percent", "max_bytes", "max_files")

    def __init__(self, interval_s: int = 1200, expiration_s: int = 7 * 86400, percent: int = 75,
                 max_bytes: int = 0, max_files: int = 1_000_000) -> None:
        self.interval_s, self.expiration_s, self.percent = interval_s, expiration_s, percent
        self.max_bytes, self.max_files = max_bytes, max_files

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CachePolicy) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "CachePolicy({})".format(", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS))

    def _fields(self) -> tuple[int, ...]:
        return tuple(getattr(self, k) for k in self._FIELDS)


def _number(key: str, text: str, units: dict[str, int]) -> int:
    digits = text.rstrip("".join(u for u in units if u))
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in units:
        raise PolicyError(f"{key}={text!r}: expected a number with one of the units "
                          f"{', '.join(u for u in units if u) or 'none'}")
    return int(digits) * units[unit]


def parse_policy(text: str) -> CachePolicy:
    """TEXT (lld's --thinlto-cache-policy syntax) as a CachePolicy; PolicyError names what is wrong."""
    values: dict[str, int] = {}
    for item in text.split(":") if text else ():
        key, sep, value = item.partition("=")
        if not sep:
            raise PolicyError(f"{item!r}: expected KEY=VALUE")
        if key in ("prune_interval", "prune_after"):
            if not value or value[-1] not in _DURATION_UNITS:
                raise PolicyError(f"{key}={value!r}: expected a duration such as 20m (units s, m, h, d, w)")
            values[key] = _number(key, value, _DURATION_UNITS)
        elif key == "cache_size":
            if not value.endswith("%") or not value[:-1].isdigit() or int(value[:-1]) > 100:
                raise PolicyError(f"cache_size={value!r}: expected a percentage from 0% to 100%")
            values[key] = int(value[:-1])
        elif key == "cache_size_bytes":
            values[key] = _number(key, value.lower(), _SIZE_UNITS)
        elif key == "cache_size_files":
            values[key] = _number(key, value, {"": 1})
        else:
            raise PolicyError(f"unknown key {key!r} (known: prune_interval, prune_after, cache_size, "
                              "cache_size_bytes, cache_size_files)")
    default = CachePolicy()
    return CachePolicy(
        values.get("prune_interval", default.interval_s), values.get("prune_after", default.expiration_s),
        values.get("cache_size", default.percent), values.get("cache_size_bytes", default.max_bytes),
        values.get("cache_size_files", default.max_files),
    )
