"""The overlap schedule on a runtime's load path, agreed by every rank.

A SymmRuntime schedules its regions (magi_aot.schedule: the latest-safe
launch of every weight gather, within the memory bound) before anything
compiles or runs them. Every rank must issue its collectives in one order,
so the ranks first exchange, over the runtime's store, what decides that:
each region's canonical fingerprint, its collective skeleton (the
collective launches in order, with their groups) and a digest of its cost
keys. Then, on every rank alike:

- identical: every rank's fingerprints are equal: one schedule everywhere
  (the same graph, costs and options give the same order);
- pinned: the graphs differ (a compute node) but the skeletons are equal:
  each rank schedules its own graph; the pass never moves a launch past
  another, so each gather stays between the same collectives on every
  rank and the collectives keep one order; a measured cost table is used
  only where every rank's cost keys are the same, else the analytical
  model;
- abort: the skeletons differ: no rank reorders, and every rank's report
  names the rank and the first collective that differs.

Never a divergent order, never a hang: the exchange waits at most the
runtime's timeout and names the ranks that did not come.
"""
import json

from .._lib import MagiError

__all__ = ["agree", "describe_mismatch", "MODES"]

MODES = ("identical", "pinned", "abort")


def _describe(entry):
    if entry is None:
        return "nothing"
    kind, target, group = entry
    return "%s on group %s" % (target.rsplit(".", 1)[-1] if target else kind, group)


def describe_mismatch(skeletons):
    """None when every rank's skeletons are equal, else a sentence naming
    the first rank whose skeleton differs from rank 0's, the region and
    the first collective that differs. skeletons: {rank: [region skeleton,
    ...]}."""
    ranks = sorted(skeletons)
    base = skeletons[ranks[0]]
    for r in ranks[1:]:
        other = skeletons[r]
        if len(other) != len(base):
            return "rank %d has %d regions, rank %d has %d" % (r, len(other), ranks[0], len(base))
        for i, (a, b) in enumerate(zip(base, other)):
            if a == b:
                continue
            k = next((j for j in range(max(len(a), len(b)))
                      if j >= len(a) or j >= len(b) or a[j] != b[j]), 0)
            return ("region %d: rank %d's collective #%d is %s, rank %d's is %s (%d collectives "
                    "on rank %d, %d on rank %d)"
                    % (i, r, k + 1, _describe(b[k] if k < len(b) else None), ranks[0],
                       _describe(a[k] if k < len(a) else None), len(b), r, len(a), ranks[0]))
    return None


def agree(store_waits, store, prefix, rank, world, mine):
    """Exchange `mine` ({"fingerprints", "skeletons", "keys"}) with every
    rank over `store` under `prefix`, and decide. store_waits: the
    rendezvous' _Store (its waits name the ranks that did not come).
    Returns {"mode", "reason", "same_keys"} (the same on every rank)."""
    if world <= 1:
        return {"mode": "identical", "reason": None, "same_keys": True}
    store.set(prefix + "schedule/%d" % rank, json.dumps(mine).encode())
    keys = [prefix + "schedule/%d" % r for r in range(world)]
    store_waits.wait(keys, "publish its graph for the schedule")
    every = {}
    for r in range(world):
        raw = bytes(store.get(prefix + "schedule/%d" % r))
        try:
            v = json.loads(raw.decode("utf-8"))
            if not isinstance(v, dict) or not isinstance(v.get("skeletons"), list) or \
                    not isinstance(v.get("fingerprints"), list):
                raise ValueError("not a schedule record")
        except ValueError as e:
            raise MagiError(-4, "SymmRuntime: store key '%s' (rank %d's graph for the schedule) "
                            "is not valid: %s" % (prefix + "schedule/%d" % r, r, e)) from None
        every[r] = v
    same_keys = len({json.dumps(v.get("keys")) for v in every.values()}) == 1
    if len({json.dumps(v["fingerprints"]) for v in every.values()}) == 1:
        return {"mode": "identical", "reason": None, "same_keys": same_keys}
    why = describe_mismatch({r: v["skeletons"] for r, v in every.items()})
    if why is None:
        diff = next(r for r in sorted(every) if every[r]["fingerprints"] != every[0]["fingerprints"])
        return {"mode": "pinned", "same_keys": same_keys,
                "reason": "rank %d's graph differs from rank 0's, its collectives do not: each "
                          "gather stays between the same collectives on every rank" % diff}
    return {"mode": "abort", "same_keys": same_keys,
            "reason": "the ranks' collectives differ, so no rank reorders: " + why}
