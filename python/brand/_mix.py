"""Mixtures of datasets: the ``mix=`` text a gateway reads.

A mixture is written ``web:0.7,code:0.2,books:0.1``: components
``dataset:weight`` in order (the order numbers the components and breaks the
gateway's rounding ties, so it is part of the epoch order), names distinct,
weights positive decimals with at most six digits after the point. Only the
weights' ratios matter to the order: the gateway scales them to integers and
divides out their greatest common divisor, whose sum must stay within 2^31.

:func:`format_mix` checks a mixture as the gateway's parser does (api.ParseMix)
and writes it in one canonical form, so that a mixture given as text, a dict or
pairs is sent, compared in a checkpoint and echoed (``Brand-Mix``) the same
way. Checking here, where the mixture is given, turns the gateway's 400 into a
``ValueError`` at construction instead of one in every DataLoader worker.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from typing import Any, Iterable, List, Mapping, Tuple, Union

__all__ = ["MixSpec", "format_mix", "mix_components"]

#: A mixture as :func:`format_mix` takes it: ``"web:0.7,code:0.3"``,
#: ``{"web": 0.7, "code": 0.3}`` (in the dict's order) or ``[("web", 0.7),
#: ("code", 0.3)]``; a weight is an ``int``, ``float``, ``Decimal`` or decimal
#: string.
MixSpec = Union[str, Mapping[str, Any], Iterable[Tuple[str, Any]]]

#: Digits a weight may have after its decimal point (the gateway's
#: api.MaxMixWeightDecimals).
MAX_WEIGHT_DECIMALS = 6
# The reduced integer weights' largest sum (shuffle.MaxMixWeightSum).
_MAX_WEIGHT_SUM = 1 << 31
# A weight's text as the gateway reads it (api.plainDecimal): 7, 0.7, 7.;
# not .7, 1e3, +1, 0x10 or 1_0.
_PLAIN_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?")


def format_mix(mix: MixSpec) -> str:
    """The mixture ``mix`` as the gateway's ``mix=`` text, in canonical form:
    weights without trailing zeros (``0.70`` is ``0.7``, ``2.0`` is ``2``),
    no spaces.

    >>> format_mix({"web": 0.7, "code": 0.2, "books": 0.1})
    'web:0.7,code:0.2,books:0.1'
    >>> format_mix("web: 0.70, code:3")
    'web:0.7,code:3'

    Raises:
        ValueError: no component, a name empty, repeated or holding ``,`` or
            ``:``, a weight not a positive decimal or with more than six
            decimals, or weights so finely divided that their integer ratios
            sum past 2^31.
        TypeError: ``mix`` is none of the forms above.
    """
    return ",".join(f"{name}:{w}" for name, w in mix_components(mix))


def mix_components(mix: MixSpec) -> List[Tuple[str, str]]:
    """The components of ``mix`` in order, as (dataset, weight text) pairs
    in :func:`format_mix`'s canonical form; raises as it does."""
    out: List[Tuple[str, str]] = []
    seen = set()
    for name, w in _pairs(mix):
        if not isinstance(name, str):
            raise TypeError(f"brand: mixture component name {name!r} is not a string")
        if not name or "," in name or ":" in name or name != name.strip():
            raise ValueError(f"brand: mixture component name {name!r}: a dataset's name, without ',' ':' or "
                             "surrounding spaces")
        if name in seen:
            raise ValueError(f"brand: mixture names dataset {name!r} twice")
        seen.add(name)
        out.append((name, _weight_text(name, w)))
    if not out:
        raise ValueError("brand: a mixture needs at least one component, such as web:0.7,code:0.3")
    _check_sum(out)
    return out


def _pairs(mix: MixSpec) -> List[Tuple[Any, Any]]:
    if isinstance(mix, str):
        pairs = []
        for part in mix.split(","):
            name, colon, w = part.partition(":")
            if not colon or not name.strip() or not w.strip():
                raise ValueError(f"brand: mixture component {part.strip()!r}: each is dataset:weight, "
                                 "such as web:0.7")
            pairs.append((name.strip(), w.strip()))
        return pairs
    if isinstance(mix, Mapping):
        return list(mix.items())
    if isinstance(mix, (bytes, bytearray)) or not isinstance(mix, Iterable):
        raise TypeError(f"brand: a mixture is text, a dict or (dataset, weight) pairs, not {type(mix).__name__}")
    pairs = []
    for p in mix:
        t = None if isinstance(p, (str, bytes)) or not isinstance(p, Iterable) else tuple(p)
        if t is None or len(t) != 2:
            raise ValueError(f"brand: mixture component {p!r} is not a (dataset, weight) pair")
        pairs.append(t)
    return pairs


def _weight_text(name: str, w: Any) -> str:
    """``w`` as the gateway reads a weight: a plain positive decimal, at
    most MAX_WEIGHT_DECIMALS digits after the point, trailing zeros cut."""
    bad = f"brand: weight {w!r} of {name} must be a positive decimal with at most {MAX_WEIGHT_DECIMALS} decimals"
    if isinstance(w, bool):
        raise ValueError(bad)
    if isinstance(w, str):
        s = w.strip()
        if not _PLAIN_DECIMAL.fullmatch(s):
            raise ValueError(bad)
        d = Decimal(s)
    elif isinstance(w, Decimal):
        d = w
    elif isinstance(w, numbers.Integral):
        d = Decimal(int(w))
    elif isinstance(w, numbers.Real):
        f = float(w)
        if not math.isfinite(f):
            raise ValueError(bad)
        d = Decimal(repr(f))  # the shortest text that reads back as f: 0.1, not 0.1000000000000000055…
    else:
        raise ValueError(bad)
    if not d.is_finite() or d <= 0:
        raise ValueError(bad)
    d = d.normalize()
    exp = d.as_tuple().exponent
    assert isinstance(exp, int)  # finite
    if -exp > MAX_WEIGHT_DECIMALS:
        raise ValueError(f"{bad}; round it")
    return format(d, "f")


def _check_sum(components: List[Tuple[str, str]]) -> None:
    """The gateway's bound on a mixture's weights: scaled to integers by
    the most decimals any has, then divided by their greatest common
    divisor, they must sum to at most 2^31."""
    ds = [Decimal(w) for _, w in components]
    dec = max(-min(d.as_tuple().exponent for d in ds), 0)  # type: ignore[operator]
    ints = [int(d.scaleb(dec)) for d in ds]
    g = 0
    for n in ints:
        g = math.gcd(g, n)
    if sum(ints) // g > _MAX_WEIGHT_SUM:
        text = ",".join(f"{n}:{w}" for n, w in components)
        raise ValueError(f"brand: mixture weights {text} are too finely divided (as integers they sum past 2^31); "
                         "round them")
