"""The format of the results folders: every file ``tooldns run``, ``sweep``, ``eval``,
``report`` and ``--capture`` write, and every column or key in them with its unit and
meaning, optional ones marked with when they appear. ``docs/results.md`` is this module's
output (the per-scheme metrics come from ``analysis.metrics``):

    python3 -m analysis.columns --markdown > docs/results.md
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from analysis.metrics import EVAL_TABLE, METRICS, PHASE, SUMMARY


@dataclass(frozen=True)
class Field:
    name: str  # a column or key; ``<x>`` stands for a family (``http_<counter>``)
    unit: str
    meaning: str
    when: str = ""  # "" = always present; else when it appears

    def matches(self, name: str) -> bool:
        """Whether a written column or key is this field (a family matches by pattern)."""
        pattern = "".join(".+" if part.startswith("<") else re.escape(part)
                          for part in re.split(r"(<[^>]+>)", self.name) if part)
        return re.fullmatch(pattern, name) is not None


@dataclass(frozen=True)
class OutputFile:
    name: str
    written_by: str
    meaning: str
    fields: tuple[Field, ...] = ()
    when: str = ""  # "" = always written by ``written_by``


def _f(name: str, unit: str, meaning: str, when: str = "") -> Field:
    return Field(name, unit, meaning, when)


SESSION = "scenario with agents.session"
RECORDS = (
    _f("scenario", "", "scenario name"),
    _f("engine", "", "engine that ran it (simpy, live, ray, mininet, memory)"),
    _f("scheme", "", "scheme name (schemes[].name)"),
    _f("seed", "", "scenario seed"),
    _f("phase", "", "workload phase (0 without phases)"),
    _f("job", "", "index of the query in the workload"),
    _f("agent", "", "index of the agent that asked"),
    _f("query_id", "", "id of the query in the query set"),
    _f("query_source", "", "where the query came from (generated, dataset, churn probe ...)"),
    _f("intent", "", "the query text"),
    _f("service", "", "the service (category) the query is about"),
    _f("truth", "", "ground-truth tool ids, space-separated"),
    _f("returned", "", "tool ids returned, best first, space-separated"),
    _f("success", "bool", "an answer came back (and, for registries, no error)"),
    _f("hit_at_1", "bool", "the first answer is a ground-truth tool"),
    _f("hit_at_k", "bool", "a ground-truth tool is among the answers"),
    _f("tools_examined", "items", "items scored for the query C(q)"),
    _f("encodings", "encodings", "intent encodings for the query: ranking passes by a server, "
       "a registry search or an ANS client (one with send_embedding: the resolver's)"),
    _f("compute_ns", "ns", "search compute for the query under the search compute model "
       "(nodes.searchcost: encode per encoding plus per-item cost per item scored)"),
    _f("round_trips", "round trips", "sequential upstream round trips"),
    _f("exchanges", "exchanges", "upstream request/response exchanges"),
    _f("stub_attempts", "attempts", "tries of the agent's stub towards its resolver"),
    _f("sent_s", "s", "send time in workload time"),
    _f("latency_ms", "ms", "discovery latency"),
    _f("bytes_up", "bytes", "IP bytes sent towards the servers"),
    _f("bytes_down", "bytes", "IP bytes received"),
    _f("packets_up", "packets", "IP packets sent"),
    _f("packets_down", "packets", "IP packets received"),
    _f("servers_contacted", "servers", "distinct servers contacted"),
    _f("cache_hits", "hits", "resolver cache hits in the query's walks (any record kind; "
       "the walk may still have asked upstream: exchanges > 0)"),
    _f("cache_detail", "JSON", "cache hits by kind ({kind: count})"),
    _f("timeouts", "timeouts", "timed-out exchanges (stub and upstream)"),
    _f("retries", "retries", "upstream retries after a timeout"),
    _f("tcp_exchanges", "exchanges", "exchanges over TCP (or HTTP)"),
    _f("rcode", "", "DNS rcode of the answer (HTTP status for registries)"),
    _f("error", "", "why the query failed ('' if it did not)"),
    _f("during_fault", "bool", "sent while a fault was active", "scenario with faults"),
    _f("churn_probe", "", "the change a probe is about (-1: a workload query)",
       "scenario with workload.churn"),
    _f("churn_state", "", "a probe's old/new/mixed/absent/unknown/other/error state; "
       "old or mixed for a stale workload answer", "scenario with workload.churn"),
    _f("cap_<direction>", "bytes or packets",
       "captured cap_bytes_up/down, cap_packets_up/down attributed to the query",
       "run with --capture"),
    _f("session", "bool", "the scheme's agents keep a tool session", SESSION),
    _f("session_hit", "bool", "answered from the session without a search", SESSION),
    _f("tools_in_context", "tools", "tools bound in the agent's context", SESSION),
    _f("context_tokens", "tokens", "LLM tokens of the bound tools", SESSION),
    _f("evictions_<reason>", "tools", "tools evicted (evictions_ttl, _lru, _guard)", SESSION),
    _f("guard_trips", "", "the guard evicted the context", SESSION),
    _f("redundant_search", "bool", "searched although the session held the tool", SESSION),
    _f("fallback", "", "registry the session fell back to ('' if none)", SESSION),
    _f("rbac_filtered", "tools", "tools dropped by access control", SESSION),
    _f("fallback_tools", "tools", "tools the registry fallback returned", SESSION),
    _f("fallback_bytes_<direction>", "bytes", "modelled fallback bytes (up, down)", SESSION),
    _f("fallback_packets", "packets", "modelled fallback packets", SESSION),
    _f("fallback_delay_ms", "ms", "modelled fallback delay (part of latency_ms)", SESSION),
)
DNS_SERVER = "rows of DNS servers"
NODES = (
    _f("scenario", "", "scenario name"),
    _f("engine", "", "engine"),
    _f("scheme", "", "scheme name"),
    _f("seed", "", "scenario seed"),
    _f("node", "", "node address"),
    _f("role", "", "node role (root, tld, auth, resolver, agent, registry ...)"),
    _f("zone", "", "zone the node serves ('' if none)"),
    _f("rx_packets", "packets", "packets received"),
    _f("rx_bytes", "bytes", "bytes received"),
    _f("tx_packets", "packets", "packets sent"),
    _f("tx_bytes", "bytes", "bytes sent"),
    _f("semantic", "responses", "semantic (tool) answers", DNS_SERVER),
    _f("referral", "responses", "referrals", DNS_SERVER),
    _f("standard", "responses", "standard DNS answers", DNS_SERVER),
    _f("nxdomain", "responses", "NXDOMAIN answers", DNS_SERVER),
    _f("nodata", "responses", "NODATA answers", DNS_SERVER),
    _f("formerr", "responses", "FORMERR answers", DNS_SERVER),
    _f("packet_cache_hit", "responses", "answers from the server's packet cache", DNS_SERVER),
    _f("http_<counter>", "requests", "registry counters (connections, malformed, search, "
       "agents, capabilities, resolve ...)", "rows of HTTP registries"),
)
SUMMARY_KEYS = (
    _f("scenario", "", "scenario name"),
    _f("engine", "", "engine"),
    _f("seed", "", "scenario seed"),
    _f("namespace", "", "where the namespace came from (synthetic parameters or dataset)"),
    _f("namespace_stats", "", "zones, leaves, tools, queries, max_depth, max_branching, "
       "mean_leaf_size, max_leaf_size"),
    _f("schemes", "", "per scheme: the metrics below"),
    _f("phases", "", "per scheme: a list with one entry per workload phase (the metrics "
       "below)", "workload.phases > 1"),
    _f("replay", "", "per scheme: completed queries, warm_time_s, end_time_s, lost_packets, "
       "schedule_error_ms (and dot_opened/dot_closed with DNS over TLS); on live, Ray and "
       "Mininet a `fidelity` block: hops timed, per-hop excess over the model (median, p95, "
       "ms), the modelled hop, the busiest host process's CPU share, the tolerance, `within` "
       "and `why` (`sim/engines/fidelity.py`; the console prints it as one line, the report "
       "marks a run that is not within it)"),
    _f("provenance", "", "tooldns version, git commit, python, compiled modules (`tooldns "
       "compile`; else `[]`), platform, host, times, argv (not deterministic)"),
    _f("trust", "", "rogue_tools and per scheme policy, rogue_returned, queries_with_rogue, "
       "rogue_at_1, recall_at_k, recall_cost, latency_cost_ms ...",
       "namespace with rogue tools or a trust policy"),
    _f("faults", "", "bin_s and per scheme success during/outside faults, timeline, "
       "recovery, baseline, extra latency (docs/faults.md)", "scenario with faults"),
    _f("churn", "", "TTLs, probes, changes and per scheme visibility and staleness",
       "scenario with workload.churn"),
    _f("session", "", "per scheme with sessions: hits, evictions, fallbacks, tokens",
       SESSION),
    _f("capture", "", "pcap, tool, packets, dropped_by_kernel (tcpdump's count on exit) and "
       "per scheme captured vs accounted bytes and packets", "run with --capture"),
    _f("calibrated_processing_s", "s", "measured processing time per node kind",
       "processing.model: calibrated"),
    _f("mirror", "", "what one refresh of the drafts' catalogue mirror costs: source, "
       "servers, requests, bytes_up, bytes_down, packets, schemes (sim/run/mirror.py; not "
       "charged to any discovery)", "a scheme whose agents search a mirror (the drafts)"),
)
SCHEME_KEYS = tuple(_f(m.key, m.unit, m.meaning) for m in (METRICS[k] for k in SUMMARY))
PHASE_KEYS = (_f("phase", "", "the workload phase"),
              *(_f(m.key, m.unit, m.meaning) for m in (METRICS[k] for k in PHASE)))
PARTIAL_KEYS = (
    _f("complete", "bool", "false: an interrupted run"),
    _f("reason", "", "why the run stopped"),
    _f("finished_schemes", "", "schemes whose results are kept"),
    _f("unfinished_schemes", "", "schemes that did not finish"),
)
CHURN = (
    _f("scenario", "", "scenario name"), _f("engine", "", "engine"),
    _f("scheme", "", "scheme name"), _f("kind", "", "scheme kind (tooldns, agentdns, ans)"),
    _f("change", "", "index of the change"), _f("event", "", "the change's event"),
    _f("action", "", "add, remove or change"), _f("zone", "", "zone changed"),
    _f("tool_id", "", "tool changed"), _f("at_s", "s", "planned time of the change"),
    _f("applied_s", "s", "when it was applied (empty if never)"),
    _f("srv_ttl", "s", "SRV TTL of the run"), _f("probes_after", "probes",
                                                 "probes sent after the change"),
    _f("visible_after_s", "s", "delay until probes saw the change (empty if never)"),
    _f("last_stale_s", "s", "last stale answer after the change (empty if none)"),
    _f("stale_probe_answers", "answers", "stale answers to probes"),
    _f("stale_workload_answers", "answers", "stale answers to workload queries"),
    _f("stale_answers", "answers", "both"),
    _f("stale_sources", "JSON", "which cache served the stale answers ({source: count})"),
    _f("other_probe_answers", "JSON", "probe answers in other states ({state: count})"),
)
SWEEP_TABLE = (
    _f("point", "", "point id (points/<id>/)"),
    _f("<axis>", "", "the point's value of each grid axis (dotted field)"),
    _f("scheme", "", "scheme name"),
    _f("<metric>", "", "every key of the point's summary.json schemes.<scheme>"),
)
SWEEP_META = (
    _f("scenario", "", "scenario name"), _f("seed", "", "scenario seed"),
    _f("grid", "", "dotted field -> values"), _f("points", "", "point ids in grid order"),
    _f("ran", "", "points run by this invocation"),
    _f("skipped", "", "points already done (resumed)"),
    _f("failed", "", "point id -> error"),
    _f("intervals", "", "replications (a seed axis, seeds: N): method, seeds, baseline "
       "scheme, per scheme and per paired difference each metric's mean, lo, hi",
       "grid varies seed"),
    _f("provenance", "", "as in summary.json"),
)
INTERVAL_TABLE = (
    _f("<axis>", "", "each grid axis but seed"),
    _f("scheme", "", "scheme name"),
    _f("seeds", "", "replications finished", "intervals.csv"),
    _f("baseline", "", "the scheme subtracted (the first)", "paired.csv"),
    _f("pairs", "", "seeds both schemes finished", "paired.csv"),
    _f("<metric>", "", "the mean over the seeds (paired.csv: of scheme - baseline)"),
    _f("<metric>_lo", "", "lower end of its 95 % interval (Student t over the seeds)"),
    _f("<metric>_hi", "", "upper end"),
    _f("<metric>_half", "", "half-width"),
)
EVAL_PAIRED = (
    _f("method", "", "retrieval method"),
    _f("baseline", "", "the method subtracted (the first of the file; for a walk with a "
       "`…@plain` variant, also that variant: learned minus plain routing)"),
    _f("queries", "", "queries both answered"),
    _f("examined_frac", "", "the method's mean share of the query's pool scored"),
    _f("<metric>", "", "mean difference method - baseline over the queries (hit1_tool, "
       "hitk_tool, recall_k, rr)"),
    _f("<metric>_lo", "", "lower end of its 95 % interval (Student t over the queries)"),
    _f("<metric>_hi", "", "upper end"),
    _f("<metric>_excludes_zero", "bool", "the interval excludes 0"),
)
EVAL_SUMMARY = (_f("method", "", "retrieval method (flat:bm25, tooldns:bm25:2, a2x:..., "
                   "grail ...)"),
                *(_f(m.key, m.unit, m.meaning) for m in (METRICS[k] for k in EVAL_TABLE)),
                _f("<metric>_half", "", "half-width of the 95 % interval over the queries "
                   "(Student t) of hit1_tool, hitk_tool, recall_k and rr"))

RUN = "tooldns run"
FILES = (
    OutputFile("results.csv", RUN, "one row per query and scheme", RECORDS),
    OutputFile("results.parquet", RUN, "results.csv with its types"),
    OutputFile("nodes.csv", RUN, "one row per node and scheme that sent or received", NODES),
    OutputFile("summary.json", RUN, "the run's summary; its presence marks a finished run",
               SUMMARY_KEYS),
    OutputFile("summary.json schemes.<scheme>", RUN,
               "per-scheme metrics (analysis.metrics)", SCHEME_KEYS),
    OutputFile("summary.json phases.<scheme>[]", RUN,
               "per-phase metrics (analysis.metrics; analysis.results.per_phase has them "
               "unrounded)", PHASE_KEYS, "workload.phases > 1"),
    OutputFile("partial.json", RUN, "an interrupted run's summary of the finished schemes "
               "(instead of summary.json): its keys plus these", PARTIAL_KEYS,
               "run interrupted"),
    OutputFile("scenario.yaml", RUN, "the resolved scenario"),
    OutputFile("churn.csv", RUN, "one row per change and scheme", CHURN,
               "scenario with workload.churn"),
    OutputFile("capture.pcap", RUN, "the packets captured", when="run with --capture"),
    OutputFile("latency_cdf.png, bytes_per_query.png, cache_hits_over_time.png", RUN,
               "standard figures (analysis.plots.run)", when="outputs.plots"),
    OutputFile("success_over_time.png", RUN, "success per time bin, faults shaded",
               when="outputs.plots and faults"),
    OutputFile("sweep.csv", "tooldns sweep", "one row per point and scheme", SWEEP_TABLE),
    OutputFile("sweep.parquet", "tooldns sweep", "sweep.csv with its types"),
    OutputFile("sweep.json", "tooldns sweep", "what the sweep ran", SWEEP_META),
    OutputFile("points/<id>/", "tooldns sweep", "each point's run folder (the files above)"),
    OutputFile("sweep_<axis>.png", "tooldns sweep", "every metric against each grid axis"),
    OutputFile("intervals.csv", "tooldns run and sweep", "per scheme (and value of the other "
               "axes) each comparison metric's mean and 95 % interval over the seeds",
               INTERVAL_TABLE, "seeds: N > 1, or a grid over seed"),
    OutputFile("paired.csv", "tooldns run and sweep", "per scheme but the first, the paired "
               "difference from the first scheme, seed by seed", INTERVAL_TABLE,
               "seeds: N > 1, or a grid over seed"),
    OutputFile("intervals.png", "tooldns run and sweep", "each scheme's means with their 95 % "
               "intervals (analysis.plots.intervals)", when="seeds: N > 1, or a grid over seed"),
    OutputFile("per_query.csv", "tooldns eval", "one row per method and query: the metrics "
               "of summary.csv for that query"),
    OutputFile("summary.csv", "tooldns eval", "one row per method: means over the queries",
               EVAL_SUMMARY),
    OutputFile("paired.csv (evaluation)", "tooldns eval", "each method minus the first, "
               "query by query", EVAL_PAIRED),
    OutputFile("summary.json (evaluation)", "tooldns eval", "name, resolved spec, tools, "
               "queries evaluated and available, namespace, K, tree balance, provenance"),
    OutputFile("report.html", "tooldns report", "self-contained report (figures embedded)"),
    OutputFile("report.md", "tooldns report", "Markdown report; its figures as PNG beside it"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """``docs/results.md``."""
    out = ["# Results folders", "",
           "Generated from `analysis/columns.py` (per-scheme metrics: `analysis/metrics.py`) "
           "by `python3 -m analysis.columns --markdown > docs/results.md`; do not edit by "
           "hand. Read them back with `analysis.results` (`load_run`, `load_sweep`, "
           "`load_eval`).", ""]
    for f in FILES:
        out += [f"## {f.name}", "",
                f"Written by `{f.written_by}`{f' ({f.when})' if f.when else ''}: {f.meaning}.",
                ""]
        if f.fields:
            out += ["| column / key | unit | meaning | present |", "|---|---|---|---|"]
            out += [f"| `{_cell(c.name)}` | {_cell(c.unit)} | {_cell(c.meaning)} | "
                    f"{_cell(c.when) or 'always'} |" for c in f.fields]
            out.append("")
    return "\n".join(out).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m analysis.columns",
                                description="The files and columns of tooldns results "
                                            "folders.")
    p.add_argument("--markdown", action="store_true", help="the Markdown reference "
                                                           "(docs/results.md)")
    p.parse_args(argv)
    print(markdown())
    return 0


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
