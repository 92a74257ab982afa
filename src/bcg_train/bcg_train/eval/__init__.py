"""MuJoCo sim-to-sim evaluation of exported policies (`bcg-eval`) and the paper's experiment harness
(`bcg-experiment`). See docs/eval.md."""
