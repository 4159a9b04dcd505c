"""The matrix as markdown: the compatibility table, each cell's detail, the upstream cost
against our aware resolver, the rank order per resolver, and the resolvers' log lines
worth reading."""

from __future__ import annotations

from sim.interop.rows import ROWS, rank_counts


def matrix_markdown(result: dict) -> str:
    """The compatibility matrix: one row per probe, one column per resolver."""
    names = list(result["resolvers"])
    lines = ["| probe | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for row in ROWS:
        cells = [result["resolvers"][n]["rows"].get(row, {}).get("cell", "") for n in names]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details_markdown(result: dict) -> str:
    """Each cell's detail, per resolver."""
    out = []
    for name, res in result["resolvers"].items():
        version = result.get("meta", {}).get("versions", {}).get(name, "")
        out.append(f"**{name}** ({version or res.get('status')}, {res.get('address')}):")
        for row in ROWS:
            cell = res["rows"].get(row, {})
            detail = cell.get("detail", "").replace("\n", " ")
            out.append(f"- {row}: {cell.get('cell', '')} — {detail}")
        out.append("")
    return "\n".join(out).rstrip()


COST_PROBES = (("cursor cold", "cursor walk, first intent"),
               ("cursor warm", "cursor walk, second intent"),
               ("cursor repeat", "cursor walk, first again"),
               ("qname cold", "qname walk, first intent"),
               ("qname warm", "qname walk, second intent"),
               ("qname repeat", "qname walk, first again"),
               ("A", "A of a tool target"),
               ("expanded SRV", "expanded SRV"))
#: which aware-resolver probe a resolver's probe is compared with: the qname walk does
#: through a stock recursor what the cursor walk does through ours
BASELINE = {"qname cold": "cursor cold", "qname warm": "cursor warm",
            "qname repeat": "cursor repeat"}


def _server_side(probe: dict) -> dict:
    return probe.get("servers_cost") or probe.get("cost") or {}


def cost_rows(result: dict, variant: str = "plain") -> list[dict]:
    """Upstream queries and bytes per probe and resolver, with the ratio against our aware
    resolver on the matching probe (queries and bytes that reached the servers)."""
    aware = result.get("aware", {}).get(variant, {})
    rows = []
    for name, res in result["resolvers"].items():
        probes = res.get("variants", {}).get(variant, {}).get("probes", {})
        for key, label in COST_PROBES:
            p = probes.get(key)
            if p is None:
                continue
            c = _server_side(p)
            base = aware.get(BASELINE.get(key, key))
            b = base["cost"] if base else {}
            rows.append({
                "resolver": name, "probe": key, "label": label,
                "ok": bool(p["answer"].get("srv") or p["answer"].get("a")),
                "queries": c.get("queries", 0), "bytes": c.get("bytes", 0),
                "minimised": p.get("minimised", False),
                "aware_probe": BASELINE.get(key, key) if base else None,
                "aware_queries": b.get("queries"), "aware_bytes": b.get("bytes"),
                "query_ratio": (round(c.get("queries", 0) / b["queries"], 2)
                                if b.get("queries") else None),
                "byte_ratio": (round(c.get("bytes", 0) / b["bytes"], 2)
                               if b.get("bytes") else None),
            })
    return rows


def cost_markdown(result: dict, variant: str = "plain") -> str:
    """The upstream cost table: our aware resolver's probes, then :func:`cost_rows`."""
    aware = result.get("aware", {}).get(variant, {})
    lines = ["| resolver | probe | answered | upstream queries | bytes | qname min. | "
             "aware: queries | aware: bytes | × queries | × bytes |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for key, _ in COST_PROBES:
        p = aware.get(key)
        if p is not None:
            c, a = p["cost"], p["answer"]
            answered = "yes" if a.get("srv") or a.get("a") else "no"
            lines.append(f"| aware (ours) | {key} | {answered} "
                         f"| {c.get('queries', 0)} | {c.get('bytes', 0)} | "
                         f"{'yes' if p.get('minimised') else 'no'} | | | | |")
    for r in cost_rows(result, variant):
        lines.append(
            f"| {r['resolver']} | {r['probe']} | {'yes' if r['ok'] else 'no'} | "
            f"{r['queries']} | {r['bytes']} | {'yes' if r['minimised'] else 'no'} | "
            f"{'' if r['aware_queries'] is None else r['aware_queries']} | "
            f"{'' if r['aware_bytes'] is None else r['aware_bytes']} | "
            f"{'' if r['query_ratio'] is None else r['query_ratio']} | "
            f"{'' if r['byte_ratio'] is None else r['byte_ratio']} |")
    return "\n".join(lines)


def model_markdown(result: dict) -> str:
    """Per recursor, the resolver model with its profile (``resolver_model``) beside the
    binary: probes whose upstream names are alike (:func:`sim.interop.model.alike`), the
    queries each sent in all, and the binary's retransmissions (not compared)."""
    lines = ["| recursor | probes asked alike | binary: queries | model: queries | "
             "binary: resent | differ |", "|---|---:|---:|---:|---:|---|"]
    for name, probes in result.get("model", {}).items():
        same = sum(p["same"] for p in probes.values())
        binary = sum(len(p["binary"]) for p in probes.values())
        model = sum(len(p["model"]) for p in probes.values())
        differ = ", ".join(k for k, p in probes.items() if not p["same"]) or "none"
        resent = sum(p.get("resent", 0) for p in probes.values())
        lines.append(f"| {name} | {same}/{len(probes)} | {binary} | {model} | {resent} | "
                     f"{differ} |")
    return "\n".join(lines)


def rank_markdown(result: dict) -> str:
    """Per resolver, the rank probes: how often the RRset arrived in the leaf's order, and
    how often the order read from SRV priority (what the agent uses) was the leaf's."""
    meta = result.get("meta", {})
    lines = [f"| resolver | intents (K = {meta.get('rank_k', '?')}) | leaf's records | "
             "RRset order kept | order from SRV priority |",
             "|---|---:|---:|---:|---:|"]
    for name, res in result["resolvers"].items():
        probes = res.get("variants", {}).get("plain", {}).get("probes", {})
        if not any(k.startswith("rank ") for k in probes):
            continue
        c = rank_counts(probes, meta)
        n = c["intents"]
        lines.append(f"| {name} | {n} | {c['answered']}/{n} | {c['in_order']}/{n} | "
                     f"{c['by_priority']}/{n} |")
    return "\n".join(lines)


def quirks_markdown(result: dict) -> str:
    """Up to 15 log lines worth reading per resolver and variant."""
    out = []
    for name, res in result["resolvers"].items():
        for variant, v in res.get("variants", {}).items():
            lines = v.get("log_lines", [])
            if lines:
                out.append(f"**{name}** ({variant}):")
                out += [f"    {line}" for line in lines[:15]]
    return "\n".join(out)
