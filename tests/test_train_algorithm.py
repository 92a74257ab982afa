"""The contracts of bcg_train and bcg_sim: every registered algorithm, reward and simulator backend has the
methods its protocol names, and the registries hold exactly the names the config allows."""

from __future__ import annotations

import inspect
import re

import pytest

from bcg_train.algorithm import ALGORITHMS, Algorithm, algorithm_class
from bcg_train.config import ALGOS, REWARD_KINDS
from bcg_train.rewards import REWARDS, Reward


def _missing(cls: type, protocol: type) -> list[str]:
    """The protocol's members `cls` lacks: methods (with their parameter names) and attributes (set in
    __init__ or on the class)."""
    src = inspect.getsource(cls)
    out = []
    for name, member in vars(protocol).items():
        if name.startswith("_") and name != "__call__" or not callable(getattr(protocol, name)) and not isinstance(
                member, property):
            continue
        if not hasattr(cls, name) or callable(getattr(protocol, name)) != callable(getattr(cls, name)):
            out.append(name)
        elif callable(getattr(protocol, name)):
            want = list(inspect.signature(getattr(protocol, name)).parameters)
            have = list(inspect.signature(getattr(cls, name)).parameters)
            if have[:len(want)] != want:
                out.append(f"{name}{tuple(have)} != {tuple(want)}")
    for name in protocol.__annotations__:
        if not hasattr(cls, name) and not re.search(rf"\bself\.{name}\b[^=\n]*=", src):
            out.append(name)
    return sorted(out)


def test_registries_match_the_config_choices():
    assert tuple(ALGORITHMS) == ALGOS
    assert set(REWARDS) == set(REWARD_KINDS)


@pytest.mark.parametrize("name", ALGOS)
def test_every_algorithm_has_the_protocol(name):
    cls = algorithm_class(name)
    assert _missing(cls, Algorithm) == []
    assert ALGORITHMS[name].bcg == name.endswith("-bcg")


@pytest.mark.parametrize("kind", REWARD_KINDS)
def test_every_reward_has_the_protocol(kind):
    assert _missing(REWARDS[kind], Reward) == []


@pytest.mark.parametrize("module, name", [("bcg_sim.diffsim.bridge", "Simulator"),
                                          ("bcg_sim.diffsim.native", "NativeSimulator")])
def test_every_simulator_backend_has_the_protocol(module, name):
    import importlib

    from bcg_sim.diffsim.backend import SimulatorBackend

    cls = getattr(importlib.import_module(module), name)
    assert _missing(cls, SimulatorBackend) == []
