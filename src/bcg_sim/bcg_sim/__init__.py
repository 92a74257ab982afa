"""bcg_sim: the G1 model, the motion library, the policy contract and the differentiable simulator.

Importing this package is cheap (numpy, mujoco): Newton/Warp load only when bcg_sim.diffsim is imported,
so the robot computer can use the model, motions and policy contract without them.
"""

__version__ = "0.1.0"
