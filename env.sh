# Source me from the repository root (like a ROS setup.bash):  . ./env.sh
# Activates the venv made by `make setup` and points ROS 2 (pip wheels), the unitree_hg messages, the Fast DDS
# profile (config/fastdds_robot.xml) and Warp's kernel cache at this checkout.
_bcg_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
if [ ! -x "$_bcg_root/.venv/bin/python" ]; then
  echo "bcg: no .venv in $_bcg_root; run 'make setup' first" >&2
  return 1 2>/dev/null || exit 1
fi
. "$_bcg_root/.venv/bin/activate"
_bcg_hg="$_bcg_root/install/unitree_hg"
export AMENT_PREFIX_PATH="$_bcg_hg:$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$_bcg_hg:$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$_bcg_hg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$_bcg_hg/lib/python3.11/site-packages${PYTHONPATH:+:$PYTHONPATH}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# Keep DDS traffic on this machine unless told otherwise (the robot launch sets SUBNET and a profile).
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
# Fast DDS profile with type propagation off: the G1's Cyclone DDS 0.10 and unitree_sdk2py crash on Fast DDS 3's
# type information otherwise (the nodes set the same default themselves when it is unset).
export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-$_bcg_root/config/fastdds_robot.xml}"
export WARP_CACHE_PATH="${WARP_CACHE_PATH:-$_bcg_root/.cache/warp}"
export BCG_NATIVE_CACHE="${BCG_NATIVE_CACHE:-$_bcg_root/.cache/native}"  # compiled native simulator backend
export BCG_ROOT="$_bcg_root"
# Offscreen rendering: EGL where a GPU driver is present, OSMesa otherwise.
if [ -z "${MUJOCO_GL:-}" ]; then
  if [ -e /dev/nvidia0 ] || [ -e /dev/dri/renderD128 ]; then export MUJOCO_GL=egl; else export MUJOCO_GL=osmesa; fi
fi
export PYOPENGL_PLATFORM="${PYOPENGL_PLATFORM:-$MUJOCO_GL}"
unset _bcg_hg
