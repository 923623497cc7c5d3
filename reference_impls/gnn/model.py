"""R-GAT, as in the reference (mlcommons/training graph_neural_network, `RGNN(model='rgat')`).

Each layer is a PyG `HeteroConv` holding one `GATConv(in, hidden // heads, heads,
add_self_loops=False)` per edge type, summed per destination type; leaky_relu and dropout between
layers; a final `Linear(hidden, num_classes)` on the seed papers.

One difference that changes nothing numerically: a GATConv whose output can never reach the seed
papers (in the last layer every edge type not into `paper`; one layer earlier those feeding only
such convs, e.g. author->institute) is not built. The reference builds them; they get no gradient,
so Adam never moves them and the loss is identical. Leaving them out saves their compute and lets
DDP run without `find_unused_parameters`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, HeteroConv

from reference_impls.gnn.data import edge_types as graph_edge_types


class RGAT(torch.nn.Module):
    def __init__(
        self,
        edge_types,
        in_channels: int,
        hidden_channels: int,
        num_classes: int,
        num_layers: int = 3,
        heads: int = 4,
        dropout: float = 0.2,
        seed_type: str = "paper",
    ):
        super().__init__()
        self.seed_type = seed_type
        self.dropout = dropout
        self.convs = torch.nn.ModuleList()
        per_layer, needed = [], {seed_type}  # walk back from the seeds: which convs matter
        for _ in range(num_layers):
            kept = [et for et in edge_types if et[2] in needed]
            per_layer.append(kept)
            needed = {et[0] for et in kept}
        for i, layer_types in enumerate(reversed(per_layer)):
            c_in = in_channels if i == 0 else hidden_channels
            self.convs.append(
                HeteroConv(
                    {
                        et: GATConv((c_in, c_in), hidden_channels // heads, heads=heads, add_self_loops=False)
                        for et in layer_types
                    },
                    aggr="sum",
                )
            )
        self.lin = torch.nn.Linear(hidden_channels, num_classes)

    @classmethod
    def from_config(cls, cfg) -> RGAT:
        """The model a GnnConfig describes, over the edge types of its graph."""
        return cls(
            graph_edge_types(cfg.num_nodes),
            cfg.in_channels,
            cfg.hidden_channels,
            cfg.num_classes,
            cfg.num_layers,
            cfg.num_heads,
            cfg.dropout,
        )

    def forward(self, x_dict: dict, edge_index_dict: dict, batch_size: int) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x_dict = conv(x_dict, edge_index_dict)
            if i != len(self.convs) - 1:
                x_dict = {
                    k: F.dropout(F.leaky_relu(x), p=self.dropout, training=self.training)
                    for k, x in x_dict.items()
                }
        return self.lin(x_dict[self.seed_type][:batch_size])
