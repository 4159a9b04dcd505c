"""The matrix's rows: raw probes turned into yes/no cells with their details.

:func:`finalise` turns what the namespace child measured into JSON: per resolver and
variant the probes (answers, upstream cost, qname minimisation), the distinct log lines
worth reading, and one cell per row of :data:`ROWS` (compared with our aware resolver's
answers to the same intents; ``rank order`` with the rankings the leaves answered
themselves, :func:`rank_counts`).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from sim.interop.probe import by_priority, minimised

ROWS = ("option forwarded", "cursor walk", "qname walk", "expanded SRV", "A", "DNSSEC",
        "DNSSEC denial", "rank order", "DNS-native drafts")
#: the denial probes (sim.interop.probe.denial_probes): expected RCODE and answer type
DENIAL = {"NXDOMAIN": ("NXDOMAIN", None),
          "NXDOMAIN below an empty non-terminal": ("NXDOMAIN", None),
          "NODATA": ("NOERROR", None), "DS": ("NOERROR", "DS"),
          "DNSKEY": ("NOERROR", "DNSKEY")}

_QUIRK = re.compile(r"error|fail|refus|lame|bogus|badvers|formerr|bailiwick|denied|warn|"
                    r"not allowed|insecure|servfail|validat|ignor|dnssec|unable|cannot|"
                    r"timed out|timeout|no answer|throttl|too many|unreachable|mismatch",
                    re.I)
_NOISE = re.compile(r"^###|within bailiwick|stats for thread|histogram|recursion processing|"
                    r"requestlist|lower\(secs\)|\[25%\]|built with|algorithms:|TKEY mode|"
                    r"NOT using IPv6|Aggressive NSEC|init module", re.I)


def log_quirks(text: str, limit: int = 30, workdir: str = "") -> list[str]:
    """Distinct log lines worth reading (errors, refusals, validation), time stamps and the
    temporary folder's path cut."""
    seen: dict[str, None] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if workdir:
            line = re.sub(re.escape(workdir) + r"/[^/\s']*", "<dir>", line)
        if not line or _NOISE.search(line) or not _QUIRK.search(line):
            continue
        line = re.sub(r"^\[\d+\] ", "", line)  # unbound: [epoch]
        line = re.sub(r"^\d{2}-\w{3}-\d{4} [\d:.]+ ", "", line)  # named -g
        line = re.sub(r"^\w{3} \d+ [\d:]+ ", "", line)  # pdns / dnsdist
        line = re.sub(r"\[\d+:\d+\]", "", line)  # unbound: [pid:thread]
        line = re.sub(r' (tid|ts)="[^"]*"', "", line)  # pdns structured logging
        seen.setdefault(line[:300])
        if len(seen) >= limit:
            break
    return list(seen)


def _cell(ok: bool | None, detail: str) -> dict:
    return {"cell": "skip" if ok is None else ("yes" if ok else "no"), "detail": detail}


def _probe_view(p: dict) -> dict:
    """A probe as JSON: its answer, cost (and the servers' side behind a proxy)."""
    w = p["window"]
    out = {"qname": p["qname"], **({"intent": p["intent"]} if p["intent"] else {}),
           "answer": p["answer"].as_dict(), "cost": w.cost}
    if w.behind is not None:
        out["servers_cost"] = w.behind
    cost = out["cost"]
    out["minimised"] = minimised(cost.get("asked", []), p["qname"])
    return out


def finalise(out: dict, meta: dict) -> dict:
    """Turn the raw probes into rows of the matrix plus per-probe answers and costs."""
    ref = meta["reference"]
    i1, i2 = meta["intents"]
    aware = {v: {k: _probe_view(p) for k, p in probes.items()}
             for v, probes in out["aware"].items()}
    result: dict[str, Any] = {"meta": meta, "aware": aware, "resolvers": {}}
    for name, res in out["resolvers"].items():
        row: dict[str, Any] = {k: v for k, v in res.items() if k != "variants"}
        row["variants"] = {}
        for variant, vres in res["variants"].items():
            sessions = vres.pop("sessions", {})
            probes = {k: _probe_view(p) for s in sessions.values() for k, p in s.items()}
            logs = vres.pop("logs", {})
            quirks: list[str] = []
            for path in dict.fromkeys(logs.values()):
                with contextlib.suppress(OSError):
                    quirks += log_quirks(Path(path).read_text(encoding="utf-8",
                                                              errors="replace"),
                                         workdir=str(Path(path).parent))
            row["variants"][variant] = {**vres, "probes": probes, "logs": logs,
                                        "log_lines": list(dict.fromkeys(quirks))}
        row["rows"] = _rows(row, ref, i1, i2, meta)
        result["resolvers"][name] = row
    return result


def _answer_text(probe: dict | None) -> str:
    if probe is None:
        return "not measured"
    a = probe["answer"]
    if a.get("error"):
        return a["error"]
    bits = [a.get("rcode", "")]
    if a.get("cnames"):
        bits.append(f"{len(a['cnames'])} CNAME")
    if a.get("srv") is not None:
        bits.append(f"{len(a.get('srv', []))} SRV")
    return " ".join(bits)



def _failed(v: dict | None, what: str) -> dict | None:
    """The cell of a variant that was not run or failed (None: it ran)."""
    if v is None:
        return {"cell": "skip", "detail": f"the {what} variant was not run"}
    if v.get("status") == "failed":
        return {"cell": "failed", "detail": v.get("error", "")}
    return None


def _rows(row: dict, ref: dict, i1: str, i2: str, meta: dict) -> dict:
    """One resolver's cells, by row (``ref``: the aware resolver's targets per intent)."""
    status = row.get("status", "ok")
    if status == "not installed":
        return {r: {"cell": "not installed", "detail": row.get("error", "")} for r in ROWS}
    plain = row["variants"].get("plain")
    bad = _failed(plain, "plain")
    pr = plain["probes"] if plain and not bad else {}
    rows = _cursor_rows(pr, bad, ref, i1, i2, row.get("kind") == "proxy")
    rows["qname walk"] = _qname_row(pr, bad, ref, i1, i2)
    rows |= _plain_rows(pr, bad, meta)
    rows["DNSSEC"] = _dnssec_row(row["variants"].get("dnssec"), ref, i1, meta)
    rows["DNSSEC denial"] = _denial_row(row["variants"].get("dnssec"),
                                        row.get("kind") == "proxy")
    rows["rank order"] = _rank_row(pr, bad, meta)
    rows["DNS-native drafts"] = _drafts_row(pr, bad, meta)
    return rows


def _drafts_row(pr: dict, bad: dict | None, meta: dict) -> dict:
    """Every draft's question answered NOERROR with its type (SVCB, HTTPS, TLSA, TXT, PTR,
    SRV: no new record types, none special to a resolver), and the host's address."""
    if bad and "DNS-SD TXT" not in pr:
        return bad
    failed = []
    for key, _, qtype in meta.get("drafts", []):
        p = pr.get(key)
        if p is None:
            failed.append(f"{key}: not run")
        elif p["answer"].get("rcode") != "NOERROR" or qtype not in p["answer"].get("types", []):
            failed.append(f"{key}: {_answer_text(p)}")
    host, address = meta.get("draft_host", ("", ""))
    a = pr.get("draft host A")
    if a is None or a["answer"].get("a") != [address]:
        failed.append(f"{host} A: {_answer_text(a)}")
    if not meta.get("drafts"):
        return _cell(None, "not run")
    asked = len(meta["drafts"]) + 1
    return _cell(not failed, "; ".join(failed) if failed else f"{asked}/{asked} answered")


def rank_counts(probes: dict, meta: dict) -> dict[str, Any]:
    """The rank probes of one resolver against the leaves' own rankings: ``intents`` asked,
    ``answered`` (the leaf's records, in any order), ``in_order`` (the RRset as received
    already in the leaf's order), ``by_priority`` (the leaf's order read back from SRV
    priority, as the agent reads it), ``numbered`` (the leaf numbered its records 0, 1, …)
    and the intents whose order was lost (``lost``)."""
    out: dict[str, Any] = {"intents": 0, "answered": 0, "in_order": 0, "by_priority": 0,
                           "numbered": 0, "records": [], "lost": []}
    for n, intent in enumerate(meta.get("rank_intents", [])):
        want, priorities = meta["ranking"][intent]
        out["intents"] += 1
        out["numbered"] += list(priorities) == list(range(len(want)))
        out["records"].append(len(want))
        p = probes.get(f"rank {n}")
        answer = p["answer"] if p else {}
        got = answer.get("srv", [])
        out["answered"] += sorted(got) == sorted(want)
        out["in_order"] += got == want
        if by_priority(got, answer.get("priority", [])) == want:
            out["by_priority"] += 1
        else:
            out["lost"].append(intent)
    return out


def _rank_row(pr: dict, bad: dict | None, meta: dict) -> dict:
    """``rank order``: the leaf's top K keeps its order through the resolver, read from SRV
    priority (RRset order, which resolvers shuffle, is reported beside it)."""
    if bad and "rank 0" not in pr:
        return bad
    c = rank_counts(pr, meta)
    n = c["intents"]
    if not n:
        return _cell(None, "no intent with two or more records to rank")
    sizes = f"{min(c['records'])}–{max(c['records'])}" if c["records"] else "0"
    detail = (f"leaf order read from SRV priority {c['by_priority']}/{n}; RRset order as "
              f"received {c['in_order']}/{n}; leaf records returned {c['answered']}/{n}; "
              f"leaf numbered 0, 1, … {c['numbered']}/{n} (K = {meta.get('rank_k')}, "
              f"{sizes} records)")
    if c["lost"]:
        detail += f"; order lost for {c['lost'][:3]}"
    return _cell(c["by_priority"] == n == c["numbered"], detail)


def _cursor_rows(pr: dict, bad: dict | None, ref: dict, i1: str, i2: str,
                 proxy: bool) -> dict[str, dict]:
    """``option forwarded`` and ``cursor walk`` from the plain variant's cursor probes."""
    rows: dict[str, dict] = {}
    cold = pr.get("cursor cold")
    if bad and "cursor cold" not in pr:
        rows["option forwarded"] = bad
        rows["cursor walk"] = bad
    elif cold is None:
        rows["option forwarded"] = _cell(None, "cursor probe not run")
        rows["cursor walk"] = _cell(None, "cursor probe not run")
    else:
        c = cold["cost"]
        where = "backend (our aware resolver)" if proxy else "the hierarchy's servers"
        fwd = c.get("intent_option_queries", 0) > 0
        detail = (f"{c.get('intent_option_queries', 0)}/{c.get('queries', 0)} queries to "
                  f"{where} carried 65432; EDNS option codes seen: "
                  f"{c.get('option_codes') or 'none'}" + ("; DO set" if c.get("do") else ""))
        if proxy and "servers_cost" in cold:
            s = cold["servers_cost"]
            detail += (f"; behind it {s.get('intent_option_queries', 0)}/"
                       f"{s.get('queries', 0)} queries to the servers carried 65432")
        rows["option forwarded"] = _cell(fwd, detail)
        walked = []
        for key, intent in (("cursor cold", i1), ("cursor warm", i2), ("cursor repeat", i1)):
            p = pr.get(key)
            got = sorted(p["answer"].get("srv", [])) if p else []
            walked.append(bool(got) and got == ref.get(intent))
        first = pr["cursor cold"]["answer"]
        ok = all(walked)
        detail = (f"{_answer_text(cold)}; expected {len(ref.get(i1, []))} SRV "
                  f"{ref.get(i1)}" if not ok else
                  f"{len(first.get('srv', []))} SRV = the aware resolver's (cold, warm, "
                  f"repeat)")
        if not ok and any(walked):
            detail += f"; cold/warm/repeat: {walked}"
        rows["cursor walk"] = _cell(ok, detail)
    return rows


def _qname_row(pr: dict, bad: dict | None, ref: dict, i1: str, i2: str) -> dict:
    """``qname walk``: the intent in the QNAME, against the aware resolver's targets."""
    if bad and "qname cold" not in pr:
        return bad
    if "qname cold" not in pr:
        return _cell(None, "qname probe not run")
    walked, notes = [], []
    for key, intent in (("qname cold", i1), ("qname warm", i2), ("qname repeat", i1)):
        p = pr.get(key)
        got = sorted(p["answer"].get("srv", [])) if p else []
        walked.append(bool(got) and got == ref.get(intent))
    qa = pr["qname cold"]["answer"]
    targets = qa.get("srv", [])
    extra = qa.get("additional_a", {})
    follow = [pr.get(f"qname follow-up A {n}") for n in range(len(targets))]
    follow_ok = sum(1 for f in follow if f and f["answer"].get("a"))
    notes.append(f"{_answer_text(pr['qname cold'])}; CNAME chain "
                 f"{len(qa.get('cnames', []))}; A in additional "
                 f"{sum(t in extra for t in targets)}/{len(targets)}; follow-up A "
                 f"{follow_ok}/{len(targets)}")
    if not all(walked):
        notes.append(f"cold/warm/repeat match the aware resolver: {walked}; expected "
                     f"{ref.get(i1)}")
    return _cell(all(walked), "; ".join(notes))


def _plain_rows(pr: dict, bad: dict | None, meta: dict) -> dict[str, dict]:
    """``expanded SRV`` and ``A``: the whole RRset and the address its own server gives."""
    rows: dict[str, dict] = {}
    for key, want, label in (("expanded SRV", meta["expected_srv"], "expanded SRV"),
                             ("A", [meta["expected_a"]], "A")):
        p = pr.get(key)
        if bad and p is None:
            rows[label] = bad
        elif p is None:
            rows[label] = _cell(None, "not run")
        else:
            got = sorted(p["answer"].get("srv" if key != "A" else "a", []))
            ok = got == sorted(want)
            rows[label] = _cell(ok, f"{_answer_text(p)}" + ("" if ok else
                                                            f"; expected {sorted(want)}"))
    return rows


def _dnssec_row(sec: dict | None, ref: dict, i1: str, meta: dict) -> dict:
    """``DNSSEC``: AD on the target's A and on the qname walk, in the signed variant."""
    bad = _failed(sec, "dnssec")
    sp = sec["probes"] if sec and not bad else {}
    if bad and "A" not in sp:
        return bad
    a, q = sp.get("A"), sp.get("qname cold")
    a_ok = bool(a and a["answer"].get("ad") and a["answer"].get("a") == [meta["expected_a"]])
    bits = [f"A: {_answer_text(a)}{' AD' if a and a['answer'].get('ad') else ' no AD'}"]
    ok = a_ok
    if q is not None:
        got = sorted(q["answer"].get("srv", []))
        q_ok = bool(q["answer"].get("ad")) and got == ref.get(i1)
        bits.append(f"qname walk: {_answer_text(q)}"
                    f"{' AD' if q['answer'].get('ad') else ' no AD'}"
                    + ("" if got == ref.get(i1) or not got else " (targets differ)"))
        ok = ok and q_ok
    else:
        bits.append("qname walk: not run")
    e = sp.get("expanded SRV")
    if e is not None:
        bits.append(f"expanded SRV: {_answer_text(e)}"
                    f"{' AD' if e['answer'].get('ad') else ' no AD'}")
    return _cell(ok, "; ".join(bits))


def _denial_row(sec: dict | None, proxy: bool) -> dict:
    """``DNSSEC denial``: NXDOMAIN (also below an empty non-terminal) and NODATA validated
    (the RCODE, AD, nothing in the answer), the leaf's DS and DNSKEY answered with AD."""
    if proxy:
        return _cell(None, "not asked: behind the proxy is our resolver, which validates "
                           "answers and delegations but no denial of existence")
    bad = _failed(sec, "dnssec")
    sp = sec["probes"] if sec and not bad else {}
    if bad and not sp:
        return bad
    ok, bits = True, []
    for key, (rcode, kind) in DENIAL.items():
        p = sp.get(key)
        if p is None:
            ok = False
            bits.append(f"{key}: not measured")
            continue
        a = p["answer"]
        types = [t for t in a.get("types", []) if t != "RRSIG"]
        good = (not a.get("error") and a.get("rcode") == rcode and bool(a.get("ad"))
                and (types == [kind] if kind else not types))
        ok = ok and good
        bits.append(f"{key}: {a.get('error') or a.get('rcode')}"
                    f"{' ' + ','.join(types) if types else ''}"
                    f"{' AD' if a.get('ad') else ' no AD'}")
    return _cell(ok, "; ".join(bits))
