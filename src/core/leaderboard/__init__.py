"""Leaderboard submissions (public API): `submit` packs finished runs into a bundle,
`verify_bundle` recomputes every number of one from its samples, data and judge, and
`write_site` builds a static leaderboard of verified bundles; `differences` lists where two
results differ, number by number (what `verify_bundle` reports)."""

from lceval.leaderboard._bundle import open_bundle, submit
from lceval.leaderboard._site import write_site
from lceval.leaderboard._verify import Verification, differences, format_verification, verify_bundle

__all__ = ["Verification", "differences", "format_verification", "open_bundle", "submit", "verify_bundle", "write_site"]
