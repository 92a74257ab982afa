"""Exported policy = a folder: policy.yaml (the contract), policy.onnx and/or policy.pt (TorchScript),
reference.npz (the reference clip). `export_policy` writes one, `load_policy` reads and verifies it.

The network maps the *normalized* observation [B, n_obs] float32 to the raw action [B, 29];
`Policy.act` normalizes, runs it (ONNX Runtime or TorchScript, chosen at load time) and returns the raw
action. torch is imported only for TorchScript or export, so the robot node can run with ONNX Runtime alone.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from bcg_sim.policy.contract import PolicyContract, PolicyContractError
from bcg_sim.policy.reference import ReferenceTrack

CONTRACT_FILE = "policy.yaml"
FILES = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
RUNTIMES = ("onnx", "torchscript")
INPUT_NAME, OUTPUT_NAME = "obs", "action"


class PolicyLoadError(PolicyContractError):
    """An artifact folder is incomplete or its network does not fit its contract."""


def export_policy(
    module,
    contract: PolicyContract,
    out_dir: str | os.PathLike,
    formats: Sequence[str] = ("onnx", "torchscript"),
    reference: ReferenceTrack | None = None,
) -> Path:
    """Write an artifact folder and verify it by loading every format back. Returns the folder.

    module: torch.nn.Module, normalized obs [B, contract.n_obs] -> raw action [B, 29] (exported in eval
    mode on CPU). reference: the clip (default: standing at the contract's default pose).
    """
    import torch

    unknown = set(formats) - set(RUNTIMES)
    if unknown or not formats:
        raise ValueError(f"formats must be a non-empty subset of {RUNTIMES}, got {tuple(formats)}")
    contract.validate("contract to export")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ref = reference or ReferenceTrack.standing(contract.default_joint_pos, name=contract.reference.name)
    contract.reference.name = ref.name
    ref.save_npz(out / contract.reference.file)
    module = module.to("cpu").eval()
    dummy = torch.zeros(1, contract.n_obs)
    with torch.no_grad():
        y = module(dummy)
    if tuple(y.shape) != (1, 29):
        raise PolicyContractError(f"module maps [1, {contract.n_obs}] to {tuple(y.shape)}, expected [1, 29]")
    contract.files = {}
    for fmt in formats:
        path = out / FILES[fmt]
        with warnings.catch_warnings():  # torch flags TorchScript/legacy ONNX as deprecated; both still work
            warnings.simplefilter("ignore", DeprecationWarning)
            _export_onnx(module, dummy, path) if fmt == "onnx" else _export_torchscript(module, dummy, path)
        contract.files[fmt] = FILES[fmt]
    contract.save(out / CONTRACT_FILE)
    for fmt in formats:  # an artifact that does not load is never handed on
        load_policy(out, runtime=fmt)
    return out


def _export_onnx(module, dummy, path: Path) -> None:
    import torch

    kw = dict(
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
    )
    try:  # the TorchScript-based exporter: fast, quiet, enough for MLPs
        torch.onnx.export(module, (dummy,), str(path), dynamo=False, **kw)
    except Exception:  # noqa: BLE001 - newer torch may drop it; the dynamo exporter also works
        torch.onnx.export(
            module,
            (dummy,),
            str(path),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            dynamo=True,
        )


def _export_torchscript(module, dummy, path: Path) -> None:
    import torch

    try:
        scripted = torch.jit.script(module)
    except Exception:  # noqa: BLE001 - not scriptable: tracing is exact for a fixed-shape MLP
        scripted = torch.jit.trace(module, dummy)
    scripted.save(str(path))


class Policy:
    """A loaded, verified policy. `act(obs)` with obs [n_obs] or [B, n_obs] float32 (un-normalized, from
    `build_observation`) -> raw action [29] or [B, 29] float32; `contract.action_to_target` makes targets."""

    def __init__(self, contract: PolicyContract, reference: ReferenceTrack, runtime: str, run, path: Path):
        self.contract = contract
        self.reference = reference
        self.runtime = runtime
        self.path = path
        self._run = run  # normalized obs [B, n_obs] float32 -> [B, 29] float32

    @property
    def n_obs(self) -> int:
        return self.contract.n_obs

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        if x.shape[-1] != self.n_obs or x.ndim not in (1, 2):
            raise ValueError(f"observation shape {x.shape}, policy expects [{self.n_obs}] or [B, {self.n_obs}]")
        y = self._run(np.ascontiguousarray(self.contract.normalize(x.reshape(-1, self.n_obs))))
        return y.reshape(*x.shape[:-1], 29)

    def timed_act(self, obs: np.ndarray) -> tuple[np.ndarray, float]:
        """act(obs) and its wall time in s."""
        t = time.perf_counter()
        a = self.act(obs)
        return a, time.perf_counter() - t


def _onnx_runner(path: Path, n_obs: int, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads  # one thread: lowest latency jitter next to the control loop
    opts.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types for unreadable models
        raise PolicyLoadError(f"{path}: not a readable ONNX model (truncated or damaged?): {_first_line(exc)}") from exc
    inp = sess.get_inputs()
    if len(inp) != 1 or (isinstance(inp[0].shape[-1], int) and inp[0].shape[-1] != n_obs):
        raise PolicyLoadError(f"{path}: network input {[(i.name, i.shape) for i in inp]}, contract has n_obs = {n_obs}")
    name = inp[0].name

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(sess.run(None, {name: x})[0], dtype=np.float32)

    return run


def _torchscript_runner(path: Path, threads: int):
    import torch

    torch.set_num_threads(threads)
    with warnings.catch_warnings():  # deprecated in torch >= 2.9 but supported; ONNX is the main runtime
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            mod = torch.jit.load(str(path), map_location="cpu").eval()
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/ValueError for damaged archives
            raise PolicyLoadError(
                f"{path}: not a readable TorchScript model (truncated or damaged?): {_first_line(exc)}"
            ) from exc

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return mod(torch.from_numpy(x)).numpy().astype(np.float32, copy=False)

    return run


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_policy(path: str | os.PathLike, runtime: str = "auto", threads: int = 1) -> Policy:
    """Load and verify an artifact (its folder or its policy.yaml).

    runtime: "onnx", "torchscript" or "auto" (ONNX when present, else TorchScript). Verifies the metadata
    (format, version, joint order = bcg_sim.g1.joints, feature sizes, normalization) and the network
    (input n_obs, output 29, finite output on a zero observation). Every problem with the artifact raises
    ArtifactError (subclasses PolicyContractError, PolicyLoadError) with a message naming the file.
    """
    p = Path(path)
    if not p.exists():
        raise PolicyLoadError(f"policy {p} does not exist (expected an artifact folder from export_policy)")
    folder = p.parent if p.is_file() else p
    yaml_path = p if p.is_file() else p / CONTRACT_FILE
    if not yaml_path.is_file():
        raise PolicyLoadError(f"no {CONTRACT_FILE} in {folder} (not an exported bcg policy)")
    contract = PolicyContract.load(yaml_path)
    runtime = _pick_runtime(contract, folder, runtime, yaml_path)
    net = folder / contract.files[runtime]
    run = _onnx_runner(net, contract.n_obs, threads) if runtime == "onnx" else _torchscript_runner(net, threads)
    ref_file = folder / contract.reference.file
    if not ref_file.is_file():
        raise PolicyLoadError(f"{yaml_path}: reference file {ref_file} is missing")
    reference = ReferenceTrack.load_npz(ref_file, contract.reference.name)
    policy = Policy(contract, reference, runtime, run, folder)
    _check_network(policy, net)
    return policy


def _pick_runtime(contract: PolicyContract, folder: Path, runtime: str, where: Path) -> str:
    available = [r for r in RUNTIMES if r in contract.files and (folder / contract.files[r]).is_file()]
    if runtime == "auto":
        if not available:
            raise PolicyLoadError(f"{where}: no network file found (files: {contract.files})")
        return available[0]
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be 'auto' or one of {RUNTIMES}, got {runtime!r}")
    if runtime not in available:
        raise PolicyLoadError(f"{where}: no {runtime} network in {folder} (available: {available})")
    return runtime


def _check_network(policy: Policy, net: Path) -> None:
    try:
        y = policy._run(np.zeros((2, policy.n_obs), dtype=np.float32))
    except Exception as exc:  # noqa: BLE001 - runtime errors differ per backend; all mean "does not fit"
        raise PolicyLoadError(f"{net}: network does not accept [2, {policy.n_obs}] observations: {exc}") from exc
    if y.shape != (2, 29):
        raise PolicyLoadError(f"{net}: network output shape {y.shape}, expected [B, 29]")
    if not np.all(np.isfinite(y)):
        raise PolicyLoadError(f"{net}: network output is not finite for a zero observation")
