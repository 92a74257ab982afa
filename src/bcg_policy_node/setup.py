from setuptools import find_packages, setup

package_name = "bcg_policy_node"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
        (f"share/{package_name}", ["package.xml"]),
    ],
    install_requires=["setuptools", "bcg_sim"],
    zip_safe=True,
    maintainer="bcg developers",
    maintainer_email="bcg@example.org",
    description="Real-time G1 policy node and MuJoCo bridge node speaking unitree_hg LowState/LowCmd.",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            # names for `ros2 run bcg_policy_node ...` and their bcg-* twins for pip users
            "policy_node = bcg_policy_node.policy_node:main",
            "mujoco_bridge = bcg_policy_node.mujoco_bridge:main",
            "bcg-policy-node = bcg_policy_node.policy_node:main",
            "bcg-mujoco-bridge = bcg_policy_node.mujoco_bridge:main",
            "bcg-sim2sim = bcg_policy_node.sim2sim:main",
            "bcg-replay = bcg_policy_node.replay:main",
            "bcg-record = bcg_policy_node.bags:record_main",
        ],
    },
)
