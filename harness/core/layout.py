"""The parallel layout, derived and checked in ONE place.

    world = nodes x accelerators_per_node
    DP    = world / (TP x PP x CP)
    GA    = GBS / (DP x MBS)                  (gradient accumulation = microbatches per step)

E.g. gpt3 on 64 DGX H100 (NVIDIA v4.0): world 512, TP 4, PP 8, CP 1 -> DP 16; GBS 2304, MBS 2
-> GA = 2304 / (16 x 2) = 72 microbatches per step; with VP 4 the 96 layers make 8 x 4 = 32
chunks of 3 layers.

Expert parallelism (mixture-of-experts models) does not add to the world: the routed experts split
over EP ranks carved out of the attention ranks, so EP must divide TP x CP x DP / expert TP (expert
TP is 1 here: each expert whole on one rank). E.g. DeepSeek-V3 on 256 GPUs at TP 1 PP 4: DP 64,
EP 64 -> 4 of the 256 experts per rank.
"""

from __future__ import annotations

from harness.core.errors import ConfigError
from harness.core.schema import Strict

DEGREES = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "vp": "virtual_pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
}


class Layout(Strict):
    nodes: int
    procs_per_node: int
    world_size: int
    tp: int
    pp: int
    vp: int
    cp: int
    dp: int
    ep: int = 1
    """Expert parallelism (1: no experts, or all on every rank); a default, so plan.json files
    written before it still load."""
    micro_batch_size: int
    global_batch_size: int
    grad_accum: int
    """Microbatches per rank per optimizer step."""

    def describe(self) -> str:
        return (
            f"{self.nodes} node(s) x {self.procs_per_node} = {self.world_size} ranks: "
            f"TP {self.tp} x PP {self.pp} (VP {self.vp}) x CP {self.cp} x DP {self.dp}"
            f"{f' (EP {self.ep})' if self.ep > 1 else ''}; "
            f"GBS {self.global_batch_size} = DP {self.dp} x MBS {self.micro_batch_size} x GA {self.grad_accum}"
        )


def derive(
    cfg,
    nodes: int,
    procs_per_node: int,
    domain_size: int | None = None,
    num_layers: int | None = None,
    supports: tuple[str, ...] = (),
) -> Layout:
    """Check the degrees in `cfg` against the world and batch; raise ConfigError naming numbers."""
    tp, pp = cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size
    vp, cp = cfg.virtual_pipeline_model_parallel_size, cfg.context_parallel_size
    ep = getattr(cfg, "expert_model_parallel_size", 1)  # only mixture-of-experts configs have it
    for short, value in (("tp", tp), ("pp", pp), ("vp", vp), ("cp", cp), ("ep", ep)):
        if value > 1 and short not in supports:
            # The config's refused Switch for this degree, where it has one, says why.
            sw = getattr(cfg, "SWITCHES", {}).get(DEGREES[short])
            raise ConfigError(
                f"{DEGREES[short]}={value}: this benchmark supports data parallelism"
                f"{' plus ' + '/'.join(s.upper() for s in supports) if supports else ' only'}"
                f"{f' ({sw.why})' if sw and sw.why else ''}; --set {DEGREES[short]}=1"
            )
    world = nodes * procs_per_node
    model_parallel = tp * pp * cp
    if world % model_parallel:
        raise ConfigError(
            f"layout: TP {tp} x PP {pp} x CP {cp} = {model_parallel} does not divide the world size "
            f"{world} ({nodes} node(s) x {procs_per_node}); choose degrees whose product divides {world}"
        )
    domain = domain_size or procs_per_node
    if tp > domain:
        raise ConfigError(
            f"layout: TP {tp} exceeds the {domain} accelerators of one NVLink domain; "
            f"tensor parallelism must stay within it"
        )
    if vp > 1 and pp == 1:
        raise ConfigError(f"layout: VP {vp} needs pipeline parallelism (PP > 1)")
    if num_layers is not None and num_layers % (pp * vp):
        raise ConfigError(
            f"layout: {num_layers} layers do not split into PP {pp} x VP {vp} = {pp * vp} equal chunks"
        )
    dp = world // model_parallel
    gbs, mbs = cfg.global_batch_size, cfg.micro_batch_size
    if gbs % (dp * mbs):
        raise ConfigError(
            f"layout: global_batch_size {gbs} is not a multiple of DP {dp} x micro_batch_size {mbs} "
            f"= {dp * mbs}; pick GBS as a multiple of {dp * mbs}"
        )
    if (tp * cp * dp) % ep:  # expert TP 1: EP groups are carved out of TP x CP x DP
        raise ConfigError(
            f"layout: EP {ep} does not divide TP {tp} x CP {cp} x DP {dp} = {tp * cp * dp} "
            f"(expert tensor parallelism 1); choose EP dividing {tp * cp * dp}"
        )
    ga = gbs // (dp * mbs)
    if pp > 1 and vp > 1 and ga % pp:
        raise ConfigError(
            f"layout: interleaved pipeline needs microbatches per step ({ga}) divisible by PP {pp}"
        )
    return Layout(
        nodes=nodes,
        procs_per_node=procs_per_node,
        world_size=world,
        tp=tp,
        pp=pp,
        vp=vp,
        cp=cp,
        dp=dp,
        ep=ep,
        micro_batch_size=mbs,
        global_batch_size=gbs,
        grad_accum=ga,
    )
