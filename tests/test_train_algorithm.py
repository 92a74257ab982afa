"""The contracts of bcg_train and bcg_sim: every registered algorithm, reward and simulator backend has the
methods its protocol names, the registries hold exactly the names the config allows, and the config's
defaults have one value."""

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
        if (
            name.startswith("_")
            and name != "__call__"
            or not callable(getattr(protocol, name))
            and not isinstance(member, property)
        ):
            continue
        if not hasattr(cls, name) or callable(getattr(protocol, name)) != callable(getattr(cls, name)):
            out.append(name)
        elif callable(getattr(protocol, name)):
            want = list(inspect.signature(getattr(protocol, name)).parameters)
            have = list(inspect.signature(getattr(cls, name)).parameters)
            if have[: len(want)] != want:
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


@pytest.mark.parametrize(
    "module, name", [("bcg_sim.diffsim.bridge", "Simulator"), ("bcg_sim.diffsim.native", "NativeSimulator")]
)
def test_every_simulator_backend_has_the_protocol(module, name):
    import importlib

    from bcg_sim.diffsim.backend import SimulatorBackend

    cls = getattr(importlib.import_module(module), name)
    assert _missing(cls, SimulatorBackend) == []


def test_dataclass_defaults_are_default_yaml():
    """config/train/default.yaml and TrainConfig's defaults say the same: each default has one value."""
    from dataclasses import asdict

    from bcg_train.config import TrainConfig, load_train_config

    def leaves(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            out.update(leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
        return out

    code, yaml_ = leaves(asdict(TrainConfig())), leaves(asdict(load_train_config()))
    # the tracking reward's tables are the YAML's alone (the dataclass holds no feature-group literals)
    differ = {
        k: (code.get(k), yaml_.get(k))
        for k in code.keys() | yaml_.keys()
        if code.get(k) != yaml_.get(k) and not k.startswith("reward.tracking_")
    }
    assert differ == {}
