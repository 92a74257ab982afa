"""config/*.yaml → dataclasses: typos and wrong types are errors that name the file and key."""

from dataclasses import dataclass, field

import pytest

from bcg_sim.config import ConfigError, from_dict, load_config


@dataclass
class _Inner:
    sigma: float = 0.0
    enabled: bool = False


@dataclass
class _Outer:
    name: str = "x"
    sizes: list[int] = field(default_factory=list)
    inner: _Inner = field(default_factory=_Inner)
    maybe: float | None = None


def test_nested_values_are_typed():
    cfg = from_dict(_Outer, {"name": "g1", "sizes": [1, 2], "inner": {"sigma": 1, "enabled": True}})
    assert cfg.inner.sigma == 1.0 and isinstance(cfg.inner.sigma, float)
    assert cfg.sizes == [1, 2] and cfg.inner.enabled is True and cfg.maybe is None


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"inner": {"sigmaa": 1.0}}, "unknown key(s) ['sigmaa']"),
        ({"inner": {"sigma": "big"}}, "inner.sigma: expected a number"),
        ({"inner": {"enabled": 1}}, "inner.enabled: expected true/false"),
        ({"sizes": [1, 2.5]}, "sizes[1]: expected an integer"),
    ],
)
def test_bad_values_name_the_key(data, fragment):
    with pytest.raises(ConfigError) as exc:
        from_dict(_Outer, data, where="file.yaml")
    assert fragment in str(exc.value)


def test_load_config_names_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("section:\n  name: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml:section.name: expected a string"):
        load_config(_Outer, p, section="section")
    with pytest.raises(ConfigError, match="missing section 'other'"):
        load_config(_Outer, p, section="other")
    with pytest.raises(ConfigError, match="not found"):
        load_config(_Outer, tmp_path / "absent.yaml")


def test_dataclass_defaults_are_the_yaml_files():
    """eval.yaml, bags.yaml and their dataclasses' defaults say the same (each default has one value; sim.yaml,
    train/default.yaml and policy_node.yaml have tests of their own; mujoco_bridge.yaml's keys are all required)."""
    from dataclasses import replace

    from bcg_policy_node.bags import BagConfig, load_bag_config
    from bcg_train.eval.config import EvalConfig, ExperimentConfig

    assert EvalConfig() == load_config(EvalConfig, "eval.yaml", "eval")
    assert BagConfig() == load_bag_config()
    # the bcg-train command lines are the YAML's alone (validate() refuses them empty)
    exp = load_config(ExperimentConfig, "eval.yaml", "experiment")
    assert ExperimentConfig() == replace(exp, train_command=[], resume_command=[])


def _train_presets() -> list[str]:
    from bcg_sim.config import config_dir

    return sorted(p.stem for p in (config_dir() / "train").glob("*.yaml"))


@pytest.mark.parametrize("name", _train_presets())
def test_every_training_preset_loads(name):
    """A preset's typo or an out-of-range value shows here, not an hour into someone's training."""
    from bcg_train.config import load_train_config

    load_train_config(name)


def test_a_preset_builds_on_its_base(tmp_path):
    from bcg_train.config import load_train_config

    cpu = load_train_config("cpu")
    p = tmp_path / "mine.yaml"
    p.write_text("base: cpu\nbudget: 7it\ntask:\n  root_estimate: odometry\n")
    mine = load_train_config(str(p))
    assert (mine.budget, mine.task.root_estimate) == ("7it", "odometry")  # its own keys win
    assert mine.task.randomize == cpu.task.randomize and mine.num_envs == cpu.num_envs  # the rest is the base's
    assert cpu.task.root_estimate != "odometry"  # (else the first assert would not show the override)

    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\n")
    b.write_text(f"base: {a}\n")
    with pytest.raises(ConfigError, match="loop"):
        load_train_config(str(a))
    b.write_text("num_envz: 4\n")  # a typo in the base is named with the base's file, not the preset's
    a.write_text(f"base: {b}\n")
    with pytest.raises(ConfigError, match=r"b\.yaml.*num_envz"):
        load_train_config(str(a))
    p.write_text("base: no_such_preset\n")
    with pytest.raises(ConfigError, match="no_such_preset"):
        load_train_config(str(p))
