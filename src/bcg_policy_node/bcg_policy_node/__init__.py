"""bcg_policy_node: real-time G1 policy node, MuJoCo bridge, composed runner and bag tools."""
