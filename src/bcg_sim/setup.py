from setuptools import find_packages, setup

package_name = "bcg_sim"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={"bcg_sim.diffsim": ["csrc/*.cpp"]},  # the native backend compiles it on first use
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
        (f"share/{package_name}", ["package.xml"]),
    ],
    install_requires=["setuptools", "numpy", "pyyaml", "mujoco"],
    zip_safe=True,
    maintainer="bcg developers",
    maintainer_email="bcg@example.org",
    description="Differentiable G1 simulation with Bundled Contact Gradients; G1 model; motion library.",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            "bcg-model = bcg_sim.g1.cli:main",
            "bcg-motion = bcg_sim.motion.cli:main",
            "bcg-sim = bcg_sim.diffsim.cli:main",
            "bcg-gradvar = bcg_sim.diffsim.gradvar:main",
            "bcg-policy = bcg_sim.policy.cli:main",
        ],
    },
)
