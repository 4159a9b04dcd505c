"""The recursive resolver (sans-IO): ``core`` drives the parts — ``walk`` (Algorithm 1),
``iterate`` (stock resolution), ``validate`` (DNSSEC) — over ``caches`` and ``infra`` (SRTT);
``clients`` serves stubs; ``merge`` is the beam/merge policy; ``types`` and ``config`` the
shared data.
"""
