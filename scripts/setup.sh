#!/usr/bin/env bash
# One-command set-up on Debian/Ubuntu with Python 3.11: system packages, .venv with pinned wheels,
# the unitree_hg messages built with cmake, every bcg package installed editable. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3.11}

# System packages: cmake/ninja/compiler for the message package, OSMesa for offscreen rendering, Eigen headers for
# the native simulator backend (compiled against the pin wheel's Pinocchio).
need=()
for p in cmake ninja-build g++ libosmesa6 git libeigen3-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "[setup] apt-get install ${need[*]}"
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

command -v "$PY" >/dev/null || { echo "[setup] $PY not found; bcg needs Python 3.11 (ROS 2 Kilted wheels)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
V=$ROOT/.venv
echo "[setup] pip install -r requirements.txt"
"$V/bin/pip" install -q --disable-pip-version-check -r requirements.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
"$V/bin/python" -c "import torch, warp, newton, mujoco, rclpy, pinocchio" # fail loudly if the install is incomplete

echo "[setup] building unitree_hg (cmake)"
# colcon must not mistake the venv or these build trees for packages of a workspace.
mkdir -p build install; touch .venv/COLCON_IGNORE build/COLCON_IGNORE install/COLCON_IGNORE
export AMENT_PREFIX_PATH=$V CMAKE_PREFIX_PATH=$V PATH=$V/bin:$PATH
cmake -S src/unitree_hg -B build/unitree_hg -G Ninja -DBUILD_TESTING=OFF \
  -DCMAKE_INSTALL_PREFIX="$ROOT/install/unitree_hg" -DPython3_EXECUTABLE="$V/bin/python3" \
  -DPython3_FIND_VIRTUALENV=ONLY >build/unitree_hg.log 2>&1 \
  || { cat build/unitree_hg.log; exit 1; }
cmake --build build/unitree_hg -j2 >>build/unitree_hg.log 2>&1 && cmake --install build/unitree_hg >>build/unitree_hg.log 2>&1 \
  || { tail -50 build/unitree_hg.log; exit 1; }

echo "[setup] pip install -e src/*"
"$V/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
  -e src/bcg_sim -e src/bcg_train -e src/bcg_policy_node -e src/g1_bringup 2>&1 | { grep -v "^WARNING: Location" || true; }

echo "[setup] warming the Warp kernel cache and compiling the native simulator (cold: a few minutes)"
(. ./env.sh && python -m bcg_sim.warmup)
echo "[setup] done. Next: '. ./env.sh' then 'make test'"
