"""R-GAT on IGBH: the GNN reference implementation (see README.md)."""
