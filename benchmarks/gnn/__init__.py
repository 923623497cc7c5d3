"""GNN (R-GAT on IGBH): rules side. Training code is in reference_impls/gnn/."""
