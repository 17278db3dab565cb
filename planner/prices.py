"""GPU price tables: each catalog GPU's sourced prices, by provider and basis, and the one price a comparison uses.

A ``hardware/*.yaml`` file lists ``prices:`` — entries of :class:`PriceEntry` (provider, basis, region,
USD per GPU-hour, url, date, note).  Its top-level ``price_usd_per_hour`` is the *default* on-demand price
and must equal one of its on-demand entries (:func:`check_table`).

:func:`price_for` chooses a GPU's price on one basis, so that every GPU in a comparison is priced on the same
basis: the catalog's default entry for ``on-demand`` (no provider named), else the cheapest entry of the basis
(of the named provider; ``cheapest`` for the cheapest of every provider).  A GPU with no entry of the basis has
no price: the fleet engine leaves it out and says why, never pricing it on another basis.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.quoting import refuse_control_characters

__all__ = ["CHEAPEST", "PRICE_BASES", "PriceBasis", "PriceEntry", "check_table", "describe", "price_for"]

PriceBasis = Literal["on-demand", "reserved-1y", "reserved-3y", "spot"]
PRICE_BASES: tuple[str, ...] = get_args(PriceBasis)
#: ``price_provider`` value asking for the cheapest entry of the basis across every provider.
CHEAPEST = "cheapest"


class PriceEntry(BaseModel):
    """One sourced price of one GPU: what a provider charges per GPU-hour on one basis, where and when."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    _no_control_characters = field_validator("*")(refuse_control_characters)

    provider: str = Field(min_length=1, description="who rents it, e.g. 'Lambda', 'AWS', 'RunPod Secure Cloud'")
    basis: PriceBasis = Field(description="on-demand | reserved-1y | reserved-3y | spot (preemptible)")
    region: str = Field(min_length=1, description="region or 'not stated' (providers with one list price)")
    usd_per_hour: Annotated[float, Field(gt=0, le=1000)] = Field(description="USD per GPU-hour (per GPU, not per "
                                                                             "instance)")
    url: str = Field(min_length=1, description="the price page (or the citation that quotes it)")
    date: str = Field(min_length=4, description="date the page gives, or the date read (the note says which)")
    note: str = Field("", description="instance, how the per-GPU figure was derived, how it was read")


def _same_price(a: float, b: float) -> bool:
    """Two USD/hour figures equal to within float noise (1e-9 relative, 1e-9 USD below one dollar)."""
    return abs(a - b) <= 1e-9 * max(1.0, a)


def check_table(price_usd_per_hour: float, prices: tuple[PriceEntry, ...]) -> None:
    """Raise ValueError naming ``price_usd_per_hour`` when a table is given and the default price is not one of its
    on-demand entries."""
    on_demand = [p.usd_per_hour for p in prices if p.basis == "on-demand"]
    if prices and not any(_same_price(x, price_usd_per_hour) for x in on_demand):
        listed = ", ".join(f"{x:g}" for x in on_demand) or "none"
        raise ValueError(f"price_usd_per_hour: {price_usd_per_hour:g} is not one of the on-demand prices of the "
                         f"table ({listed}); the default price must be one of them")


def _default_entry(gpu) -> PriceEntry:
    """The on-demand entry the catalog's ``price_usd_per_hour`` is (a table-less GPU: one made of it and its source)."""
    for p in getattr(gpu, "prices", ()) or ():
        if p.basis == "on-demand" and _same_price(p.usd_per_hour, gpu.price_usd_per_hour):
            return p
    src = gpu.sources.get("price_usd_per_hour") if isinstance(getattr(gpu, "sources", None), dict) else None
    return PriceEntry(provider="catalog", basis="on-demand", region="not stated", usd_per_hour=gpu.price_usd_per_hour,
                      url=getattr(src, "url", "") or "catalog", date=getattr(src, "date", "") or "unknown",
                      note=getattr(src, "note", ""))


def price_for(gpu, basis: str = "on-demand", provider: str | None = None) -> tuple[PriceEntry | None, str]:
    """``(entry, why)``: the price of ``gpu`` on ``basis`` — the default entry for on-demand with no provider, else the
    cheapest entry of the basis (of ``provider``, matched case-insensitively; ``cheapest``: of any provider).
    ``entry`` is None when the GPU has no such price, ``why`` then says so and lists what it has."""
    if basis not in PRICE_BASES:
        raise ValueError(f"price_basis: expected one of {', '.join(PRICE_BASES)}, got '{basis}'")
    if basis == "on-demand" and provider is None:
        return _default_entry(gpu), ""
    table = tuple(getattr(gpu, "prices", ()) or ()) or (_default_entry(gpu),)
    named = provider is not None and provider.lower() != CHEAPEST
    pool = [p for p in table if p.basis == basis and (not named or p.provider.lower() == provider.lower())]
    if pool:
        return min(pool, key=lambda p: (p.usd_per_hour, p.provider, p.region)), ""
    has = sorted({f"{p.provider} {p.basis}" for p in table})
    whose = f" from {provider}" if named else ""
    return None, (f"{gpu.id}: no {basis} price{whose} in its price table (it has: {', '.join(has)}); left out rather "
                  "than priced on another basis")


def describe(entry: PriceEntry) -> str:
    """The price's provenance in one line: provider, basis, region, date and page."""
    return f"{entry.provider} {entry.basis}, {entry.region}, {entry.date} ({entry.url})"
