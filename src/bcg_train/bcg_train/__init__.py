"""bcg_train: SHAC + ADD on bcg_sim, PPO baseline, export and MuJoCo evaluation."""
