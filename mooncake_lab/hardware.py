"""Hardware specs: GPUs, an 8-GPU node, and the storage tiers a node can reload KV cache from.

Every figure carries its source (a datasheet or the Mooncake paper). Units: FLOP/s, bytes,
bytes per second (decimal: 1 GB/s = 1e9 B/s; 1 Gbps = 1e9 bit/s = 0.125e9 B/s).

Peak FLOP/s are *dense* BF16 tensor-core figures, never the 2:4-sparsity peak (which datasheets
print twice as large). NVLink figures are the datasheet's total bidirectional bandwidth per GPU;
one direction is half of it (what a ring all-reduce can use).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .validate import describe, real

#: One GiB (2³⁰ B): HBM capacities ("80GB" on NVIDIA's datasheets) are binary.
GIB = 2 ** 30

__all__ = [
    "GPU", "Node", "StorageTier", "TIER_NAMES",
    "A800", "A100", "H800", "H100", "H20", "GPUS",
    "A800_NODE", "A800_NODE_8X400G", "A100_NODE", "H800_NODE", "H100_NODE", "H20_NODE", "NODES",
    "get_gpu", "get_node", "gbps_to_bytes_per_s", "GIB",
]


def gbps_to_bytes_per_s(gbps: float) -> float:
    """Network line rate in Gbit/s → bytes/s (1 Gbps = 1e9 / 8 B/s)."""
    gbps = real(gbps, "gbps", lo=0, hi=1e9, where="gbps_to_bytes_per_s")
    return gbps * 1e9 / 8.0


@dataclass(frozen=True)
class GPU:
    """One accelerator.

    Attributes
    ----------
    name : datasheet name.
    flops_bf16 : dense BF16 tensor-core peak, FLOP/s.
    hbm_bytes : HBM capacity, bytes. A datasheet's "80GB" of HBM is binary, 80 GiB = 80 × 2³⁰ B
        (memory capacities are powers of two: ``nvidia-smi`` reports 81920MiB for an
        A800-SXM4-80GB, e.g. github.com/dexmal/dexbotic issue #41), not 80e9.
    hbm_bw : HBM bandwidth, B/s.
    nvlink_bw : NVLink total bidirectional bandwidth per GPU, B/s.
    source : where the numbers come from.
    """

    name: str
    flops_bf16: float
    hbm_bytes: float
    hbm_bw: float
    nvlink_bw: float
    source: str

    @property
    def nvlink_bw_per_direction(self) -> float:
        """One direction of NVLink, B/s (half the datasheet's bidirectional figure)."""
        return self.nvlink_bw / 2.0

    @property
    def peak_flops(self) -> float:  # uniform name shared with Node (roofline helpers accept both)
        return self.flops_bf16

    @property
    def peak_hbm_bw(self) -> float:
        return self.hbm_bw


# --- GPUs ------------------------------------------------------------------------------------
A100 = GPU(
    name="A100-SXM4-80GB",
    flops_bf16=312e12,     # NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOPS (624 with sparsity)
    hbm_bytes=80 * GIB,    # same datasheet: 80GB HBM2e = 80 GiB (nvidia-smi: 81920MiB)
    hbm_bw=2039e9,         # same datasheet: 2,039 GB/s (A100 80GB SXM)
    nvlink_bw=600e9,       # same datasheet: NVLink 600 GB/s
    source="NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column)",
)
A800 = GPU(
    name="A800-SXM4-80GB",
    flops_bf16=312e12,     # NVIDIA A800 datasheet: BF16 312 TFLOPS dense (same GA100 die as A100)
    hbm_bytes=80 * GIB,    # A800 datasheet: 80GB HBM2e = 80 GiB (nvidia-smi on A800-SXM4-80GB: 81920MiB)
    hbm_bw=2039e9,         # A800 datasheet: 2,039 GB/s
    nvlink_bw=400e9,       # A800 datasheet: NVLink 400 GB/s (cut from the A100's 600 GB/s)
    source="NVIDIA A800 40GB/80GB datasheet (SXM); mooncake_paper.md 'Hardware'",
)
H800 = GPU(
    name="H800-SXM5-80GB",
    flops_bf16=989e12,     # NVIDIA H800 datasheet: BF16 1,979 TFLOPS with sparsity → 989 dense
    hbm_bytes=80 * GIB,    # H800 datasheet: 80GB HBM3 = 80 GiB (five 16 GiB stacks)
    hbm_bw=3.35e12,        # H800 datasheet: 3.35 TB/s
    nvlink_bw=400e9,       # H800 datasheet: NVLink 400 GB/s
    source="NVIDIA H800 Tensor Core GPU datasheet (SXM)",
)
H100 = GPU(
    name="H100-SXM5-80GB",
    flops_bf16=989e12,     # NVIDIA H100 datasheet: BF16 1,979 TFLOPS with sparsity → 989 dense
    hbm_bytes=80 * GIB,    # H100 datasheet: 80GB HBM3 (SXM) = 80 GiB (five 16 GiB stacks)
    hbm_bw=3.35e12,        # H100 datasheet: 3.35 TB/s (SXM)
    nvlink_bw=900e9,       # H100 datasheet: NVLink 900 GB/s
    source="NVIDIA H100 Tensor Core GPU datasheet (SXM column)",
)
H20 = GPU(
    name="H20-96GB",
    flops_bf16=148e12,     # NVIDIA HGX H20 product brief: BF16 148 TFLOPS dense (296 with sparsity)
    hbm_bytes=96 * GIB,    # same: 96GB HBM3 = 96 GiB (six 16 GiB stacks)
    hbm_bw=4.0e12,         # same: 4.0 TB/s
    nvlink_bw=900e9,       # same: NVLink 900 GB/s
    source="NVIDIA HGX H20 product brief (China-market Hopper)",
)

GPUS: dict[str, GPU] = {g.name: g for g in (A800, A100, H800, H100, H20)}

_GPU_ALIASES = {
    "a800": A800, "a800-sxm4-80gb": A800, "a800-80gb": A800,
    "a100": A100, "a100-sxm4-80gb": A100, "a100-80gb": A100,
    "h800": H800, "h800-sxm5-80gb": H800, "h800-sxm": H800,
    "h100": H100, "h100-sxm": H100, "h100-sxm5-80gb": H100,
    "h20": H20, "h20-96gb": H20,
}


def get_gpu(name: str | GPU) -> GPU:
    """Look a GPU up by name (case-insensitive; "A800", "H100-SXM", ...). A GPU passes through."""
    if isinstance(name, GPU):
        return name
    key = str(name).strip().lower()
    if key in _GPU_ALIASES:
        return _GPU_ALIASES[key]
    raise ValueError(f"gpu: unknown GPU {describe(name)}; allowed: {', '.join(sorted(GPUS))} "
                     f"(aliases: {', '.join(sorted(_GPU_ALIASES))})")


# --- storage tiers ---------------------------------------------------------------------------
TIER_NAMES = ("hbm", "dram", "ssd", "remote_dram")


@dataclass(frozen=True)
class StorageTier:
    """Where KV cache can be reloaded from, as seen by one node.

    ``bandwidth`` is the effective bandwidth *into the node's GPU HBM*, B/s (the bottleneck of
    the path); ``capacity_bytes`` the size of the tier on one node.
    """

    name: str
    bandwidth: float
    capacity_bytes: float
    source: str


# --- nodes -----------------------------------------------------------------------------------
#: Host-to-device bandwidth per node, FAST'25 Table 1 ("set according to LLaMA3-70B and 8×A800").
H2D_BW_PER_NODE = 128e9
#: Host DRAM per node: NVIDIA DGX A100 (640 GB) datasheet, system memory 2 TB.
DRAM_BYTES_PER_NODE = 2e12
#: Local NVMe drives per node: NVIDIA DGX A100 (640 GB) datasheet, internal storage 30 TB as
#: 8 × 3.84 TB U.2 NVMe.
SSD_DRIVES_PER_NODE = 8
SSD_DRIVE_BYTES = 3.84e12
#: Sequential read per drive: Samsung PM1733 (U.2, PCIe 4.0 ×4) product specification,
#: 7,000 MB/s — a typical enterprise PCIe 4.0 NVMe drive of that generation.
SSD_DRIVE_READ_BW = 7.0e9


@dataclass(frozen=True)
class Node:
    """A serving node: ``n_gpus`` GPUs with NVLink (TP inside the node), RDMA NICs, DRAM and SSDs.

    The node's GPUs act as one tensor-parallel instance (TP degree = ``n_gpus``).
    """

    name: str
    gpu: GPU
    n_gpus: int = 8
    nic_count: int = 4                 # FAST'25 §5.1: four 200 Gbps RDMA NICs per node
    nic_gbps: float = 200.0            # per NIC, Gbit/s
    h2d_bw: float = H2D_BW_PER_NODE
    dram_bytes: float = DRAM_BYTES_PER_NODE
    ssd_drives: int = SSD_DRIVES_PER_NODE
    ssd_drive_read_bw: float = SSD_DRIVE_READ_BW
    ssd_drive_bytes: float = SSD_DRIVE_BYTES
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.n_gpus, int) or self.n_gpus < 1:
            raise ValueError(f"n_gpus must be an integer >= 1, got {self.n_gpus!r}")
        for f in ("nic_gbps", "h2d_bw", "ssd_drive_read_bw"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{f} must be a finite number > 0, got {v!r}")

    # aggregate figures
    @property
    def peak_flops(self) -> float:
        """Dense BF16 FLOP/s of all GPUs."""
        return self.n_gpus * self.gpu.flops_bf16

    @property
    def peak_hbm_bw(self) -> float:
        """Aggregate HBM bandwidth, B/s."""
        return self.n_gpus * self.gpu.hbm_bw

    @property
    def hbm_bytes(self) -> float:
        return self.n_gpus * self.gpu.hbm_bytes

    @property
    def nic_bw(self) -> float:
        """Aggregate RDMA bandwidth, B/s (4 × 200 Gbps = 100 GB/s)."""
        return self.nic_count * gbps_to_bytes_per_s(self.nic_gbps)

    @property
    def ssd_bw(self) -> float:
        """Aggregate local NVMe sequential read, B/s (8 × 7 GB/s = 56 GB/s by default)."""
        return self.ssd_drives * self.ssd_drive_read_bw

    @property
    def tp(self) -> int:
        return self.n_gpus

    def with_gpus(self, n_gpus: int) -> "Node":
        """The same node type with a different GPU count (TP degree)."""
        return replace(self, n_gpus=n_gpus, name=f"{self.gpu.name.split('-')[0].lower()}x{n_gpus}")

    def tier(self, name: str) -> StorageTier:
        """The storage tier ``name`` (one of :data:`TIER_NAMES`) as seen by this node."""
        key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
        if key == "hbm":
            return StorageTier("hbm", self.peak_hbm_bw, self.hbm_bytes,
                               f"{self.gpu.source}: {self.n_gpus} × HBM bandwidth")
        if key == "dram":
            return StorageTier("dram", self.h2d_bw, self.dram_bytes,
                               "FAST'25 Table 1: host-to-device 128 GB/s per node; DRAM size DGX A100 datasheet")
        if key == "ssd":
            return StorageTier("ssd", min(self.ssd_bw, self.h2d_bw), self.ssd_drives * self.ssd_drive_bytes,
                               f"{self.ssd_drives} × {self.ssd_drive_read_bw / 1e9:g} GB/s NVMe (DGX A100 "
                               "datasheet drive count; Samsung PM1733 read), capped by host-to-device")
        if key in ("remote_dram", "rdma"):
            return StorageTier("remote_dram", self.nic_bw, math.inf,
                               f"{self.nic_count} × {self.nic_gbps:g} Gbps RDMA (FAST'25 §5.1), GPUDirect")
        raise ValueError(f"tier: unknown storage tier {describe(name)}; allowed: {', '.join(TIER_NAMES)}")

    def with_ssd_bw(self, total_bw: float) -> "Node":
        """The same node with the aggregate SSD read bandwidth set to ``total_bw`` B/s."""
        total_bw = real(total_bw, "total_bw", lo=0, lo_open=True, hi=1e15, where="Node.with_ssd_bw")  # B/s
        return replace(self, ssd_drive_read_bw=float(total_bw) / self.ssd_drives)


A800_NODE = Node("a800x8", A800, source="Mooncake testbed: 8 × A800-SXM4-80GB, 4 × 200 Gbps RDMA "
                 "(arXiv §8.1 'up to 800 Gbps'; FAST'25 §5.1)")
A800_NODE_8X400G = replace(A800_NODE, name="a800x8-8x400g", nic_count=8, nic_gbps=400.0,
                           source="FAST'25 §5.4.1 transfer-engine test: 8 × 400 Gbps RoCE")
#: The other node types keep the A800 testbed's NICs, DRAM and SSDs — an assumption, not a datasheet figure,
#: so that a comparison of nodes changes only the GPUs.
_SAME_NICS = "4 × 200 Gbps RDMA assumed (the A800 testbed's, FAST'25 §5.1)"
A100_NODE = Node("a100x8", A100, source=f"8 × A100-SXM4-80GB (DGX A100-like), {_SAME_NICS}")
H800_NODE = Node("h800x8", H800, source=f"8 × H800-SXM5 (FAST'25 Eq. 2 example), {_SAME_NICS}")
H100_NODE = Node("h100x8", H100, source=f"8 × H100-SXM5, {_SAME_NICS}")
H20_NODE = Node("h20x8", H20, source=f"8 × H20, {_SAME_NICS}")

NODES: dict[str, Node] = {n.name: n for n in (A800_NODE, A800_NODE_8X400G, A100_NODE, H800_NODE,
                                              H100_NODE, H20_NODE)}


def get_node(name: str | Node) -> Node:
    """Look a node up by name ("a800x8", "H800x8", ...; a bare GPU name gives its 8-GPU node)."""
    if isinstance(name, Node):
        return name
    key = str(name).strip().lower()
    if key in NODES:
        return NODES[key]
    if key in _GPU_ALIASES:
        gpu = _GPU_ALIASES[key]
        for node in NODES.values():
            if node.gpu is gpu and node.nic_count == 4:
                return node
    raise ValueError(f"node: unknown node {describe(name)}; allowed: {', '.join(NODES)} "
                     f"(or a GPU name: {', '.join(sorted(GPUS))})")
