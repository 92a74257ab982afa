"""The robot-computer path: `colcon build` of this workspace installs what `ros2 launch` / `ros2 run` look for.

A real ROS 2 distribution is not installable here; the pip ROS 2 wheels stand in for it (AMENT_PREFIX_PATH =
the venv). The workspace is laid out as the README says: <ws>/src/bcg is this checkout (a copy of its src/ and
links to its config/ and launch/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bcg_sim", "bcg_train", "bcg_policy_node", "g1_bringup", "unitree_hg")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    colcon = shutil.which("colcon")
    if colcon is None:
        pytest.fail("colcon not found: `make setup` installs colcon-common-extensions")
    ws = tmp_path_factory.mktemp("colcon_ws")
    checkout = ws / "src" / "bcg"
    shutil.copytree(
        REPO / "src", checkout / "src", symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    (checkout / "config").symlink_to(REPO / "config")  # g1_bringup's links point at ../../config, ../../launch
    (checkout / "launch").symlink_to(REPO / "launch")
    venv = Path(sys.prefix)
    env = dict(os.environ, AMENT_PREFIX_PATH=str(venv), CMAKE_PREFIX_PATH=str(venv))
    r = subprocess.run(
        [
            colcon,
            "build",
            "--event-handlers",
            "console_cohesion-",
            "--cmake-args",
            "-DBUILD_TESTING=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DPython3_FIND_VIRTUALENV=ONLY",
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return ws


def test_packages_build_and_install_where_ros2_looks(workspace):
    install = workspace / "install"
    for pkg in PACKAGES:
        assert (install / pkg / "share" / "ament_index" / "resource_index" / "packages" / pkg).is_file(), pkg
    share = install / "g1_bringup" / "share" / "g1_bringup"
    assert {p.name for p in (share / "launch").glob("*.launch.py")} == {"deploy.launch.py", "sim2sim.launch.py"}
    for f in ("policy_node.yaml", "mujoco_bridge.yaml", "sim.yaml", "fastdds_robot.xml", "g1.rviz"):
        assert (share / "config" / f).is_file(), f
    # `ros2 run bcg_policy_node policy_node` runs lib/<package>/<executable>
    for exe in ("policy_node", "mujoco_bridge"):
        assert os.access(install / "bcg_policy_node" / "lib" / "bcg_policy_node" / exe, os.X_OK), exe
    # `ros2 run bcg_train train`, and the training presets it reads from the share folder
    assert os.access(install / "bcg_train" / "lib" / "bcg_train" / "train", os.X_OK)
    for f in ("default.yaml", "cpu.yaml", "tiny.yaml"):
        assert (share / "config" / "train" / f).is_file(), f


def test_installed_overlay_finds_its_config_and_messages(workspace, tmp_path):
    """From outside any checkout, the installed bcg_sim reads config/ from g1_bringup's share folder."""
    code = (
        "import bcg_sim, unitree_hg.msg; from bcg_sim.config import config_dir; "
        "from bcg_sim.policy.contract import default_contract; "
        "print(bcg_sim.__file__); print(config_dir()); print(default_contract().control_dt)"
    )
    script = f'source "{workspace}/install/setup.bash" && python -c "{code}"'
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BCG_CONFIG_DIR")}
    env["AMENT_PREFIX_PATH"] = sys.prefix
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    module, config, dt = r.stdout.strip().splitlines()[-3:]
    assert module.startswith(str(workspace / "install" / "bcg_sim")), module
    assert config == str(workspace / "install" / "g1_bringup" / "share" / "g1_bringup" / "config")
    assert float(dt) > 0
