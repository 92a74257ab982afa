from setuptools import find_packages, setup

package_name = "bcg_train"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
        (f"share/{package_name}", ["package.xml"]),
    ],
    install_requires=["setuptools", "bcg_sim", "bcg_policy_node"],
    zip_safe=True,
    maintainer="bcg developers",
    maintainer_email="bcg@example.org",
    description="SHAC + ADD training on bcg_sim, PPO baseline, policy export, MuJoCo sim-to-sim evaluation.",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            "bcg-train = bcg_train.cli:main",
            "train = bcg_train.cli:main",
            "bcg-eval = bcg_train.eval.cli:main",
            "bcg-experiment = bcg_train.eval.experiment:main",
        ],
    },
)
