"""The written-out ``__init__`` of the dataclasses made per message (nodes/resolver/types.py
and their like): each takes every field, by position in field order and by name, with the
dataclass's defaults, and pickles by its fields. A field added to one of them without its
``__init__`` (or this table) fails here."""

from __future__ import annotations

import dataclasses
import pickle
from collections import Counter

import pytest
from dnslib import DNSRecord

from nodes.agent.stub import StubResult
from nodes.agent.stub import _Pending as StubPending
from nodes.dns.wire import Intent, IntentError
from nodes.resolver.core import _Pending, _Task
from nodes.resolver.types import (
    Ask,
    ChildInfo,
    Discovery,
    DiscoveryResult,
    Endpoint,
    Outgoing,
    Reply,
    Step,
)
from nodes.resolver.walk import _Level
from sim.accounting import WireCost

_STEP = Step("a.tools.", "SRV", ("10.0.0.1", 53), "udp", 1.5, 0.25, 60, 300, "ok", False,
             7, 2, True)
_DISC = Discovery("weather now", "a2a", "udp", 3, "weather.tools.", 4)
_INTENT = Intent("weather now", 5, 2)


def _gen():  # a task's generator (a value of its type, never run)
    yield []


#: every field of each class, with a value of its type unlike its default and unlike the
#: other fields' values (a swap of two fields fails)
SAMPLES: dict[type, dict[str, object]] = {
    Discovery: {"intent": "weather now", "service": "a2a", "proto": "udp", "k": 3,
                "start": "weather.tools.", "beam": 4},
    Endpoint: {"target": "t.weather.tools.", "address": "10.1.2.3", "port": 443,
               "priority": 1, "weight": 2, "zone": "weather.tools.", "score": 0.5,
               "address6": "fd00::1"},
    Step: {"qname": "a.tools.", "qtype": "SRV", "server": ("10.0.0.1", 53),
           "transport": "udp", "sent": 1.5, "rtt": 0.25, "bytes_out": 60, "bytes_in": 300,
           "outcome": "ok", "with_intent": False, "qid": 7, "conn": 2, "opened": True},
    DiscoveryResult: {"request": _DISC, "started": 1.0, "finished": 2.0,
                      "endpoints": [Endpoint("t.", None, 1, 0, 0, "z.")], "steps": [_STEP],
                      "rounds": 3, "rcode": "SERVFAIL", "error": "boom",
                      "cache": Counter({"ns": 2}), "leaves": ["a.tools."],
                      "client": (("10.0.0.9", 5353), 77), "rejected": 1, "bogus": 2},
    Ask: {"qname": "_mcp._tcp.tools.", "qtype": 33, "servers": (("10.0.0.1", 53),),
          "intent": _INTENT},
    Reply: {"msg": DNSRecord(), "error": "timeout", "wire": b"\x00\x01"},
    Outgoing: {"data": b"\x12\x34", "dst": ("10.0.0.1", 53), "transport": "tcp",
               "reply": True, "step": _STEP},
    WireCost: {"bytes_up": 1, "packets_up": 2, "bytes_down": 3, "packets_down": 4},
    Intent: {"text": "weather now", "k": 5, "version": 2, "beam": 3},
    _Task: {"gen": _gen(), "result": DiscoveryResult(_DISC, 0.0),
            "asks": [Ask("x.", 1, (), None)], "replies": [None], "client": None,
            "client_wire": b"\x01", "value": 5, "waiting": 2},
    _Pending: {"task": _Task(_gen(), None), "index": 1, "qid": 2, "wire": b"\x00",
               "order": [("10.0.0.1", 53)], "attempt": 3, "server": ("10.0.0.1", 53),
               "transport": "tcp", "sent": 1.0, "deadline": 6.0, "step": _STEP},
    _Level: {"asks": [Ask("x.", 1, (), None)], "asked": [("z.", "b.", 2)],
             "next": [("y.", 1)], "pool": [("w.", 0.5)]},
    StubResult: {"tag": "job", "request": _DISC, "sent": 1.0, "finished": 2.0,
                 "endpoints": [Endpoint("t.", None, 1, 0, 0, "z.")], "rcode": "NOERROR",
                 "error": "x", "steps": [_STEP], "qid": 9, "ids": [9], "a_ids": [10],
                 "waiting": 1},
    StubPending: {"result": StubResult("job", _DISC, 1.0), "wire": b"\x00", "qname": "q.",
                  "attempt": 1, "transport": "tcp", "deadline": 3.0, "step": _STEP,
                  "qtype": 28},
}
PICKLED = (Discovery, Endpoint, Step, DiscoveryResult, Ask, Outgoing, WireCost, Intent,
           StubResult)


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: c.__qualname__)
def test_init_takes_every_field(cls: type) -> None:
    fields = dataclasses.fields(cls)
    sample = SAMPLES[cls]
    assert [f.name for f in fields] == list(sample)  # the table covers every field
    by_name = cls(**sample)
    by_position = cls(*sample.values())
    for f in fields:  # equal and of the same type (compiled, a float or tuple is re-boxed)
        want = sample[f.name]
        for got in (getattr(by_name, f.name), getattr(by_position, f.name)):
            assert got == want and type(got) is type(want), f.name
    required = {f.name: sample[f.name] for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    bare = cls(**required)
    for f in fields:
        if f.name in required:
            continue
        want = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert getattr(bare, f.name) == want, f.name
    if cls is not _Task:  # a generator compares by identity
        assert by_name == by_position


def test_default_lists_are_not_shared() -> None:
    a, b = DiscoveryResult(_DISC, 0.0), DiscoveryResult(_DISC, 0.0)
    a.steps.append(_STEP)
    assert b.steps == [] and a.cache is not b.cache
    c, d = StubResult("x", _DISC, 0.0), StubResult("y", _DISC, 0.0)
    c.ids.append(1)
    assert d.ids == []


@pytest.mark.parametrize("cls", PICKLED, ids=lambda c: c.__qualname__)
def test_pickles_by_fields(cls: type) -> None:
    obj = cls(**SAMPLES[cls])
    assert pickle.loads(pickle.dumps(obj)) == obj


def test_child_info_pickles() -> None:
    info = ChildInfo("z.tools.", "weather", frozenset({"mcp"}), "hku", True)
    assert pickle.loads(pickle.dumps(info)) == info


def test_frozen_stay_frozen() -> None:
    for obj in (_DISC, _INTENT, WireCost(1), Ask("x.", 1, (), None), Endpoint(**SAMPLES[Endpoint])):
        name = dataclasses.fields(obj)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, 9)


def test_intent_checks_its_fields() -> None:
    for bad in ({"k": 256}, {"k": -1}, {"version": 256}, {"text": "é" * 40000}):
        with pytest.raises(IntentError):
            Intent(**{"text": "x", **bad})  # type: ignore[arg-type]
    assert Intent("é" * 32765).k == 1  # 65,530 bytes: fits
