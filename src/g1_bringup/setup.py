from glob import glob

from setuptools import setup

package_name = "g1_bringup"

# launch/ and config/ live at the repository root (design card); src/g1_bringup/launch and
# src/g1_bringup/config are symlinks to them so that colcon installs them into this package's share.
setup(
    name=package_name,
    version="0.1.0",
    packages=[package_name],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
        (f"share/{package_name}", ["package.xml"]),
        (f"share/{package_name}/launch", glob("launch/*.py")),
        (f"share/{package_name}/config", glob("config/*.yaml") + glob("config/*.xml") + glob("config/*.rviz")),
        (f"share/{package_name}/config/train", glob("config/train/*.yaml")),  # bcg_train presets
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="bcg developers",
    maintainer_email="bcg@example.org",
    description="Launch files, configuration, rviz and DDS profiles for bcg on the G1.",
    license="BSD-3-Clause",
)
